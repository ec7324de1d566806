"""Ao et al. §7's extensions, demonstrated in the simulator (every number measured by running it).

* Time-varying rates (§7.1): Nested WAIT with thresholds fixed for one rate vs re-derived from the arrival rate of
  the last ``window`` seconds (``adapt_window``), under a piecewise-constant Poisson rate low → high → low.
* Segment design (§7.2): the same length distribution cut into S segments (equal-share output bins); the
  memory terms of (17) and the simulated throughput and latency for each S.
"""
from __future__ import annotations

import math

import numpy as np

from ...batchtime.linear import LinearBatchTime
from ...batchtime.registry import make_batch_time_model
from ...engine.replica import Replica, ReplicaConfig
from ...hardware.gpus import gpu as gpu_preset
from ...hardware.memory import kv_capacity_blocks
from ...hardware.models import model as model_preset
from ...schedulers.registry import create_scheduler
from ...schedulers.wait.iteration_time import wait_coefficients
from ...schedulers.wait.nested import memory_requirement, nested_thresholds, segments
from ...schedulers.wait.prompt_types import length_samples, types_from_lengths
from ...schedulers.wait.synthetic_workloads import Mixture
from ...sim.simulator import simulate
from ...workload.arrivals.processes import Piecewise, Poisson
from ...workload.lengths.length_presets import length_preset
from ...workload.workload import OpenLoop, Workload
from .paper_model import paper_metrics

# two short types (λ, l, l') = (2r, 10, 10), (r, 10, 20): per-stage counts of tens, so thresholds can follow the rate
TV_TYPES = ((2.0, 10, 10), (1.0, 10, 20))


def _replica(scheduler: str, params: dict, d0: float, d1: float, kv: int, cap: int) -> Replica:
    cfg = ReplicaConfig(num_blocks=kv // 16, block_size=16, max_num_seqs=cap, max_num_batched_tokens=1 << 16,
                        max_model_len=1 << 20)
    return Replica(0, create_scheduler(scheduler, **params), LinearBatchTime.from_wait(d0, d1), cfg)


def _kv(model: str, gpu: str) -> int:
    return kv_capacity_blocks(model_preset(model), gpu_preset(gpu), gpu_memory_utilization=0.9, block_size=16) * 16


def time_varying(duration: float, window: float, model: str = "llama-2-7b", gpu: str = "a100",
                 low: float = 500.0, high: float = 1500.0, seed: int = 0) -> list[dict]:
    """§7.1: rate low for a third of ``duration``, high for a third, low again; Nested WAIT (rule fluid, eq. (1)
    with d0, d1 fitted to the roofline) with thresholds for the low rate, for the high rate, and adaptive."""
    d0, d1, _ = wait_coefficients(make_batch_time_model("roofline", model, gpu))
    third = duration / 3
    schedule = [(0.0, low), (third, high), (2 * third, low)]
    share = sum(w for w, _, _ in TV_TYPES)
    types = ",".join(f"{w / share}:{l}:{lp}" for w, l, lp in TV_TYPES)  # rates are rescaled by `rate` below
    lengths = Mixture([(w, l, lp + 1) for w, l, lp in TV_TYPES])
    base = {"types": types, "rule": "fluid", "d0": d0, "d1": d1}
    runs = [(f"nested-wait static (λ = {low:g})", "nested-wait", {**base, "rate": low}),
            (f"nested-wait static (λ = {high:g})", "nested-wait", {**base, "rate": high}),
            (f"nested-wait adapt_window = {window:g} s", "nested-wait", {**base, "rate": low, "adapt_window": window}),
            ("sarathi", "sarathi", {})]
    kv = _kv(model, gpu)
    rows = []
    for label, name, params in runs:
        rep = _replica(name, _scaled(params, share), d0, d1, kv, 2048)
        wl = Workload(Piecewise(schedule), lengths, duration=duration, seed=seed)
        pm = paper_metrics(simulate(OpenLoop(wl.requests()), [rep], seed=seed), rep)
        seen = [n for _, n in getattr(rep.scheduler, "adapted", [])] or [getattr(rep.scheduler, "n", [0])[0]]
        rows.append({"policy": label, "finished": pm["finished"], "offered": pm["offered"],
                     "throughput_tok_s": pm["throughput"], "latency_s": pm["latency"], "ttft_s": pm["ttft"],
                     "preemptions": pm["preemptions"], "n1_min": min(seen), "n1_max": max(seen)})
    return rows


def _scaled(params: dict, share: float) -> dict:
    """The types string holds rate shares; the scheduler's `rate` is the total it scales them to."""
    if "types" not in params:
        return params
    rate = params["rate"]
    types = ",".join(f"{float(r) * rate}:{l}:{lp}" for r, l, lp in (t.split(":") for t in params["types"].split(",")))
    return {**params, "types": types, "rate": rate}


def segment_design(n: int, model: str = "llama-2-7b", gpu: str = "a100", lengths: str = "lmsys",
                   rate: float = 20.0, cap: int = 256, counts=(1, 2, 5, 10, 20), delta: float = 0.1,
                   seed: int = 0) -> list[dict]:
    """§7.2: one length distribution cut into S equal-share segments. For each S: the thresholds of the B rule,
    the terms of (17) (M(n), the boundary-queue term Σ(l + L'_{s−1})n_s, the buffer) for a horizon of the run's
    length, and Nested WAIT's simulated throughput and latency (eq. (1) timing, B = ``cap``, A100 KV)."""
    d0, d1, _ = wait_coefficients(make_batch_time_model("roofline", model, gpu))
    prompts, outputs = length_samples(lengths)
    dist = length_preset(lengths)
    horizon = n / rate
    kv = _kv(model, gpu)
    rows = []
    for S in counts:
        types = types_from_lengths(prompts, outputs, rate, bins=S)
        segs = segments(types)
        thresholds = nested_thresholds(segs, cap)
        prompt = float(np.mean(prompts))
        req = memory_requirement(prompt, segs, thresholds, d0, d1, horizon=horizon, delta=delta)
        queue_term = sum((prompt + segs[i - 1].last) * thresholds[i] for i in range(1, len(segs)))
        spec = ",".join(f"{t.rate}:{t.prompt}:{t.decode}" for t in types)
        rep = _replica("nested-wait", {"types": spec, "batch_cap": cap}, d0, d1, kv, cap)
        wl = Workload(Poisson(rate), dist, num_requests=n, seed=seed)
        pm = paper_metrics(simulate(OpenLoop(wl.requests()), [rep], seed=seed), rep)
        rows.append({"segments": len(segs), "thresholds": ",".join(map(str, thresholds)),
                     "term1_M_n": req["peak"], "term2_queues": queue_term,
                     "term3_buffer": req["buffer"] - queue_term if math.isfinite(req["buffer"]) else math.inf,
                     "drift_ok": sum(req["drift_ok"]), "throughput_tok_s": pm["throughput"],
                     "window_tok_s": pm["throughput_window"], "latency_s": pm["latency"],
                     "preemptions": pm["preemptions"]})
    return rows

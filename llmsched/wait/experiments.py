"""The pieces of ``llmsched reproduce wait``: each returns rows of measured numbers (nothing typed in)."""
from __future__ import annotations

import math

import numpy as np

from ..experiment import RunConfig, build_replicas
from ..metrics.summary import summarize
from ..sim.simulator import simulate
from ..workload.arrivals import Constant, Poisson
from ..workload.lengths import Empirical
from ..workload.workload import OpenLoop, Workload
from .classes import length_samples
from .fluid import PromptType, fluid
from .nested import memory_requirement, nested_thresholds, segments
from .sim import paper_metrics, run_model
from .workloads import Mixture

D0, D1 = 0.01, 0.001  # the toy's iteration time (any values: M* = 12 for all, spec §1.8)


def toy(duration: float, seeds: int) -> list[dict]:
    """Example 1/2: one type l = l' = 1, M = M* = 12, λ = 4/T*: FCFS (paper eviction) vs WAIT with n = 4."""
    T = D0 + 12 * D1
    lam = 4 / T
    lengths = Mixture([(1, 1, 2)])
    rows = []
    runs = [("fcfs (evict-newest, restart)", "fcfs", {"fit": False}, "evict-newest"),
            ("fcfs (recompute preemption)", "fcfs", {"fit": True}, "error"),
            ("wait n=4", "wait", {"types": f"{lam}:1:1", "thresholds": "4", "max_wait": 0}, "error")]
    for arrivals in ("poisson", "constant"):
        for label, name, params, overflow in runs:
            res = [_toy_run(name, lengths, lam, duration, seed, arrivals, overflow, params) for seed in range(seeds)]
            rows.append({"arrivals": arrivals, "policy": label,
                         "completions_per_iteration": float(np.mean([r["throughput"] for r in res])) * T,
                         "loss_vs_fluid": 1 - float(np.mean([r["throughput"] for r in res])) / lam,
                         "evictions": int(sum(r["evictions"] for r in res)),
                         "latency_s": float(np.mean([r["latency"] for r in res]))})
    return rows


def _toy_run(name, lengths, lam, duration, seed, arrivals, overflow, params):
    from ..batchtime.linear import LinearBatchTime
    from ..engine.replica import Replica, ReplicaConfig
    from ..schedulers.registry import create_scheduler
    process = Poisson(lam) if arrivals == "poisson" else Constant(lam)
    cfg = ReplicaConfig(num_blocks=12, block_size=1, max_num_seqs=1 << 20, max_num_batched_tokens=1 << 30,
                        max_model_len=1 << 20, oracle=name == "wait", overflow=overflow)
    rep = Replica(0, create_scheduler(name, **params), LinearBatchTime.from_wait(D0, D1), cfg)
    wl = Workload(process, lengths, duration=duration, seed=seed)
    return paper_metrics(simulate(OpenLoop(wl.requests()), [rep], seed=seed), rep)


def scaling(base: float, factors: list[int], seeds: int) -> list[dict]:
    """Thm 1: WAIT at the equilibrium thresholds (zero drift), horizon ζ·base: gap·√ζ and latency/√ζ flat; and at
    τ = 1.25·T* (negative drift): latency flat."""
    lam = 4 / (D0 + 12 * D1)
    lengths = Mixture([(1, 1, 2)])
    rows = []
    for label, thresholds, memory in (("n = n* = 4 (M = M*)", "4", 12), ("n = 5 (τ = 1.25 T*)", "5", 15)):
        for z in factors:
            res = [run_model("wait", lengths, lam, memory, d0=D0, d1=D1, duration=base * z, seed=s,
                             horizon=base * z, types=f"{lam}:1:1", thresholds=thresholds, max_wait=0,
                             overflow="error") for s in range(seeds)]
            # the paper's Thp_T: decode tokens of prompts completed by T, per second, against Thp* = λ·l'
            gap = 1 - float(np.mean([r["finished"] for r in res])) / (lam * base * z)
            lat = float(np.mean([r["latency"] for r in res]))
            rows.append({"thresholds": label, "zeta": z, "horizon_s": base * z, "gap": gap,
                         "gap_x_sqrt_zeta": gap * math.sqrt(z), "latency_s": lat,
                         "latency_over_sqrt_zeta": lat / math.sqrt(z),
                         "evictions": int(sum(r["evictions"] for r in res))})
    return rows


def overflow_rate(delta: float, runs: int, duration: float) -> list[dict]:
    """Thm 2: Nested WAIT with M from (14) for δ: the fraction of runs with any eviction stays ≤ δ; and with
    M = M(n) (no buffer) for contrast."""
    types = [PromptType(3.0, 4, 4), PromptType(2.0, 4, 9), PromptType(1.0, 4, 14)]  # paper units
    d0, d1 = 0.05, 0.0005
    segs = segments(types)
    n = [6, 4, 2]
    req = memory_requirement(4, segs, n, d0, d1, horizon=duration, delta=delta)
    lengths = Mixture([(t.rate, t.prompt, t.output_len) for t in types])
    rows = []
    spec = ",".join(f"{t.rate}:{t.prompt}:{t.decode}" for t in types)
    for label, memory in (("M(n) + buffer (14)", math.ceil(req["total"])), ("M(n) only", math.ceil(req["peak"]))):
        res = [run_model("nested-wait", lengths, 6.0, memory, d0=d0, d1=d1, duration=duration, seed=s,
                         types=spec, thresholds=",".join(map(str, n)), max_wait=0, guard_memory=False)
               for s in range(runs)]
        rows.append({"memory": label, "M": memory, "runs": runs, "delta": delta,
                     "runs_with_overflow": sum(r["evictions"] > 0 for r in res),
                     "overflow_rate": sum(r["evictions"] > 0 for r in res) / runs,
                     "drift_ok": all(req["drift_ok"])})
    return rows


def compare(schedulers: list[tuple[str, dict]], lengths, rate: float, num_requests: int, batch_cap: int,
            model: str = "llama-2-7b", gpu: str = "a100", seed: int = 0) -> list[dict]:
    """Schedulers on one workload with the same batch-size cap B (max_num_seqs), the roofline batch time."""
    rows = []
    for name, params in schedulers:
        cfg = RunConfig(scheduler=name, scheduler_params=params, model=model, gpu=gpu, max_num_seqs=batch_cap,
                        oracle=name == "wait", seed=seed)
        reps = build_replicas(cfg)
        wl = Workload(Poisson(rate), lengths, num_requests=num_requests, seed=seed)
        result = simulate(OpenLoop(wl.requests()), reps, seed=seed)
        s = summarize(result)
        pm = paper_metrics(result, reps[0])
        rows.append({"scheduler": name, "finished": s["counts"]["finished"], "offered": s["counts"]["offered"],
                     "throughput_tok_s": pm["throughput"], "window_tok_s": pm["throughput_window"],
                     "latency_s": pm["latency"], "ttft_s": pm["ttft"],
                     "preemptions": pm["preemptions"], "kv_blocks": reps[0].config.num_blocks})
    return rows


def lmsys_lengths(n: int, seed: int = 0):
    """The LMSYS-Chat-1M length sample (the paper's trace; authors' file, input < 500, output < 600)."""
    prompts, outputs = length_samples("lmsys_chat_1m_lengths_sample_input_lt500_output_lt600.csv")
    return Empirical(prompts, outputs, draw="shuffle")


def nested_params(lengths_name: str, edges: str, rate: float) -> dict:
    return {"lengths": lengths_name, "edges": edges, "rate": rate}

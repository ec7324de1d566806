"""The pieces of ``llmsched reproduce wait``: each returns rows of measured numbers (nothing typed in)."""
from __future__ import annotations

import math

import numpy as np

from ...batchtime.registry import make_batch_time_model
from ...experiment import RunConfig, build_replicas
from ...hardware.gpus import gpu as gpu_preset
from ...hardware.memory import kv_capacity_blocks
from ...hardware.models import model as model_preset
from ...metrics.summary import summarize
from ...schedulers.wait.fluid_model import PromptType, batch_cap_thresholds
from ...schedulers.wait.nested import memory_requirement, nested_thresholds, segment_memory, segments
from ...schedulers.wait.prompt_types import length_samples
from ...schedulers.wait.synthetic_workloads import Mixture
from ...sim.simulator import simulate
from ...workload.arrivals.processes import Constant, Poisson
from ...workload.lengths.distributions import Empirical
from ...workload.workload import OpenLoop, Workload
from .paper_model import paper_metrics, run_model

D0, D1 = 0.01, 0.001  # the toy's iteration time (any values: M* = 12 for all)


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
    from ...batchtime.linear import LinearBatchTime
    from ...engine.replica import Replica, ReplicaConfig
    from ...schedulers.registry import create_scheduler
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
            model: str = "llama-2-7b", gpu: str = "a100", seed: int = 0, batch_time: str = "roofline",
            batch_time_params: dict | None = None, num_blocks: int | None = None, block_size: int = 16,
            overflow: str = "error", max_num_batched_tokens: int = RunConfig.max_num_batched_tokens) -> list[dict]:
    """Schedulers on one workload with the same batch-size cap B (max_num_seqs), the same KV memory and the same
    batch-time model (the roofline, or the paper's eq. (1) with ``batch_time="linear"``)."""
    rows = []
    for name, params in schedulers:
        cfg = RunConfig(scheduler=name, scheduler_params=params, model=model, gpu=gpu, max_num_seqs=batch_cap,
                        oracle=name == "wait", seed=seed, batch_time=batch_time,
                        batch_time_params=dict(batch_time_params or {}), num_blocks=num_blocks,
                        block_size=block_size, overflow=overflow, max_num_batched_tokens=max_num_batched_tokens,
                        latency_boundary="engine")
        reps = build_replicas(cfg)
        wl = Workload(Poisson(rate), lengths, num_requests=num_requests, seed=seed)
        result = simulate(OpenLoop(wl.requests()), reps, seed=seed)
        s = summarize(result)
        pm = paper_metrics(result, reps[0])
        log = reps[0].steps
        steps = max(len(log), 1)
        decodes = sum(log.num_decodes)
        rows.append({"scheduler": name, "finished": s["counts"]["finished"], "offered": s["counts"]["offered"],
                     "throughput_tok_s": pm["throughput"], "window_tok_s": pm["throughput_window"],
                     "latency_s": pm["latency"], "ttft_s": pm["ttft"],
                     "preemptions": pm["preemptions"] + pm["evictions"],
                     "kv_tokens": reps[0].config.num_blocks * reps[0].config.block_size,
                     "steps": len(log), "mean_step_ms": 1e3 * sum(log.duration) / steps,
                     "decodes_per_step": decodes / steps,
                     "prefill_only_steps": sum(1 for d, p in zip(log.num_decodes, log.num_prefills) if p and not d)
                     / steps,
                     "peak_kv_tokens": max(log.kv_used_blocks, default=0) * reps[0].config.block_size,
                     "resident_kv": pm["kv"]["resident_kv"], "paused_kv": pm["kv"]["paused_kv"],
                     "batch_kv": pm["kv"]["batch_kv"], "waiting_q": pm["kv"]["waiting"]})
    return rows


# §6's three settings. The paper ran Vidur (A100 profiles, Llama-2-7B) with one batch-size cap B for all and
# states no M (Vidur: the A100-80GB's KV); its theory uses eq. (1). "memory-bound" lifts the cap so the KV binds.
SETTINGS = {
    "vidur-like": dict(batch_time="roofline", cap=256, note="roofline timing, B = 256 binds, M = A100 KV"),
    "eq1-linear": dict(batch_time="linear", cap=256, note="eq. (1) d0 + d1·KV (fitted), B = 256, M = A100 KV"),
    "memory-bound": dict(batch_time="linear", cap=2048, note="eq. (1), B = 2048 (never binds), M = A100 KV: "
                                                            "thresholds scaled to fit M"),
}


def memory_cap(types: list[PromptType], memory: float, cap: int) -> int:
    """The B at which the B-rule's full batch holds ``memory`` KV tokens on average: the prompts in flight,
    Σ λ_j(l'_j+1)·τ, times their mean KV, Σλc/Σλ(l'+1), equal M. The experiments' rule with M, not B, binding.
    (Per-stage thresholds of at least 1 make the worst case M(n) of (13) exceed any A100 KV here, so the bound
    itself cannot be the target.)"""
    stages = sum(t.rate * t.stages for t in types)
    kv = sum(t.rate * t.memory for t in types)
    return max(1, min(cap, int(memory * stages / kv)))


def compare_setting(setting: str, algo: str, types: list[PromptType], lengths, rate: float, num_requests: int,
                    model: str, gpu: str, algo_params: dict | None = None, cap: int | None = None) -> dict:
    """One §6 comparison: WAIT or Nested WAIT (the paper's Algorithm and the authors'-code entry gate) vs vLLM
    and Sarathi under one of :data:`SETTINGS`. Returns the rows and the thresholds used, with the checks of
    (11)/(12)."""
    cfg = SETTINGS[setting]
    cap = cap or cfg["cap"]
    nested = algo == "nested-wait"
    bt = make_batch_time_model(cfg["batch_time"], model, gpu) if cfg["batch_time"] == "linear" else None
    params = dict(bt.coefficients) if bt is not None else {}
    btp = {k: params[k] for k in ("const", "per_context") if params.get(k)}
    if bt is not None:  # the paper's form: d0 + d1·KV, fitted to the roofline on decode-dominated batches
        from ...schedulers.wait.iteration_time import wait_coefficients
        d0, d1, _ = wait_coefficients(make_batch_time_model("roofline", model, gpu))
        btp = {"const": d0, "per_context": d1}
    kv = kv_capacity_blocks(model_preset(model), gpu_preset(gpu), gpu_memory_utilization=0.9, block_size=16) * 16
    b_algo = memory_cap(types, kv, cap) if cap > 256 else cap
    base = {"types": ",".join(f"{t.rate}:{t.prompt}:{t.decode}" for t in types), "batch_cap": b_algo,
            **(algo_params or {})}
    fluid_random = {**base, "rule": "fluid-random", "slack": 0.01}
    if btp:
        fluid_random.update(d0=btp["const"], d1=btp["per_context"])
    runs = [(algo, base), (algo, {**base, "gate": "entry"}), (algo, fluid_random), ("vllm", {}), ("sarathi", {})]
    rows = compare(runs, lengths, rate, num_requests, cap, model=model, gpu=gpu, batch_time=cfg["batch_time"],
                   batch_time_params=btp)
    rows[0]["scheduler"] = f"{algo} (Alg. {2 if nested else 1})"
    rows[1]["scheduler"] = f"{algo} gate=entry"
    rows[2]["scheduler"] = f"{algo} (Alg. {2 if nested else 1}) fluid-random"
    if nested:
        segs = segments(types)
        n = nested_thresholds(segs, b_algo)
        prompt = sum(t.rate * t.prompt for t in types) / sum(t.rate for t in types)
        mem = segment_memory(prompt, segs, n)
        T = btp["const"] + btp["per_context"] * mem if btp else math.nan
        drift = [segs[0].rate * T < n[0]] + [s.survive * n[i] < n[i + 1] for i, s in enumerate(segs[1:])]
    else:
        n = batch_cap_thresholds(types, b_algo)
        mem = sum(nj * t.memory for nj, t in zip(n, types))
        T = btp["const"] + btp["per_context"] * mem if btp else math.nan
        drift = [t.rate * T <= nj for t, nj in zip(types, n)]
    info = {"setting": setting, "algo_batch_cap": b_algo, "thresholds": n, "full_batch_kv": mem, "kv_tokens": kv,
            "cond_ok": drift if btp else None}
    return {"rows": rows, "thresholds": info}


def reserve_ablation(num_requests: int, model: str = "llama-2-7b", gpu: str = "a100") -> list[dict]:
    """Where the preemptions came from: the paper's Algorithms in the memory-bound setting (eq. (1), B = 2048, the
    A100's KV binds) with the old gate (free KV of this step only, ``reserve=false``) and with memory-feasible
    admission (``llmsched.schedulers.wait.reserve``), with the KV ledger of each run."""
    from ...schedulers.wait.iteration_time import wait_coefficients
    from ...schedulers.wait.synthetic_workloads import WAIT_WORKLOADS
    d0, d1, _ = wait_coefficients(make_batch_time_model("roofline", model, gpu))
    kv = kv_capacity_blocks(model_preset(model), gpu_preset(gpu), gpu_memory_utilization=0.9, block_size=16) * 16
    rows = []
    for algo, wl in (("wait", WAIT_WORKLOADS["wait-high"]()),
                     ("nested-wait", WAIT_WORKLOADS["nested-synthetic"]().scaled(55 / 66))):
        types = list(wl.types)
        spec = ",".join(f"{t.rate}:{t.prompt}:{t.decode}" for t in types)
        runs = [(algo, {"types": spec, "batch_cap": memory_cap(types, kv, 2048), "reserve": r}) for r in (False, True)]
        res = compare(runs, wl.lengths, wl.rate, num_requests, 2048, model=model, gpu=gpu, batch_time="linear",
                      batch_time_params={"const": d0, "per_context": d1})
        for (_, params), r in zip(runs, res):
            label = f"{algo} (Alg. {1 if algo == 'wait' else 2})"
            rows.append({**r, "workload": f"{wl.name} {wl.rate:g} QPS", "scheduler": label,
                         "admission": "memory-feasible" if params["reserve"] else "free KV of the step"})
    return rows


def lmsys_lengths(n: int, seed: int = 0):
    """The LMSYS-Chat-1M length sample (the paper's trace; authors' file, input < 500, output < 600)."""
    prompts, outputs = length_samples("lmsys_chat_1m_lengths_sample_input_lt500_output_lt600.csv")
    return Empirical(prompts, outputs, draw="shuffle")


def nested_params(lengths_name: str, edges: str, rate: float) -> dict:
    return {"lengths": lengths_name, "edges": edges, "rate": rate}

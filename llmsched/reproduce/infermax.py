"""Kim et al.'s §4 analysis grid, §5.1 optimal-schedule finding and §6 headline (``llmsched reproduce infermax``,
llmsched/cli/reproduce_infermax.py).

Every number is simulated here with InferMax's own cost model (the authors' Vidur-fitted coefficients, spec 001
§2.2): Llama-2-7B on one A100 (C = 4096) for §4/§5.1, Llama-3-70B with tensor parallelism 4 on A100s
(C = 16384, M = 100K tokens) for §6. Offline workloads have every request at t = 0 (``infermax.offline``).
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..batchtime.linear import INFERMAX_COEFFICIENTS, LinearBatchTime
from ..engine.replica import Replica, ReplicaConfig
from ..request import Request, Status
from ..results_file import write_results
from ..schedulers import create_scheduler
from ..sim.simulator import simulate
from ..theory.infermax.bruteforce import solve_exact
from ..theory.infermax.csp import min_batches, solve
from ..theory.infermax.offline import offline_replica, run_offline
from ..theory.infermax.optimal import run_heuristics
from ..theory.infermax.schedule import Instance
from ..workload.traces.readers import read_trace, resolve_data_file
from ..workload.workload import OpenLoop

PARTS = ("grid", "memory", "eviction", "rank", "csp", "trace")
SEVEN_B = "llama-2-7b/a100"
SEVENTY_B = "llama-3-70b-tp4/a100"


def cost(name: str) -> LinearBatchTime:
    return LinearBatchTime.from_infermax(**INFERMAX_COEFFICIENTS[name])


def offline_run(name: str, prompt, output, M: int, C: int = 4096, **params) -> dict:
    prompts = prompt if isinstance(prompt, list) else None
    outputs = output if isinstance(output, list) else None
    n = len(prompts) if prompts else len(outputs)
    reqs = [Request(k, 0.0, prompts[k] if prompts else prompt, outputs[k] if outputs else output) for k in range(n)]
    rep = offline_replica(name, cost(SEVEN_B), M, C, oracle=True, **params)
    res = run_offline(rep, reqs)
    return {"latency_s": res.latency, "tps": res.tps, "ttft_s": res.ttft, "tpot_s": res.tpot,
            "evictions": res.evictions, "kv_used": res.mean_kv_used, "rejected": res.rejected}


def uniform(n: int, prompt: int, output: int) -> tuple[list[int], list[int]]:
    return [prompt] * n, [output] * n


# --- §4.2-4.4: contention grid and eviction-free variants --------------------------------------------------------
def grid(fast: bool) -> list[dict]:
    sizes = (32, 256) if fast else (32, 1024)
    prompts = (16, 256) if fast else (16, 128, 1024)
    outputs = (32,) if fast else (32, 1024)
    names = ("infermax-vllm", "infermax-sarathi", "infermax-sarathi-pc", "infermax-vllm-ef", "infermax-sarathi-ef",
             "infermax-sarathi-pc-ef")
    rows = []
    for B in sizes:
        for prompt in prompts:
            for output in outputs:
                for name in names:
                    p, o = uniform(B, prompt, output)
                    rows.append({"B": B, "I": prompt, "O": output, "scheduler": name,
                                 **offline_run(name, p, o, M=100_000)})
    return rows


# --- §4.5: memory size M -----------------------------------------------------------------------------------------
def memory(fast: bool) -> list[dict]:
    B = 256 if fast else 1024
    rows = []
    for M in ((100, 1_000, 10_000) if fast else (100, 1_000, 10_000, 100_000)):
        for prompt in (16, 64):
            if prompt + 31 > M:
                continue
            for name in ("infermax-vllm", "infermax-vllm-ef", "infermax-sarathi", "infermax-sarathi-ef"):
                p, o = uniform(B, prompt, 32)
                rows.append({"M": M, "I": prompt, "O": 32, "B": B, "scheduler": name, **offline_run(name, p, o, M=M)})
    return rows


# --- §4.5 ablation: why evictions pay less here than in the paper -------------------------------------------------
def eviction_run(name: str, M: int, prompt: int, B: int, block: int = 1, **params) -> dict:
    """One §4.5 offline run (O = 32) with the three ways of counting throughput: generated tokens (Σ O_i) per
    second of makespan (the paper's definition), every token the model processed (refills of
    evicted requests included) per second, and the mean over requests of O_i / completion time."""
    config = ReplicaConfig(num_blocks=M // block, block_size=block, max_num_seqs=1_000_000,
                           max_num_batched_tokens=4096, max_model_len=1 << 30, oracle=True)
    rep = Replica(0, create_scheduler(name, **params), cost(SEVEN_B), config)
    reqs = [Request(k, 0.0, prompt, 32) for k in range(B)]
    res = run_offline(rep, reqs, record=True)
    processed = sum(n for b in res.batches for n, kind in b.values() if kind != "e")
    return {"tps": res.tps, "processed_tps": processed / res.latency,
            "request_tps": float(np.mean([r.output_len / r.finish for r in reqs])),
            "evictions": res.evictions, "refill_share": 1 - B * (prompt + 31) / processed,
            "mean_batch": float(np.mean([sum(1 for _, kind in b.values() if kind != "e") for b in res.batches])),
            "ttft_s": res.ttft, "tpot_s": res.tpot}


def eviction(fast: bool) -> list[dict]:
    B = 256 if fast else 1024
    rows = []
    cases = [(100, 16, 1, {}), (100, 16, 16, {}), (100, 16, 1, {"running_order": "kv_desc"}),
             (1_000, 16, 1, {}), (1_000, 16, 16, {}), (1_000, 64, 1, {})]
    for M, prompt, block, params in (cases[:1] + cases[3:4] if fast else cases):
        for base in ("infermax-vllm", "infermax-sarathi"):
            ev = eviction_run(base, M, prompt, B, block, **params)
            ef = eviction_run(base + "-ef", M, prompt, B, block)
            rows.append({"M": M, "I": prompt, "block": block, "scheduler": base + "".join(
                f" {k}={v}" for k, v in params.items()), "tps_ratio": ev["tps"] / ef["tps"],
                "processed_tps_ratio": ev["processed_tps"] / ef["processed_tps"],
                "request_tps_ratio": ev["request_tps"] / ef["request_tps"], "evictions": ev["evictions"],
                "refill_share": ev["refill_share"], "mean_batch": ev["mean_batch"], "mean_batch_ef": ef["mean_batch"],
                "ttft_ratio": ef["ttft_s"] / ev["ttft_s"], "tpot_ratio": ev["tpot_s"] / ef["tpot_s"]})
    return rows


# --- §4.6: length ranking on heterogeneous mixes -----------------------------------------------------------------
GROUPS = {"SI": (8, 16), "LI": (512, 1024), "SO": (8, 16), "LO": (512, 1024)}
MIXES = (("SISO", "LILO"), ("SISO", "LISO"), ("SISO", "SILO"), ("SILO", "LISO"), ("SILO", "LILO"), ("LISO", "LILO"))


def mix(a: str, b: str, B: int, seed: int = 0) -> tuple[list[int], list[int]]:
    """Spec 001 §9.11: half from each group, I and O drawn from the group's two values, shuffled."""
    rng = np.random.default_rng(seed)
    prompts, outputs = [], []
    for k in range(B):
        g = a if k < B // 2 else b
        prompts.append(int(rng.choice(GROUPS[g[:2]])))
        outputs.append(int(rng.choice(GROUPS[g[2:]])))
    order = rng.permutation(B)
    return [prompts[k] for k in order], [outputs[k] for k in order]


def rank(fast: bool) -> list[dict]:
    B = 64 if fast else 512
    rows = []
    for a, b in (MIXES[:2] if fast else MIXES):
        p, o = mix(a, b, B)
        for name in ("infermax-rank-org", "infermax-rank-i", "infermax-rank-o"):
            rows.append({"mix": f"{a}+{b}", "B": B, "scheduler": name,
                         **offline_run(name, p, o, M=100_000)})
    return rows


# --- §5.1: optimal schedules ----------------------------------------------------------------------------------------
def csp(fast: bool, time_limit: float, workers: int) -> list[dict]:
    rows, model = [], cost(SEVEN_B)
    for prompt in ((4, 64) if fast else (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)):
        instance = Instance((prompt,) * 4, (4,) * 4, max(2 * prompt, prompt + 3), 4096)
        heur = {h.name: h for h in run_heuristics(instance, model, ("infermax-vllm", "infermax-vllm-ef",
                                                                      "infermax-sarathi"))}
        exact, schedule = solve_exact(instance, model, chunking=False)
        seeds = [schedule] + [h.schedule for h in sorted(heur.values(), key=lambda h: h.latency)]
        result = solve(instance, model, time_limit=time_limit, workers=workers, hints=seeds)
        rows.append({"I": prompt, "M": instance.kv_slots,
                     "vllm_ms": heur["infermax-vllm"].latency * 1e3, "vllm_ef_ms": heur["infermax-vllm-ef"].latency * 1e3,
                     "sarathi_ms": heur["infermax-sarathi"].latency * 1e3,
                     "whole_pass_opt_ms": exact * 1e3, "whole_pass_evictions": schedule.num_evictions,
                     "csp_ms": result.latency * 1e3 if result.latency else None, "csp_status": result.status,
                     "csp_bound_ms": result.bound * 1e3 if result.bound is not None else None,
                     "csp_evictions": result.schedule.num_evictions if result.schedule else None,
                     "csp_det_s": result.stats["deterministic_time"], "csp_wall_s": result.solve_seconds,
                     "csp_horizon": result.horizon, "csp_batches_lb": min_batches(instance),
                     "proof_covers_all": bool(result.stats["horizon_covers_J_ub"]),
                     "opt_vs_ef": 1 - exact / heur["infermax-vllm-ef"].latency,
                     "opt_vs_vllm": 1 - exact / heur["infermax-vllm"].latency})
    return rows


# --- §6: Azure conversation trace, Llama-3-70B on 4×A100 ------------------------------------------------------------
def trace(fast: bool, path: str) -> list[dict]:
    data = read_trace(resolve_data_file(path))
    n = 600 if fast else len(data)
    arrivals = data.arrivals[:n]
    if fast:
        arrivals = arrivals * 0.1  # 10× the rate, so 600 requests still contend for memory
    runs = [("infermax-vllm", {}, 100_000), ("infermax-sarathi", {}, 100_000), ("infermax-sarathi-pc", {}, 100_000),
            ("infermax", {}, 100_000), ("infermax-vllm-ef", {}, 100_000), ("infermax-sarathi-pc-ef", {}, 100_000),
            ("infermax-vllm", {}, 1 << 40)]
    rows = []
    for name, params, M in runs:
        reqs = [Request(k, float(arrivals[k]), int(data.prompt_lens[k]), int(data.output_lens[k])) for k in range(n)]
        sched = create_scheduler(name, **params)
        config = ReplicaConfig(num_blocks=M, block_size=1, max_num_seqs=1_000_000, max_num_batched_tokens=16384,
                               max_model_len=32768, oracle=True)
        rep = Replica(0, sched, cost(SEVENTY_B), config)
        t0 = time.perf_counter()
        simulate(OpenLoop(reqs), [rep])
        done = [r for r in reqs if r.status is Status.FINISHED]
        ttft = [r.first_token - r.arrival for r in done]
        rows.append({"scheduler": name + ("" if M == 100_000 else " (unlimited M: bound)"), "requests": n,
                     "finished": len(done), "latency_s": max(r.finish for r in done), "evictions": rep.num_preemptions,
                     "mean_ttft_s": float(np.mean(ttft)), "steps": rep.num_steps,
                     "wall_s": time.perf_counter() - t0})
    return rows


# --- output --------------------------------------------------------------------------------------------------------
def table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return "nan" if math.isnan(v) else (f"{v:.4g}" if abs(v) < 1e5 else f"{v:.0f}")
        return str(v)
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in cells]
    return "\n".join(lines)


def reproduce(*, parts: str = ",".join(PARTS), fast: bool = False, trace_file: str = "vidur_splitwise_conv.csv",
              csp_time_limit: float | None = None, workers: int = 1, out: str | None = None) -> dict:
    """The chosen ``parts``, each printed as a table as it finishes and written to ``out``/results.json; ``fast``
    runs CI sizes."""
    chosen = [p.strip() for p in parts.split(",") if p.strip()]
    bad = [p for p in chosen if p not in PARTS]
    if bad:
        raise ValueError(f"--parts: unknown part(s) {', '.join(bad)}; parts: {', '.join(PARTS)}")
    limit = csp_time_limit or (2.0 if fast else 30.0)
    if limit <= 0:
        raise ValueError(f"--csp-time-limit must be > 0 seconds, got {limit}")
    results = {}
    stat = ["latency_s", "tps", "ttft_s", "tpot_s", "evictions", "kv_used"]
    if "grid" in chosen:
        results["grid"] = grid(fast)
        print("§4.2-4.4 offline grid (Llama-2-7B/A100 cost model, C = 4096, M = 100K)")
        print(table(results["grid"], ["B", "I", "O", "scheduler", *stat]) + "\n")
    if "memory" in chosen:
        results["memory"] = memory(fast)
        print("§4.5 memory size M (O = 32)")
        print(table(results["memory"], ["M", "I", "B", "scheduler", *stat]) + "\n")
    if "eviction" in chosen:
        results["eviction"] = eviction(fast)
        print("§4.5 ablation: evicting scheduler over its EF variant (O = 32, B = 1024; ratios > 1 favour evictions): "
              "throughput counted three ways, block size, victim order")
        print(table(results["eviction"], ["M", "I", "block", "scheduler", "tps_ratio", "processed_tps_ratio",
                                      "request_tps_ratio", "evictions", "refill_share", "mean_batch",
                                      "mean_batch_ef", "ttft_ratio", "tpot_ratio"]) + "\n")
    if "rank" in chosen:
        results["rank"] = rank(fast)
        print("§4.6 length ranking on mixes of short/long inputs/outputs (S = {8,16}, L = {512,1024})")
        print(table(results["rank"], ["mix", "B", "scheduler", *stat]) + "\n")
    if "csp" in chosen:
        results["csp"] = csp(fast, limit, workers)
        print(f"§5.1 optimal schedules, O = B = 4, M = max(2I, I+3) (CP-SAT: deterministic time limit {limit:g} per "
              f"instance, {workers} worker(s), seed 0; 'whole pass' = exact optimum over schedules without "
              f"chunking, by exhaustive search; CP-SAT searches chunked schedules too, over a horizon that covers "
              f"every schedule better than the best warm start when proof_covers_all)")
        print(table(results["csp"], ["I", "M", "vllm_ms", "vllm_ef_ms", "sarathi_ms", "whole_pass_opt_ms",
                                 "whole_pass_evictions", "csp_ms", "csp_status", "csp_bound_ms", "csp_evictions",
                                 "csp_det_s", "csp_wall_s", "csp_horizon", "proof_covers_all", "opt_vs_ef",
                                 "opt_vs_vllm"]) + "\n")
    if "trace" in chosen:
        results["trace"] = trace(fast, trace_file)
        print("§6 Azure conversation trace, Llama-3-70B TP4 on A100 cost model, M = 100K, C = 16384 (makespan)")
        print(table(results["trace"], ["scheduler", "requests", "finished", "latency_s", "evictions", "mean_ttft_s",
                                   "steps", "wall_s"]) + "\n")
    if out:
        print(f"wrote {write_results(out, results, indent=2)}")
    return results

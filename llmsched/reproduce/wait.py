"""Ao et al.'s experiments in the simulator, every number measured here (``llmsched reproduce wait``,
llmsched/cli/reproduce_wait.py).

1. Example 2 (toy): one type l = l' = 1 at M = M* = 12 and λ = 4/T*: FCFS with the paper's eviction (newest
   admitted restart from scratch) vs WAIT with n = 4.
2. Theorem 1 scaling: WAIT's throughput gap and latency as the horizon grows by ζ, at zero drift (n = n*) and
   with slack (n = 5).
3. Theorem 2: Nested WAIT's overflow rate with M from eq. (14) for δ, and without the buffer.
4. §6.1: WAIT vs vLLM and Sarathi on the synthetic two-type workloads (authors'-code candidates).
5. §6.2: Nested WAIT vs vLLM and Sarathi on the 10-type synthetic workload at 55 and 550 QPS, and on the LMSYS
   lengths, Llama-2-7B on an A100.
   §6 runs in three settings (``--settings``): vidur-like (roofline timing, B = 256 binds, as in the paper's Vidur
   runs), eq1-linear (the paper's eq. (1) with d0, d1 fitted to the roofline, B = 256) and memory-bound (eq. (1),
   B = 2048 so the A100's KV binds and the baselines preempt); each with the paper's Algorithm and the authors'-
   code entry gate.
   ``--settings authors`` (in the default list) is the authors' own configuration, read from their Vidur fork
   (``llmsched.reproduce.wait_runs.authors``): Llama-3-8B on an A100 with Vidur's KV and timing fitted to Vidur's
   profiles, vLLM with a 4096-token batch, Sarathi with 512-token chunks, WAIT / Nested WAIT with the B rule and
   per-type / per-segment budgets and no token or sequence cap, at the rates and B of their scripts.
6. §7: time-varying rates (static vs adaptive thresholds) and segment design (S segments).
"""
from __future__ import annotations

from ..hardware.memory import kv_capacity_tokens
from ..results_file import write_results
from ..schedulers.wait.parameters import scheduler_types
from ..schedulers.wait.synthetic_workloads import WAIT_WORKLOADS
from ..theory.fluid import PAPER_GPU, PAPER_MODEL
from .wait_runs.authors import compare_authors
from .wait_runs.capacities import lmsys_capacities
from .wait_runs.experiments import (SETTINGS, compare_setting, lmsys_lengths, overflow_rate, reserve_ablation, scaling,
                                    toy)
from .wait_runs.extensions import segment_design, time_varying

LMSYS = "lmsys_chat_1m_lengths_sample_input_lt500_output_lt600.csv"


def reproduce(*, fast: bool = False, out: str | None = None, settings: str = ",".join(["authors", *SETTINGS]),
              model: str = PAPER_MODEL, gpu: str = PAPER_GPU, requests: int | None = None, only: str = "",
              capacity: bool = False, capacity_requests: int = 1000, capacity_slo: str = "",
              skip_lmsys: bool = False) -> dict:
    """Every part (or the ``only`` ones), printed as tables as they finish and written to ``out``/results.json;
    ``fast`` runs CI sizes."""
    results: dict = {}
    n = requests or (200 if fast else 4000)
    if n < 1:
        raise ValueError(f"--requests must be >= 1, got {n}")
    if capacity_requests < 10:
        raise ValueError(f"--capacity-requests must be >= 10, got {capacity_requests}")
    kv_capacity_tokens(model, gpu)  # an unknown --model/--gpu, or weights the card cannot hold: one line, before any run
    parts = [x for x in only.split(",") if x]
    bad = sorted(set(parts) - {"authors", "capacity", "reserve"})
    if bad:
        raise ValueError(f"--only: unknown {', '.join(bad)}; choose from authors, capacity, reserve")
    if parts:
        if "authors" in parts:
            results["authors"] = authors(n, skip_lmsys, fast)
            print("## §6 in the authors' setting (vidur_or configuration; llmsched.reproduce.wait_runs.authors)\n")
            print(_table(results["authors"], AUTHORS_KEYS))
        if "reserve" in parts:
            results["reserve"] = reserve_ablation(n, model, gpu)
            print("## Preemptions: the old free-KV gate vs memory-feasible admission (memory-bound setting)\n")
            print(_table(results["reserve"], RESERVE_KEYS))
        if "capacity" in parts:
            results["capacity"] = capacities(capacity_requests, capacity_slo, fast)
            print("## LMSYS lengths: capacity (llmsched.capacity) in the authors' setting and ours\n")
            print(_table(results["capacity"], CAPACITY_KEYS))
        _write(out, results)
        return results
    results["toy"] = toy(duration=5 if fast else 60, seeds=1 if fast else 5)
    results["scaling"] = scaling(base=5 if fast else 10, factors=[1, 4] if fast else [1, 4, 16, 64],
                                 seeds=1 if fast else 8)
    results["overflow"] = overflow_rate(delta=0.1, runs=3 if fast else 40, duration=20 if fast else 120)
    chosen = [x for x in settings.split(",") if x]
    unknown = sorted(set(chosen) - set(SETTINGS) - {"authors"})
    if unknown:
        raise ValueError(f"--settings: unknown {', '.join(unknown)}; choose from authors, {', '.join(SETTINGS)}")
    results["authors"] = authors(n, skip_lmsys, fast) if "authors" in chosen else []
    chosen = [x for x in chosen if x != "authors"]
    common = dict(model=model, gpu=gpu)
    results["wait_synthetic"], results["nested"], results["thresholds"] = [], [], []
    jobs = [("wait_synthetic", name, "wait", list(WAIT_WORKLOADS[name]().types), WAIT_WORKLOADS[name]().lengths,
             WAIT_WORKLOADS[name]().rate, {}) for name in ("wait-low", "wait-high")]
    for qps in (55, 550):
        wl = WAIT_WORKLOADS["nested-synthetic"]().scaled(qps / 66)
        jobs.append(("nested", f"nested-synthetic {qps} QPS", "nested-wait", list(wl.types), wl.lengths, qps, {}))
    if not skip_lmsys:
        edges = ",".join(str(e) for e in range(50, 501, 50))
        lmsys_types = scheduler_types("", LMSYS, 10, edges, 55)
        jobs.append(("nested", "LMSYS lengths 55 QPS", "nested-wait", lmsys_types, lmsys_lengths(n), 55, {}))
    for setting in chosen:
        for key, label, algo, types, lengths, rate, params in jobs:
            res = compare_setting(setting, algo, types, lengths, rate, n, algo_params=params, **common)
            results[key] += [{"setting": setting, "workload": label, "rate": rate, **r} for r in res["rows"]]
            results["thresholds"].append({"workload": label, **res["thresholds"]})
    results["time_varying"] = time_varying(duration=3 if fast else 60, window=2.0, **common)
    results["segment_design"] = segment_design(n=200 if fast else 3000, rate=40, cap=1024, **common)
    with_capacity = (capacity or not fast) and not skip_lmsys
    results["capacity"] = capacities(capacity_requests, capacity_slo, fast) if with_capacity else []
    _print(results)
    _write(out, results)
    return results


def _write(out: str | None, results: dict) -> None:
    if out:
        write_results(out, results, indent=2)


RESERVE_KEYS = ["workload", "scheduler", "admission", "finished", "throughput_tok_s", "window_tok_s", "latency_s",
                "preemptions", "decodes_per_step", "resident_kv", "paused_kv", "batch_kv", "waiting_q"]
CAPACITY_KEYS = ["setting", "B", "scheduler", "slos", "capacity_rps", "bracket", "probes"]


def capacities(n: int, slo: str, fast: bool) -> list[dict]:
    """Stable capacity on the LMSYS lengths (the workload nothing was tuned on): authors' setting (B = 128, their
    scripts' value) and ours (B = 256, Llama-2-7B, the same limits for every policy)."""
    return (lmsys_capacities("authors", 128, n, slo, resolution=0.25 if fast else 0.05)
            + lmsys_capacities("ours", 256, n, slo, resolution=0.25 if fast else 0.05))


# the authors' scripts (vidur_or run_sh_*.py, results_analysis/*/config.py): workload, rate, total_limit B
AUTHORS_JOBS = (("wait", "wait-low", 1.0, 400), ("wait", "wait-high", 1.0, 1000), ("wait", "wait-high", 10.0, 1000),
                ("nested-wait", "nested-synthetic", 1.0, 128), ("nested-wait", "nested-synthetic", 10.0, 128))


AUTHORS_KEYS = ["workload", "B", "scheduler", "finished", "throughput_tok_s", "window_tok_s", "authors_req_iter_s",
                "in_flight", "latency_s", "ttft_s", "preemptions", "decodes_per_step", "mean_step_ms", "resident_kv",
                "paused_kv"]


def authors(n: int, skip_lmsys: bool, fast: bool = False) -> list[dict]:
    """§6.1/§6.2 in the authors' setting: their workloads (a = 1 and 10), rates and B; plus the LMSYS lengths.
    The baselines also run at 2B, about the concurrency the threshold policies reach at B (not with --fast)."""
    rows = []
    for algo, name, scale, B in AUTHORS_JOBS:
        wl = WAIT_WORKLOADS[name]().scaled(scale)
        label = f"{name} {wl.rate:g} QPS"
        caps = () if fast else (2 * B,)
        rows += [{"workload": label, **r}
                 for r in compare_authors(algo, list(wl.types), wl.lengths, wl.rate, n, B, baseline_caps=caps)]
    if not skip_lmsys:
        edges = ",".join(str(e) for e in range(50, 501, 50))
        types = scheduler_types("", LMSYS, 10, edges, 55)
        rows += [{"workload": "LMSYS lengths 55 QPS", **r}
                 for r in compare_authors("nested-wait", types, lmsys_lengths(n), 55, n, 128,
                                          baseline_caps=() if fast else (256,))]
    return rows


def _table(rows: list[dict], keys: list[str]) -> str:
    def fmt(v):
        if isinstance(v, list):
            return ",".join(fmt(x) for x in v)
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def _print(out: dict) -> None:
    print("## Example 2: one type l = l' = 1, M = M* = 12, λ = 4/T* (fluid: 4 completions per iteration)\n")
    print(_table(out["toy"], ["arrivals", "policy", "completions_per_iteration", "loss_vs_fluid", "evictions",
                              "latency_s"]))
    print("\n## Theorem 1: WAIT's gap to Thp* and latency as the horizon grows by ζ\n")
    print(_table(out["scaling"], ["thresholds", "zeta", "horizon_s", "gap", "gap_x_sqrt_zeta", "latency_s",
                                  "latency_over_sqrt_zeta", "evictions"]))
    print("\n## Theorem 2: Nested WAIT's overflow rate (runs with any eviction) vs δ\n")
    print(_table(out["overflow"], ["memory", "M", "runs", "delta", "runs_with_overflow", "overflow_rate"]))
    keys = ["setting", "workload", "scheduler", "finished", "throughput_tok_s", "window_tok_s", "latency_s",
            "ttft_s", "preemptions", "decodes_per_step", "prefill_only_steps", "resident_kv", "paused_kv"]
    print("\n## §6 in the authors' setting (vidur_or configuration; llmsched.reproduce.wait_runs.authors)\n")
    print(_table(out["authors"], AUTHORS_KEYS))
    print("\n## §6.1: WAIT vs vLLM and Sarathi (same B, same M, same timing)\n")
    print(_table(out["wait_synthetic"], keys))
    print("\n## §6.2: Nested WAIT vs vLLM and Sarathi (same B, same M, same timing)\n")
    print(_table(out["nested"], keys))
    print("\n## Thresholds used (B rule at the algorithm's B) and conditions (11b)/(12) under eq. (1)\n")
    print(_table(out["thresholds"], ["setting", "workload", "algo_batch_cap", "thresholds", "full_batch_kv",
                                     "kv_tokens", "cond_ok"]))
    if out.get("capacity"):
        print("\n## LMSYS lengths: capacity (llmsched.capacity) in the authors' setting and ours\n")
        print(_table(out["capacity"], CAPACITY_KEYS))
    print("\n## §7.1: time-varying rate (low → high → low), Nested WAIT rule=fluid\n")
    print(_table(out["time_varying"], ["policy", "finished", "offered", "throughput_tok_s", "latency_s", "ttft_s",
                                       "preemptions", "n1_min", "n1_max"]))
    print("\n## §7.2: segment design, S equal-share segments of the lmsys lengths\n")
    print(_table(out["segment_design"], ["segments", "thresholds", "term1_M_n", "term2_queues", "term3_buffer",
                                         "drift_ok", "throughput_tok_s", "window_tok_s", "latency_s",
                                         "preemptions"]))

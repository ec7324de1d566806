"""``llmsched reproduce wait``: seed 003's experiments in the simulator, every number measured here.

1. Example 2 (toy): one type l = l' = 1 at M = M* = 12 and λ = 4/T*: FCFS with the paper's eviction (newest
   admitted restart from scratch) vs WAIT with n = 4.
2. Theorem 1 scaling: WAIT's throughput gap and latency as the horizon grows by ζ, at zero drift (n = n*) and
   with slack (n = 5).
3. Theorem 2: Nested WAIT's overflow rate with M from eq. (14) for δ, and without the buffer.
4. §6.1: WAIT vs vLLM and Sarathi on the synthetic two-type workloads (authors'-code candidates), same B.
5. §6.2: Nested WAIT vs vLLM and Sarathi on the 10-type synthetic workload at 55 and 550 QPS, and on the LMSYS
   lengths, Llama-2-7B on an A100 (roofline batch time), same B.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..wait.experiments import compare, lmsys_lengths, overflow_rate, scaling, toy
from ..wait.workloads import WAIT_WORKLOADS

NAME = "wait"
HELP = "seed 003: Example 2, Thm 1 scaling, Nested WAIT overflow ≤ δ, WAIT/Nested WAIT vs vLLM and Sarathi"
LMSYS = "lmsys_chat_1m_lengths_sample_input_lt500_output_lt600.csv"


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="small sizes for CI (seconds)")
    p.add_argument("--out", default=None, help="write results.json here")
    p.add_argument("--batch-cap", type=int, default=256, help="B, the same max_num_seqs for every scheduler")
    p.add_argument("--model", default="llama-2-7b", help="model preset (default llama-2-7b, the paper's)")
    p.add_argument("--gpu", default="a100", help="GPU preset (default a100, the paper's)")
    p.add_argument("--skip-lmsys", action="store_true", help="skip the LMSYS-lengths run (needs the data file)")


def _types(wl) -> str:
    return ",".join(f"{t.rate}:{t.prompt}:{t.decode}" for t in wl.types)


def run(args) -> int:
    fast = args.fast
    out: dict = {}
    out["toy"] = toy(duration=5 if fast else 60, seeds=1 if fast else 5)
    out["scaling"] = scaling(base=5 if fast else 10, factors=[1, 4] if fast else [1, 4, 16, 64],
                             seeds=1 if fast else 8)
    out["overflow"] = overflow_rate(delta=0.1, runs=3 if fast else 40, duration=20 if fast else 120)
    n = 200 if fast else 4000
    common = dict(batch_cap=args.batch_cap, model=args.model, gpu=args.gpu)
    out["wait_synthetic"] = []
    for name in ("wait-low", "wait-high"):
        wl = WAIT_WORKLOADS[name]()
        rows = compare([("wait", {"types": _types(wl)}), ("vllm", {}), ("sarathi", {})], wl.lengths, wl.rate,
                       n, **common)
        out["wait_synthetic"] += [{"workload": name, "rate": wl.rate, **r} for r in rows]
    out["nested"] = []
    for qps in (55, 550):
        wl = WAIT_WORKLOADS["nested-synthetic"]().scaled(qps / 66)
        rows = compare([("nested-wait", {"types": _types(wl)}), ("vllm", {}), ("sarathi", {})], wl.lengths, qps,
                       n, **common)
        out["nested"] += [{"workload": f"nested-synthetic {qps} QPS", "rate": qps, **r} for r in rows]
    if not args.skip_lmsys:
        params = {"lengths": LMSYS, "edges": ",".join(str(e) for e in range(50, 501, 50)), "rate": 55}
        rows = compare([("nested-wait", params), ("vllm", {}), ("sarathi", {})], lmsys_lengths(n), 55, n, **common)
        out["nested"] += [{"workload": "LMSYS lengths 55 QPS", "rate": 55, **r} for r in rows]
    _print(out)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "results.json").write_text(json.dumps(out, indent=2) + "\n")
    return 0


def _table(rows: list[dict], keys: list[str]) -> str:
    def fmt(v):
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
    keys = ["workload", "scheduler", "finished", "offered", "throughput_tok_s", "window_tok_s", "latency_s", "ttft_s",
            "preemptions"]
    print("\n## §6.1: WAIT vs vLLM and Sarathi (same B)\n")
    print(_table(out["wait_synthetic"], keys))
    print("\n## §6.2: Nested WAIT vs vLLM and Sarathi (same B)\n")
    print(_table(out["nested"], keys))

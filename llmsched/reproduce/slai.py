"""``llmsched reproduce slai``: seed 000's Fig. 7, Fig. 8, capacities and App. F.3 in the simulator.

Setting (seed 000 §7, spec §5): Mistral-7B on one RTX 6000 Ada, the sharegpt length preset capped at 8192
tokens, Poisson arrivals at 0.2 … 1.6 req/s for 2100 s, 5% paying users (TBT 0.1 s) and free users (0.5 s),
max_num_seqs 128, token budget 512 (vLLM: 8192-token prefill batches). Batch times: ``roofline-staircase``
(the tile staircase of the paper's eq. 7 on the roofline), which matches the paper's Fig. 6a measurements on
this GPU within 7% (docs/rad-slai.md) without fitting anything to them.

Serving capacity (spec A15): the largest rate at which median TTFT ≤ 0.5 s and both tiers' P99 TBT meet their
targets, linearly interpolating median TTFT between the last sweep rate that meets everything and the next.
"""
from __future__ import annotations

import csv
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ..experiment import RunConfig, run as run_config
from ..metrics.summary import summarize

NAME = "slai"
HELP = "seed 000 Fig. 7/8 and capacities: vLLM, Sarathi and SLAI on Mistral-7B / RTX 6000 Ada, paid and free tiers"

SCHEDULERS = (  # (registered name, label, params)
    ("vllm", "vLLM", {}),
    ("sarathi", "Sarathi (FCFS)", {}),
    ("sarathi-spf", "Sarathi (SPF)", {}),
    ("slai-fcfs", "SLAI (FCFS, δ=10)", {}),
    ("slai-spf-fixed", "SLAI (SPF, δ=10)", {}),
    ("slai", "SLAI (SPF, dynamic δ)", {}),
)
OFFSETS = (("δ=10", "slai-spf-fixed", {}), ("δ=5", "slai", {"dynamic": False, "offset": 5.0}),
           ("dynamic δ", "slai", {}))
VARIANT_SCHEDULERS = ("sarathi", "slai")
TTFT_TARGET = 0.5
PAPER = {  # seed 000 §7 / App. F.3 (spec §6.1): median TTFT at high load and capacity, Sarathi (FCFS) → SLAI
    0.05: {"ttft": (1.5, 0.7), "capacity": (1.15, 1.45)},
    0.5: {"ttft": (1.5, 0.73), "capacity": (1.15, 1.4)},
    0.95: {"ttft": (2.0, 0.75), "capacity": (1.15, 1.25)},
}
BASE = dict(model="mistral-7b", gpu="rtx-6000-ada", batch_time="roofline-staircase", workload="sharegpt",
            max_total_tokens=8192, max_num_seqs=128, max_model_len=8192)


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="CI size: 2 rates, 180 s, 5%% paying only (seconds)")
    p.add_argument("--out", default="reproduce-slai", help="output folder (default reproduce-slai/)")
    p.add_argument("--rates", default=None, help="comma-separated rates (default 0.2,0.4,...,1.6)")
    p.add_argument("--duration", type=float, default=None, help="seconds of arrivals and horizon (default 2100)")
    p.add_argument("--shares", default=None, help="paying shares to run (default 0.05,0.5,0.95)")
    p.add_argument("--jobs", type=int, default=2, help="parallel runs (default 2)")
    p.add_argument("--seed", type=int, default=0)


def tiers(share: float) -> str:
    return f"paid:tbt=0.1:share={share:g},free:tbt=0.5"


def job(spec: dict) -> dict:
    """One run: its summary figures (and the KV-use trace when asked)."""
    cfg = RunConfig(scheduler=spec["scheduler"], scheduler_params=spec["params"], rate=spec["rate"],
                    duration=spec["duration"], horizon=spec["duration"], tiers=tiers(spec["share"]),
                    seed=spec["seed"], **BASE, **({"max_num_batched_tokens": 8192} if spec["scheduler"] == "vllm"
                                                  else {}))
    result = run_config(cfg)
    s = summarize(result)
    t = s["tiers"]
    row = {k: spec[k] for k in ("label", "scheduler", "rate", "share", "study")}
    row.update(ttft_p50=s["latency"]["ttft"]["p50"], ttft_mean=s["latency"]["ttft"]["mean"],
               paid_tbt_p99=t["paid"]["tbt_p99"], free_tbt_p99=t["free"]["tbt_p99"],
               finished=s["counts"]["finished"] if "counts" in s else None,
               offered=len(result.requests), preemptions=s["preemptions"]["total"] if isinstance(
                   s.get("preemptions"), dict) and "total" in s["preemptions"] else None,
               wall_s=result.wall_time)
    if spec.get("kv"):
        steps = result.steps
        start = np.frombuffer(steps.start, dtype=np.float64)
        used = np.frombuffer(steps.kv_used_blocks, dtype=np.int64) / np.frombuffer(steps.kv_total_blocks,
                                                                                   dtype=np.int64)
        idx = np.linspace(0, len(start) - 1, min(len(start), 600)).astype(int)
        row["kv_t"], row["kv_use"] = start[idx].tolist(), used[idx].tolist()
        row["kv_max"], row["kv_mean"] = float(used.max()), float(used.mean())
    return row


def meets(row: dict) -> bool:
    return (row["ttft_p50"] <= TTFT_TARGET and row["paid_tbt_p99"] <= 0.1 and row["free_tbt_p99"] <= 0.5)


def capacity(rows: list[dict]) -> float:
    """Largest rate meeting the targets, interpolating median TTFT at 0.5 s toward the first failing rate."""
    rows = sorted(rows, key=lambda r: r["rate"])
    best = 0.0
    for lo, hi in zip([None] + rows, rows):
        if not meets(hi):
            tbt_ok = hi["paid_tbt_p99"] <= 0.1 and hi["free_tbt_p99"] <= 0.5
            if lo is not None and meets(lo) and tbt_ok and hi["ttft_p50"] > lo["ttft_p50"]:
                f = (TTFT_TARGET - lo["ttft_p50"]) / (hi["ttft_p50"] - lo["ttft_p50"])
                best = lo["rate"] + f * (hi["rate"] - lo["rate"])
            break
        best = hi["rate"]
    return best


def specs(rates, duration, shares, seed) -> list[dict]:
    out = []
    for share in shares:
        names = SCHEDULERS if share == 0.05 else [s for s in SCHEDULERS if s[0] in VARIANT_SCHEDULERS]
        for name, label, params in names:
            for rate in rates:
                out.append(dict(study="sweep", scheduler=name, label=label, params=params, rate=rate, share=share,
                                duration=duration, seed=seed))
    for label, name, params in OFFSETS:
        out.append(dict(study="fig8", scheduler=name, label=label, params=params, rate=max(rates), share=0.05,
                        duration=duration, seed=seed, kv=True))
    return out


def run(args) -> int:
    rates = [float(x) for x in args.rates.split(",")] if args.rates else \
        ([0.8, 1.6] if args.fast else [round(0.2 * i, 1) for i in range(1, 9)])
    duration = args.duration or (180.0 if args.fast else 2100.0)
    shares = [float(x) for x in args.shares.split(",")] if args.shares else ([0.05] if args.fast else [0.05, 0.5, 0.95])
    if any(not (r > 0 and math.isfinite(r)) for r in rates) or not duration > 0:
        raise ValueError("--rates must be positive req/s and --duration a positive number of seconds")
    if any(not 0 < s < 1 for s in shares) or 0.05 not in shares:
        raise ValueError("--shares must lie in (0, 1) and include 0.05 (the main experiment)")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    todo = specs(rates, duration, shares, args.seed)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(job, todo))
    sweep = [r for r in rows if r["study"] == "sweep"]
    fig8 = [r for r in rows if r["study"] == "fig8"]
    report = summarise(sweep, fig8, rates, shares)
    write(out, sweep, fig8, report)
    print_report(report, sweep, rates)
    print(f"wrote {out}/results.csv, results.json, report.md, fig7.png, fig8.png "
          f"({len(rows)} runs, {time.perf_counter() - t0:.0f} s)")
    return 0


def summarise(sweep, fig8, rates, shares) -> dict:
    report = {"rates": rates, "shares": {}, "fig8": {r["label"]: {"kv_max": r["kv_max"], "kv_mean": r["kv_mean"],
                                                                  "ttft_p50": r["ttft_p50"]} for r in fig8}}
    top = max(rates)
    for share in shares:
        per = {}
        for label in dict.fromkeys(r["label"] for r in sweep if r["share"] == share):
            rows = [r for r in sweep if r["share"] == share and r["label"] == label]
            at_top = next(r for r in rows if r["rate"] == top)
            per[label] = {"capacity": capacity(rows), "ttft_p50_top": at_top["ttft_p50"],
                          "meets_at": [r["rate"] for r in sorted(rows, key=lambda r: r["rate"]) if meets(r)]}
        report["shares"][str(share)] = {"schedulers": per, "paper": PAPER.get(share)}
    return report


def write(out: Path, sweep, fig8, report) -> None:
    fields = ["share", "label", "scheduler", "rate", "ttft_p50", "ttft_mean", "paid_tbt_p99", "free_tbt_p99",
              "offered", "wall_s"]
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(sweep)
    (out / "results.json").write_text(json.dumps({"report": report, "sweep": sweep, "fig8": fig8}, indent=1))
    (out / "report.md").write_text(markdown(report, sweep))
    plot(out, sweep, fig8)


def markdown(report, sweep) -> str:
    lines = []
    for share, data in report["shares"].items():
        lines += [f"### {float(share):.0%} paying users", "",
                  "| scheduler | capacity (req/s) | median TTFT at top rate (s) | rates meeting all targets |",
                  "|---|---|---|---|"]
        for label, v in data["schedulers"].items():
            lines.append(f"| {label} | {v['capacity']:.2f} | {v['ttft_p50_top']:.2f} | "
                         f"{', '.join(f'{r:g}' for r in v['meets_at']) or '—'} |")
        lines.append("")
    main = [r for r in sweep if r["share"] == 0.05]
    labels = list(dict.fromkeys(r["label"] for r in main))
    for metric, title in (("ttft_p50", "median TTFT (s)"), ("paid_tbt_p99", "paying P99 TBT (s)"),
                          ("free_tbt_p99", "free P99 TBT (s)")):
        lines += [f"### {title}, 5% paying", "", "| rate | " + " | ".join(labels) + " |",
                  "|---" * (len(labels) + 1) + "|"]
        for rate in report["rates"]:
            vals = [next(r[metric] for r in main if r["label"] == lab and r["rate"] == rate) for lab in labels]
            lines.append(f"| {rate:g} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def print_report(report, sweep, rates) -> None:
    main = [r for r in sweep if r["share"] == 0.05]
    labels = list(dict.fromkeys(r["label"] for r in main))
    for metric, title in (("ttft_p50", "median TTFT (s)"), ("paid_tbt_p99", "paying P99 TBT (s)"),
                          ("free_tbt_p99", "free P99 TBT (s)")):
        print(f"\n{title}, 5% paying")
        print("rate  " + "  ".join(f"{lab[:22]:>22}" for lab in labels))
        for rate in rates:
            vals = [next(r[metric] for r in main if r["label"] == lab and r["rate"] == rate) for lab in labels]
            print(f"{rate:4.1f}  " + "  ".join(f"{v:22.3f}" for v in vals))
    for share, data in report["shares"].items():
        print(f"\ncapacity (median TTFT <= 0.5 s, P99 TBT targets met), {float(share):.0%} paying:")
        for label, v in data["schedulers"].items():
            print(f"  {label:24} {v['capacity']:.2f} req/s   median TTFT at {max(rates):g} req/s: "
                  f"{v['ttft_p50_top']:.2f} s")
        if data["paper"]:
            p = data["paper"]
            print(f"  paper: Sarathi (FCFS) -> SLAI (SPF, dynamic): capacity {p['capacity'][0]} -> {p['capacity'][1]}"
                  f" req/s, median TTFT {p['ttft'][0]} -> {p['ttft'][1]} s")
    print("\nFig. 8 at the top rate (KV blocks used / total):")
    for label, v in report["fig8"].items():
        print(f"  {label:10} max {v['kv_max']:.3f}  mean {v['kv_mean']:.3f}  median TTFT {v['ttft_p50']:.2f} s")


def plot(out: Path, sweep, fig8) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    main = [r for r in sweep if r["share"] == 0.05]
    labels = list(dict.fromkeys(r["label"] for r in main))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for ax, metric, title, target in ((axes[0], "paid_tbt_p99", "(a) P99 TBT, paying users", 0.1),
                                      (axes[1], "free_tbt_p99", "(b) P99 TBT, free users", 0.5),
                                      (axes[2], "ttft_p50", "(c) median TTFT", TTFT_TARGET)):
        for label in labels:
            rows = sorted((r for r in main if r["label"] == label), key=lambda r: r["rate"])
            ax.plot([r["rate"] for r in rows], [r[metric] for r in rows], marker="o", label=label)
        ax.axhline(target, color="k", ls="--", lw=0.8)
        ax.set_title(title)
        ax.set_xlabel("arrival rate (req/s)")
        ax.set_ylabel("seconds")
        ax.set_yscale("log")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "fig7.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for r in fig8:
        ax.plot(r["kv_t"], r["kv_use"], label=r["label"], lw=0.8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("KV blocks used / total")
    ax.set_title(f"Fig. 8: KV use at {fig8[0]['rate']:g} req/s" if fig8 else "Fig. 8")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "fig8.png", dpi=110)
    plt.close(fig)

"""Bari et al.'s Fig. 7, Fig. 8, capacities and App. F.3 in the simulator (``llmsched reproduce slai``,
llmsched/cli/reproduce_slai.py).

Setting (Bari et al. §7): Mistral-7B on one RTX 6000 Ada, the sharegpt length preset capped at 8192
tokens, Poisson arrivals at 0.2 … 1.6 req/s for 2100 s, 5% paying users (TBT 0.1 s) and free users (0.5 s),
max_num_seqs 128, token budget 512 (vLLM: 8192-token prefill batches). Batch times: ``roofline-staircase``
(the tile staircase of the paper's eq. 7 on the roofline), which matches the paper's Fig. 6a measurements on
this GPU within 7% (docs/rad-slai.md) without fitting anything to them.

Serving capacity (median TTFT ≤ 0.5 s and both tiers' P99 TBT within target) is the project's one
definition (llmsched.capacity, docs/capacity.md): every request arriving in the measurement window counts,
unfinished ones as misses (+inf), and a run whose outstanding work grows is never within target. It is found by
bisection to 2% with probes of ``--duration`` seconds. A sweep rate "meets" by the same verdict. A scheduler that
still meets every target at the top of the sweep is run at further rates, 0.2 req/s apart, up to ``--max-rate``
(2.4), for Fig. 7 and Fig. 8.

The simulated engine is faster than the paper's (no Python, Ray or telemetry cost per sequence), so a nominal
rate loads it less. The run therefore also compares at *equal relative load*: the paper's high-load point,
1.6 req/s against Sarathi (FCFS)'s capacity of 1.15, maps to 1.6 × (simulated Sarathi capacity / 1.15).
Fig. 8 (SLAI (SPF) with δ=10, δ=5 and dynamic δ) is shown at 1.6 req/s, at every extended rate of SLAI (SPF,
dynamic δ) and at the equal-load rate, with KV use counted as the paper's engine counts it (held blocks plus the
rest of every admitted prompt) and summarised by the time spent near a full pool, the backlog left at the end
and the requests served, not by the peak (every offset touches the 1% admission watermark at some point).
"""
from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path

import numpy as np

from ..capacity import find_capacities, parse_slos
from ..capacity.verdict import evaluate, measure
from ..executors import make_executor
from ..experiment import RunConfig, build_replicas, build_source
from ..metrics.summary import summarize
from ..routing.registry import make_router
from ..schedulers.rad_slai.slai import reserved_kv_use
from ..sim.simulator import simulate


SCHEDULERS = (  # (registered name, label, params)
    ("vllm", "vLLM", {}),
    ("sarathi", "Sarathi (FCFS)", {}),
    ("sarathi-spf", "Sarathi (SPF)", {}),
    ("slai-fcfs", "SLAI (FCFS, δ=10)", {}),
    ("slai-spf-fixed", "SLAI (SPF, δ=10)", {}),
    ("slai", "SLAI (SPF, dynamic δ)", {}),
)
DELTA5 = ("slai", "SLAI (SPF, δ=5)", {"dynamic": False, "offset": 5.0})
LABELS = {label: (name, params) for name, label, params in SCHEDULERS + (DELTA5,)}
OFFSETS = (("δ=10", "SLAI (SPF, δ=10)"), ("δ=5", "SLAI (SPF, δ=5)"), ("dynamic δ", "SLAI (SPF, dynamic δ)"))
EQUAL_LOAD = ("Sarathi (FCFS)", "Sarathi (SPF)", "SLAI (SPF, δ=10)", "SLAI (SPF, δ=5)", "SLAI (SPF, dynamic δ)")
BASELINE, PROPOSED = "Sarathi (FCFS)", "SLAI (SPF, dynamic δ)"
VARIANT_SCHEDULERS = ("sarathi", "slai")
TTFT_TARGET = 0.5
SLOS = parse_slos(f"ttft_p50<={TTFT_TARGET}s,paid.tbt_p99<=0.1s,free.tbt_p99<=0.5s")
CAPACITY_START = 1.0  # req/s where each capacity search starts
RATE_STEP = 0.2
VARIANT_MIN_RATE = 0.8
PAPER_HIGH_RATE = 1.6          # the paper's "high load" and Fig. 8 rate (from the authors' code)
PAPER = {  # Bari et al. §7 / App. F.3: median TTFT at high load and capacity, Sarathi (FCFS) → SLAI
    0.05: {"ttft": (1.5, 0.7), "capacity": (1.15, 1.45)},
    0.5: {"ttft": (1.5, 0.73), "capacity": (1.15, 1.4)},
    0.95: {"ttft": (2.0, 0.75), "capacity": (1.15, 1.25)},
}
# Bari et al. §7: vLLM runs with prefill batches of 8192 tokens (the others with their own token budgets)
VLLM_PREFILL_BATCH = 8192
BASE = dict(model="mistral-7b", gpu="rtx-6000-ada", batch_time="roofline-staircase", workload="sharegpt",
            max_total_tokens=8192, max_num_seqs=128, max_model_len=8192)


def tiers(share: float) -> str:
    return f"paid:tbt=0.1:share={share:g},free:tbt=0.5"


def config(label: str, rate: float, share: float, duration: float, seed: int, bt: dict) -> RunConfig:
    name, params = LABELS[label]
    return RunConfig(scheduler=name, scheduler_params=params, rate=rate, duration=duration, tiers=tiers(share),
                     seed=seed, batch_time_params=bt, **BASE,
                     **({"max_num_batched_tokens": VLLM_PREFILL_BATCH} if name == "vllm" else {}),
                     latency_boundary="engine")


def job(spec: dict) -> dict:
    """One run: its summary figures, its capacity verdict and KV-use statistics (and the KV-use trace when asked)."""
    base = config(spec["label"], spec["rate"], spec["share"], spec["duration"], spec["seed"],
                  spec.get("batch_time_params", {}))
    cfg = RunConfig(**{**base.__dict__, "horizon": spec["duration"]})
    name = cfg.scheduler
    replicas = build_replicas(cfg)
    trace: list[tuple[float, float, int]] = []
    sched = replicas[0].scheduler
    observe = sched.on_step_end

    def on_step_end(view, plan, duration):
        observe(view, plan, duration)
        trace.append((view.now, reserved_kv_use(view), len(view.waiting)))

    sched.on_step_end = on_step_end
    result = simulate(build_source(cfg), replicas, make_router(cfg.router), horizon=cfg.horizon, seed=cfg.seed,
                      lanes=cfg.lanes)
    s = summarize(result)
    t = s["tiers"]
    record = measure(result)
    ok, failed = evaluate(record, SLOS)
    row = {k: spec[k] for k in ("label", "rate", "share", "study")}
    row.update(scheduler=name, ttft_p50=s["latency"]["ttft"]["p50"], ttft_mean=s["latency"]["ttft"]["mean"],
               paid_tbt_p99=t["paid"]["tbt_p99"], free_tbt_p99=t["free"]["tbt_p99"],
               finished=s["counts"]["finished"], offered=s["counts"]["offered"],
               preemptions=s["preemptions"]["total"], mean_step=s["steps"]["mean_duration"], wall_s=result.wall_time,
               meets=ok, verdict=record["stability"]["verdict"], failed="; ".join(failed),
               ttft_p50_all=record["metrics"]["ttft_p50"])
    row.update(kv_stats(np.array(trace, dtype=float).reshape(-1, 3), spec["duration"]))
    if spec.get("kv") and trace:
        a = np.array(trace)
        idx = np.linspace(0, len(a) - 1, min(len(a), 1500)).astype(int)
        row["kv_t"], row["kv_use"], row["kv_waiting"] = (a[idx, 0].tolist(), a[idx, 1].tolist(),
                                                         a[idx, 2].astype(int).tolist())
    return row


def kv_stats(a: np.ndarray, horizon: float) -> dict:
    """Time-weighted KV use (held + reserved) after each step: mean, peak, share of time at ≥ 96/98/99%."""
    if not len(a):
        return dict(kv_max=0.0, kv_mean=0.0, kv_t96=0.0, kv_t98=0.0, kv_t99=0.0, waiting_end=0)
    dt = np.diff(np.append(a[:, 0], max(horizon, a[-1, 0])))
    total = dt.sum() or 1.0
    use = a[:, 1]
    return dict(kv_max=float(use.max()), kv_mean=float((use * dt).sum() / total),
                kv_t96=float(dt[use >= 0.96].sum() / total), kv_t98=float(dt[use >= 0.98].sum() / total),
                kv_t99=float(dt[use >= 0.99].sum() / total), waiting_end=int(a[-1, 2]))


def meets(row: dict) -> bool:
    """The run's verdict by llmsched.capacity: stable, and every target met counting unfinished requests."""
    return row["meets"]


def capacities(shares, duration, seed, bt, executor) -> dict:
    """(share, label) -> CapacityResult, every search of the run side by side (llmsched.capacity)."""
    bases = {}
    for share in shares:
        names = SCHEDULERS if share == 0.05 else [s for s in SCHEDULERS if s[0] in VARIANT_SCHEDULERS]
        for _, label, _ in names:
            bases[f"{share}|{label}"] = config(label, CAPACITY_START, share, duration, seed, bt)
    found = find_capacities(bases, SLOS, executor=executor)
    return {(float(k.split("|")[0]), k.split("|")[1]): v for k, v in found.items()}


def spec(study, label, rate, share, duration, seed, bt, kv=False) -> dict:
    return dict(study=study, label=label, rate=round(rate, 2), share=share, duration=duration, seed=seed,
                batch_time_params=bt, kv=kv)


def specs(rates, duration, shares, seed, bt=None) -> list[dict]:
    """The paper's sweep, plus SLAI (SPF, δ=5) at the Fig. 8 rate (δ=10 and dynamic δ come from the sweep)."""
    bt = bt or {}
    fig8_rate = fig8_nominal_rate(rates)
    out = []
    for share in shares:
        names = SCHEDULERS if share == 0.05 else [s for s in SCHEDULERS if s[0] in VARIANT_SCHEDULERS]
        for _, label, _ in names:
            for rate in rates if share == 0.05 else variant_rates(rates):
                kv = share == 0.05 and rate == fig8_rate and label in dict(OFFSETS).values()
                out.append(spec("sweep", label, rate, share, duration, seed, bt, kv))
    out.append(spec("fig8", DELTA5[1], fig8_rate, 0.05, duration, seed, bt, kv=True))
    return out


def variant_rates(rates) -> list[float]:
    """The 50% and 95% paying runs start at 0.8 req/s: below it neither scheduler comes near a target in the 5%
    runs (paying P99 TBT ≤ 0.054 s, free ≤ 0.183 s, median TTFT ≤ 0.23 s), and their capacities lie above 1."""
    return [r for r in rates if r >= VARIANT_MIN_RATE] or rates


def fig8_nominal_rate(rates) -> float:
    return PAPER_HIGH_RATE if PAPER_HIGH_RATE in rates else max(rates)


def groups(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault((r["share"], r["label"]), []).append(r)
    return out


def extensions(sweep: list[dict], max_rate: float, duration, seed, bt) -> list[dict]:
    """The next rate for every scheduler that still meets every target at its highest rate so far."""
    out = []
    for (share, label), rows in groups(sweep).items():
        top = max(rows, key=lambda r: r["rate"])
        nxt = round(top["rate"] + RATE_STEP, 2)
        if meets(top) and nxt <= max_rate + 1e-9:
            out.append(spec("sweep", label, nxt, share, duration, seed, bt))
    return out


def fig8_companions(todo: list[dict], rows: list[dict]) -> list[dict]:
    """Fig. 8 beyond the paper's rate: wherever SLAI (SPF, dynamic δ) is extended (5% paying), also run the fixed
    offsets δ=5 and δ=10 there (unless already run), all with KV traces."""
    offsets = dict(OFFSETS).values()
    have = {(r["label"], r["rate"]) for r in rows + todo if r["share"] == 0.05 and r["study"] in ("sweep", "fig8")}
    out = []
    for s in todo:
        if s["label"] in offsets and s["share"] == 0.05 and s["study"] == "sweep":
            s["kv"] = True
            if s["label"] == PROPOSED:
                out += [spec("fig8", label, s["rate"], 0.05, s["duration"], s["seed"], s["batch_time_params"], kv=True)
                        for label in offsets if (label, s["rate"]) not in have]
    return out


def equal_load_rate(caps: dict) -> float | None:
    """The simulated rate whose load relative to Sarathi (FCFS)'s capacity equals the paper's 1.6 req/s."""
    res = caps.get((0.05, BASELINE))
    if res is None or res.capacity is None or math.isinf(res.interval[1]):
        return None
    return round(PAPER_HIGH_RATE * res.capacity / PAPER[0.05]["capacity"][0], 2)


def reproduce(*, fast: bool = False, out: str = "reproduce-slai", rates: str | None = None,
              max_rate: float | None = None, duration: float | None = None, shares: str | None = None,
              per_seq_overhead: float = 0.0, jobs: int = 2, seed: int = RunConfig.seed) -> dict:
    """The sweep over ``rates`` (comma-separated req/s) and paying ``shares``, the capacities, the equal-load runs
    and the extensions up to ``max_rate``, printed and written to ``out`` (results, report.md, Fig. 7/8)."""
    rate_list = [float(x) for x in rates.split(",")] if rates else \
        ([0.8, 1.6] if fast else [round(0.2 * i, 1) for i in range(1, 9)])
    duration = duration or (180.0 if fast else 2100.0)
    share_list = [float(x) for x in shares.split(",")] if shares else ([0.05] if fast else [0.05, 0.5, 0.95])
    max_rate = max_rate if max_rate is not None else (2.0 if fast else 2.4)
    if any(not (r > 0 and math.isfinite(r)) for r in rate_list) or not duration > 0:
        raise ValueError("--rates must be positive req/s and --duration a positive number of seconds")
    if not math.isfinite(max_rate):
        raise ValueError(f"--max-rate must be a finite rate in req/s, got {max_rate}")
    if any(not 0 < s < 1 for s in share_list) or 0.05 not in share_list:
        raise ValueError("--shares must lie in (0, 1) and include 0.05 (the main experiment)")
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    if not (per_seq_overhead >= 0 and math.isfinite(per_seq_overhead)):
        raise ValueError(f"--per-seq-overhead must be a finite number of seconds >= 0, got {per_seq_overhead}")
    bt = {"per_seq_overhead": per_seq_overhead} if per_seq_overhead else {}
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    todo, rows = specs(rate_list, duration, share_list, seed, bt), []
    with make_executor("local", jobs=jobs) as pool:
        caps = capacities(share_list, duration, seed, bt, pool)
        equal_rate = equal_load_rate(caps)
        if equal_rate is not None:
            todo += [spec("equal", label, equal_rate, 0.05, duration, seed, bt, kv=label in
                          dict(OFFSETS).values()) for label in EQUAL_LOAD]
        while todo:  # rounds: the sweep (and equal-load runs), then extensions as their inputs are known
            rows += list(pool.map(job, todo))
            sweep = [r for r in rows if r["study"] == "sweep"]
            todo = extensions(sweep, max_rate, duration, seed, bt)
            todo += fig8_companions(todo, rows)
    report = summarise(rows, rate_list, share_list, equal_rate, caps)
    write(folder, rows, report)
    print_report(report, rows)
    print(f"wrote {folder}/results.csv, results.json, report.md, fig7.png, fig8.png "
          f"({len(rows)} runs, {time.perf_counter() - t0:.0f} s)")
    return report


FIG8_KEYS = ("kv_max", "kv_mean", "kv_t96", "kv_t98", "kv_t99", "waiting_end", "finished", "offered", "ttft_p50",
             "ttft_mean", "preemptions", "free_tbt_p99")


def summarise(rows, rates, shares, equal_rate, caps) -> dict:
    sweep = [r for r in rows if r["study"] == "sweep"]
    high = fig8_nominal_rate(rates)
    report = {"rates": sorted({r["rate"] for r in sweep}), "base_rates": rates, "high_rate": high,
              "shares": {}, "fig8": [], "equal_load": None}
    for share in shares:
        per = {}
        for (s, label), group in groups(sweep).items():
            if s != share:
                continue
            group = sorted(group, key=lambda r: r["rate"])
            at_high = next((r for r in group if r["rate"] == high), None)
            res = caps[(share, label)]
            per[label] = {"capacity": res.capacity or 0.0, "bracketed": not math.isinf(res.interval[1]),
                          "interval": list(res.interval), "probes": len(res.probes), "note": res.note,
                          "ttft_p50_high": at_high["ttft_p50"] if at_high else None,
                          "meets_at": [r["rate"] for r in group if meets(r)], "rates": [r["rate"] for r in group]}
        gain = (per[PROPOSED]["capacity"] / per[BASELINE]["capacity"] - 1
                if per.get(BASELINE, {}).get("capacity") and PROPOSED in per else None)
        report["shares"][str(share)] = {"schedulers": per, "paper": PAPER.get(share), "capacity_gain": gain}
    offsets = dict(OFFSETS)
    for study, kind in ((("sweep", "fig8"), "extended sweep"), (("equal",), "equal relative load")):
        found = {(r["rate"], r["label"]): r for r in rows if r["study"] in study and r["share"] == 0.05
                 and "kv_t" in r}
        for rate in sorted({rate for rate, _ in found}):
            if all((rate, label) in found for label in offsets.values()):
                name = ("the paper's rate" if rate == PAPER_HIGH_RATE else "top of the sweep" if rate == high
                        else kind) if kind == "extended sweep" else kind
                report["fig8"].append({"rate": rate, "kind": name, "offsets": {
                    short: {k: found[rate, label][k] for k in FIG8_KEYS} for short, label in OFFSETS}})
    if equal_rate is not None:
        eq = {r["label"]: r for r in rows if r["study"] == "equal"}
        report["equal_load"] = {
            "rate": equal_rate, "factor": equal_rate / PAPER_HIGH_RATE, "paper": PAPER[0.05]["ttft"],
            "schedulers": {label: {k: eq[label][k] for k in ("ttft_p50", "ttft_mean", "paid_tbt_p99", "free_tbt_p99",
                                                               "finished", "offered")} | {"meets": meets(eq[label])}
                           for label in EQUAL_LOAD if label in eq}}
    return report


def write(out: Path, rows, report) -> None:
    fields = ["study", "share", "label", "scheduler", "rate", "meets", "verdict", "failed", "ttft_p50", "ttft_p50_all",
              "ttft_mean", "paid_tbt_p99",
              "free_tbt_p99", "finished", "offered", "preemptions", "mean_step", "kv_mean", "kv_max", "kv_t96",
              "kv_t98", "kv_t99", "waiting_end", "wall_s"]
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    (out / "results.json").write_text(json.dumps({"report": report, "runs": rows}, indent=1))
    (out / "report.md").write_text("\n".join(lines(report, rows, markdown=True)) + "\n")
    plot(out, rows, report)


def _cap(v: dict) -> str:
    return f"{v['capacity']:.2f}" if v["bracketed"] else f"≥ {v['capacity']:.2f}"


def _interval(v: dict) -> str:
    lo, hi = v["interval"]
    return f"[{lo:g}, {'∞' if math.isinf(hi) else format(hi, 'g')})"


def _num(v, fmt=".3f") -> str:
    return "—" if v is None else format(v, fmt)


def table(head: list[str], body: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"] + ["| " + " | ".join(b) + " |" for b in body]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    return ["  ".join(str(x).rjust(w) for x, w in zip(row, widths)) for row in [head] + body]


def lines(report, rows, markdown: bool = False) -> list[str]:
    """The report as text: per-rate tables (5% paying), capacities, equal relative load, Fig. 8."""
    h = (lambda t: f"### {t}") if markdown else (lambda t: f"\n{t}")
    out = []
    main = [r for r in rows if r["study"] == "sweep" and r["share"] == 0.05]
    labels = list(dict.fromkeys(r["label"] for r in main))
    for metric, title in (("ttft_p50", "median TTFT (s)"), ("paid_tbt_p99", "paying P99 TBT (s)"),
                          ("free_tbt_p99", "free P99 TBT (s)")):
        body = [[f"{rate:g}"] + [_num(next((r[metric] for r in main if r["label"] == lab and r["rate"] == rate),
                                           None)) for lab in labels] for rate in report["rates"]]
        out += [h(f"{title}, 5% paying"), ""] + table(["rate"] + labels, body, markdown) + [""]
    for share, data in report["shares"].items():
        out += [h(f"capacity (llmsched.capacity: stable, median TTFT ≤ 0.5 s and both P99 TBT targets met with "
                  f"unfinished requests as misses; bisection to 2%), {float(share):.0%} paying"), ""]
        body = [[label, _cap(v), _interval(v), str(v["probes"]), _num(v["ttft_p50_high"], ".2f"),
                 ", ".join(f"{r:g}" for r in v["meets_at"]) or "—"]
                for label, v in data["schedulers"].items()]
        out += table(["scheduler", "capacity (req/s)", "interval", "probes",
                      f"median TTFT at {report['high_rate']:g} req/s (s)", "sweep rates meeting every target"],
                     body, markdown)
        if data["paper"]:
            p, g = data["paper"], data["capacity_gain"]
            out += ["", f"paper: {BASELINE} → {PROPOSED}: capacity {p['capacity'][0]} → {p['capacity'][1]} req/s "
                        f"({p['capacity'][1] / p['capacity'][0] - 1:+.0%}), median TTFT {p['ttft'][0]} → "
                        f"{p['ttft'][1]} s; here: capacity {_cap(data['schedulers'][BASELINE])} → "
                        f"{_cap(data['schedulers'][PROPOSED])} req/s"
                        + (f" ({g:+.0%})" if g is not None else "")]
        out.append("")
    eq = report["equal_load"]
    if eq:
        out += [h(f"equal relative load: {eq['rate']:g} req/s = {PAPER_HIGH_RATE:g} × (simulated {BASELINE} capacity"
                  f" / {PAPER[0.05]['capacity'][0]}), 5% paying"), ""]
        body = [[label, f"{v['ttft_p50']:.2f}", f"{v['ttft_mean']:.2f}", f"{v['paid_tbt_p99']:.3f}",
                 f"{v['free_tbt_p99']:.3f}", f"{v['finished']}/{v['offered']}", "yes" if v["meets"] else "no"]
                for label, v in eq["schedulers"].items()]
        out += table(["scheduler", "median TTFT (s)", "mean TTFT (s)", "paying P99 TBT", "free P99 TBT",
                      "finished/offered", "meets targets"], body, markdown)
        out += ["", f"paper at {PAPER_HIGH_RATE:g} req/s: median TTFT {BASELINE} {eq['paper'][0]} s → {PROPOSED} "
                    f"{eq['paper'][1]} s", ""]
    if report["fig8"]:
        out += [h("Fig. 8: KV blocks used or reserved / total (5% paying); SLAI (SPF) with three offsets"), ""]
        body = [[f"{f8['rate']:g}", f8["kind"], short, f"{v['kv_max']:.3f}", f"{v['kv_mean']:.3f}",
                 f"{v['kv_t96']:.1%}", f"{v['kv_t98']:.1%}", f"{v['kv_t99']:.1%}", str(v["preemptions"]),
                 str(v["waiting_end"]), f"{v['finished']}/{v['offered']}", f"{v['ttft_p50']:.2f}",
                 f"{v['ttft_mean']:.2f}"] for f8 in report["fig8"] for short, v in f8["offsets"].items()]
        out += table(["rate", "", "offset", "peak", "mean", "time ≥96%", "time ≥98%", "time ≥99%", "preemptions",
                      "waiting at end", "finished/offered", "median TTFT", "mean TTFT"], body, markdown) + [""]
    return out


def print_report(report, rows) -> None:
    print("\n".join(lines(report, rows)))


def plot(out: Path, rows, report) -> None:
    """Fig. 7 (per-tier P99 TBT and median TTFT against rate) and Fig. 8 (KV use and waiting requests over time),
    drawn with the project's figure style (llmsched/report): the baselines in blues, SLAI's variants in oranges."""
    from ..report.sheet import Sheet
    from ..report.style import family_of, styles, with_points
    from ..report.ticks import plain_log_ticks
    families = {label: family_of(name) for label, (name, _) in LABELS.items()}
    main = [r for r in rows if r["study"] == "sweep" and r["share"] == 0.05]
    labels = list(dict.fromkeys(r["label"] for r in main))
    styled = styles(labels, families)
    sheet = Sheet(1, 3, panel=(4.2, 3.0))
    for ax, metric, title, target in ((sheet.axes[0][0], "paid_tbt_p99", "(a) P99 TBT, paying users", 0.1),
                                      (sheet.axes[0][1], "free_tbt_p99", "(b) P99 TBT, free users", 0.5),
                                      (sheet.axes[0][2], "ttft_p50", "(c) median TTFT", TTFT_TARGET)):
        for label in labels:
            group = sorted((r for r in main if r["label"] == label), key=lambda r: r["rate"])
            ax.plot([r["rate"] for r in group], [r[metric] for r in group], **with_points(styled[label].line()))
        ax.axhline(target, color="k", ls="--", lw=0.8)
        ax.set_title(title)
        ax.set_xlabel("arrival rate (req/s)")
        ax.set_ylabel("seconds")
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis, *ax.get_ylim())
        ax.grid(True, which="major", alpha=0.3)
    sheet.legend(title="dashed: target")
    sheet.save(out / "fig7.png")
    panels = report["fig8"]
    offsets = styles([short for short, _ in OFFSETS], {short: families[label] for short, label in OFFSETS})
    sheet = Sheet(2, max(1, len(panels)), panel=(3.8, 2.4), share="col")
    for col, f8 in enumerate(panels):
        studies = ("equal",) if f8["kind"] == "equal relative load" else ("sweep", "fig8")
        for short, label in OFFSETS:
            r = next((r for r in rows if r["study"] in studies and r["label"] == label and r["rate"] == f8["rate"]
                      and r["share"] == 0.05 and "kv_t" in r), None)
            if r is None:
                continue
            sheet.axes[0][col].plot(r["kv_t"], r["kv_use"], **offsets[short].line(linewidth=0.7))
            sheet.axes[1][col].plot(r["kv_t"], r["kv_waiting"], **offsets[short].line(linewidth=0.9))
        sheet.axes[0][col].axhline(0.96, color="k", ls="--", lw=0.6)
        sheet.axes[0][col].set_title(f"{f8['rate']:g} req/s ({f8['kind']})", fontsize=10)
        sheet.axes[1][col].set_xlabel("time (s)")
        sheet.axes[0][col].set_ylabel("KV blocks used or reserved / total")
        sheet.axes[1][col].set_ylabel("waiting requests")
    sheet.legend(title="SLAI (SPF) offset")
    sheet.save(out / "fig8.png")

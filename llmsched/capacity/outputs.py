"""What a capacity search writes: capacity.json, capacity.csv, capacity.png, and the printed table."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from .rate_search import CapacityResult
from .slo import RATIOS, SLO


def _fmt(v: float, ratio: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if math.isinf(v):
        return "inf"
    return f"{v:.3f}" if ratio else f"{v * 1e3:.0f}"


def heading(cfg, slos: list[SLO], seeds) -> str:
    """What was searched: the deployment, the traffic (tenants' rates scale together), the SLOs and the seeds."""
    where = cfg.trace or cfg.workload
    if cfg.tenants and not cfg.trace:
        where += f", tenants {cfg.tenants} (rates scaled together: a probe's rate is their total)"
    deployment = f"{cfg.model} on {cfg.gpu} (x{cfg.replicas}, router {cfg.router})"
    if cfg.fleet:  # the pools of the fleet file, each with its own fields over the run's
        pools = cfg.fleet.value.pools
        deployment = f"fleet {cfg.fleet} ({', '.join(f'{p.name} x{p.replicas}' for p in pools)})"
    elif cfg.disaggregate:
        deployment = (f"{cfg.model}, disaggregated {cfg.disaggregate}: prefill on {cfg.prefill_gpu or cfg.gpu} "
                      f"TP{cfg.prefill_tp or cfg.tp or 1}, decode on {cfg.decode_gpu or cfg.gpu} TP"
                      f"{cfg.decode_tp or cfg.tp or 1}, KV over {cfg.kv_link}")
    return (f"{deployment}, {where}; SLOs: "
            f"{', '.join(s.text for s in slos) or 'none (stability only)'}; seeds {', '.join(map(str, seeds))}")


def lines(result: CapacityResult, slos: list[SLO]) -> list[str]:
    """The probes in rate order, then the capacity and its interval (latencies in ms, as printed tables are)."""
    head = [result.unit, "verdict", "served/s"] + [s.key + ("" if s.metric in RATIOS else " ms") for s in slos] + \
        ["meets", "failed"]
    body = [[f"{p.rate:g}", p.verdict, f"{p.throughput_rps:.3f}"]
            + [_fmt(p.values[s.key], s.metric in RATIOS) for s in slos]
            + ["yes" if p.meets else "no", ", ".join(p.failed) or "—"]
            for p in sorted(result.probes, key=lambda p: p.rate)]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    out = [f"{result.label}:"] + ["  " + "  ".join(str(x).ljust(w) for x, w in zip(row, widths))
                                   for row in [head] + body]
    lo, hi = result.interval
    if result.capacity is None:
        out.append(f"  capacity: none. {result.note}")
    else:
        bound = "∞" if math.isinf(hi) else f"{hi:g}"
        out.append(f"  capacity: {result.capacity:g} {result.unit} (meets at {lo:g}, fails at {bound}; "
                   f"resolution {result.resolution:.0%}; {len(result.probes)} probes)"
                   + (f". {result.note}" if result.note else ""))
    return out


def write(out: Path, results: dict[str, CapacityResult], slos: list[SLO], context: dict) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    data = {**context, "slos": [s.text for s in slos],
            "schedulers": {label: r.to_dict(records=True) for label, r in results.items()}}
    (out / "capacity.json").write_text(json.dumps(data, indent=1))
    keys = [s.key for s in slos]
    with open(out / "capacity.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scheduler", "rate", "unit", "verdict", "meets", "served_rps", *keys, "failed", "capacity"])
        for label, r in results.items():
            for p in sorted(r.probes, key=lambda p: p.rate):
                w.writerow([label, p.rate, r.unit, p.verdict, p.meets, p.throughput_rps,
                            *[p.values[k] for k in keys], "; ".join(p.failed), r.capacity])
    plot(out / "capacity.png", results, slos)
    return ["capacity.json", "capacity.csv", "capacity.png"]


def plot(path: Path, results: dict[str, CapacityResult], slos: list[SLO]) -> None:
    """Each SLO metric (and the served rate) against the probed rate: the limit dashed, a failed probe crossed,
    an unbounded value as a triangle at the top, each scheduler's capacity a dotted vertical in its colour.
    Past eight schedulers, one row per family (llmsched/report)."""
    from ..report.families import draw_groups, family_groups, titled
    from ..report.sheet import Sheet
    from ..report.style import styles, with_points
    from ..report.ticks import plain_log_ticks
    panels = [(s.key, s) for s in slos] + [("served/s", None)]
    unit = next(iter(results.values())).unit
    styled = styles(results)
    groups = family_groups(styled)
    sheet = Sheet(len(groups), len(panels), panel=(3.6, 2.6),
                  title="x: failed probe; ▲: unbounded; dotted vertical: capacity", share="col")
    marks = []  # drawn once each panel's scale is known

    def draw(ax, c, label, kw, reference):
        slo = panels[c][1]
        probes = sorted(results[label].probes, key=lambda p: p.rate)
        ys = [p.throughput_rps if slo is None else p.values[slo.key] for p in probes]
        finite = [(p.rate, y) for p, y in zip(probes, ys) if y is not None and math.isfinite(y)]
        ax.plot([x for x, _ in finite], [y for _, y in finite], **with_points(kw))
        if not reference:
            marks.append((ax, kw["color"], probes, ys, results[label].capacity))

    for r, (family, _) in enumerate(groups):  # before the series, so that each row's legend has served = offered
        for c, (name, slo) in enumerate(panels):
            ax = sheet.axes[r][c]
            if slo is None:
                lim = max((p.rate for res in results.values() for p in res.probes), default=1)
                ax.plot([0, lim], [0, lim], color="k", lw=0.8, ls="--", label="served = offered")
            else:
                ax.axhline(slo.limit, color="k", ls="--", lw=0.8)
                if slo.metric not in RATIOS:
                    ax.set_yscale("log")
            ax.set_title(titled(name if slo else "served requests/s", family), fontsize=9)
            ax.set_xlabel(f"offered {unit}")
            ax.set_ylabel("" if slo is None or slo.metric in RATIOS else "seconds")
            ax.grid(True, alpha=0.3)
    draw_groups(sheet, styled, groups, len(panels), draw, {})
    for ax, color, probes, ys, capacity in marks:
        ax.set_ylim(*ax.get_ylim())  # the marks at the top must not move it
        top = ax.get_ylim()[1]
        for p, y in zip(probes, ys):
            if y is not None and math.isinf(y):
                ax.plot([p.rate], [top], marker="^", color=color, linestyle="none", clip_on=False)
            elif not p.meets and y is not None and math.isfinite(y):
                ax.plot([p.rate], [y], marker="x", color="k", ms=8, linestyle="none")
        if capacity is not None:
            ax.axvline(capacity, color=color, ls=":", lw=1.2)
    for ax in sheet.fig.axes:
        if ax.get_yscale() == "log":
            plain_log_ticks(ax.yaxis, *ax.get_ylim())
    sheet.save(path)

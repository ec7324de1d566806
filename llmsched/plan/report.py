"""What a plan prints and writes: deployments with their cost, the cost-vs-latency Pareto frontier, every
candidate's verdicts, and one self-contained HTML page (plots embedded as base64 PNG)."""
from __future__ import annotations

import dataclasses
import html
import math
import shlex
from dataclasses import dataclass

import numpy as np

from ..capacity.probe import GRACE_S
from ..capacity.slo import RATIOS
from ..capacity.verdict import window
from ..experiment import RunConfig, build_source
from ..hardware.batch_defaults import GpuDefault
from ..report.html import image, page
from ..report.html import table as table_html
from ..run_config import RUN_FIELDS
from ..workload.workload import OpenLoop
from .replica_search import Searched


@dataclass
class Deployment:
    """A candidate with a replica count whose probe met every SLO while stable."""

    label: str
    rate: float
    replicas: int
    gpus: int
    usd_per_hour: float
    output_tokens_per_s: float
    usd_per_million_tokens: float     # per million output tokens served
    latency: float                    # the Pareto metric (seconds), worst over seeds
    values: dict                      # every SLO's value
    config: RunConfig                 # the seed-0 probe's run

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["config"] = dataclasses.asdict(self.config)
        return d


def deployments(searched: list[Searched], price_of, pareto_metric: str, host_cost=None) -> list[Deployment]:
    """Every (candidate, replicas) that met, costed; ``price_of(gpu)`` is USD per GPU-hour, ``host_cost(candidate)``
    a replica's host memory (its CPU KV tier) in USD per hour."""
    out = []
    for item in searched:
        cand = item.screened.candidate
        for r, probe in item.probes.items():
            if not probe.meets:
                continue
            usd = cand.usd_per_hour(price_of, r, host_cost)
            tps = sum(rec["throughput"]["output_tokens_per_s"] for rec in probe.records) / len(probe.records)
            latency = max(rec["metrics"][pareto_metric] for rec in probe.records)
            out.append(Deployment(cand.label, item.screened.rate, r, cand.gpus(r), usd, tps,
                                  usd / (tps * 3600 / 1e6) if tps > 0 else math.inf, latency, dict(probe.values),
                                  item.configs[r]))
    return sorted(out, key=lambda d: (d.rate, d.usd_per_hour, d.latency, d.label))


def offload_verdicts(cheap: list[Deployment], candidates) -> list[str]:
    """Where KV offload pays: for each candidate deployed with and without KV tiers (--kv-offloads), its cheapest
    deployment with each set of tiers against the one without, by cost per hour."""
    by_label = {c.label: c for c in candidates}
    groups: dict = {}
    for d in cheap:
        cand = by_label.get(d.label)
        if cand is None or cand.kv_offload is None:
            continue
        bare = dataclasses.replace(cand, kv_offload=None).label
        groups.setdefault((d.rate, bare), {})[cand.kv_offload] = d
    lines = []
    for (rate, bare), options in sorted(groups.items()):
        base = options.get("none")
        for tiers, d in sorted(options.items()):
            if tiers == "none":
                continue
            if base is None:
                lines.append(f"{bare} at {rate:g} req/s: kv-offload {tiers} meets with {d.replicas} replicas "
                             f"(${d.usd_per_hour:.2f}/h); without tiers no replica count up to the limit meets: "
                             f"offload pays")
                continue
            saved = base.usd_per_hour - d.usd_per_hour
            verdict = (f"offload pays, {saved / base.usd_per_hour:.0%} cheaper" if saved > 1e-9
                       else "offload does not pay" + (f" ({-saved / base.usd_per_hour:.0%} dearer)" if saved < 0
                                                      else " (the same cost)"))
            lines.append(f"{bare} at {rate:g} req/s: kv-offload {tiers}: {d.replicas} replicas, "
                         f"${d.usd_per_hour:.2f}/h; without: {base.replicas}, ${base.usd_per_hour:.2f}/h: {verdict}")
    return lines


def cheapest(deps: list[Deployment]) -> list[Deployment]:
    """Each candidate's fewest-replica deployment, cheapest first."""
    best = {}
    for d in deps:
        key = (d.rate, d.label)
        if key not in best or d.replicas < best[key].replicas:
            best[key] = d
    return sorted(best.values(), key=lambda d: (d.rate, d.usd_per_hour, d.latency, d.label))


def pareto(deps: list[Deployment]) -> list[Deployment]:
    """Deployments no other one beats on both cost per hour and latency (cheapest first), per rate."""
    front = []
    for rate in sorted({d.rate for d in deps}):
        best = math.inf
        for d in sorted((d for d in deps if d.rate == rate), key=lambda d: (d.usd_per_hour, d.latency)):
            if d.latency < best:
                front.append(d)
                best = d.latency
    return front


def simulate_command(cfg: RunConfig) -> str:
    """The `llmsched simulate` command that runs this probe step for step (stopping where the probe stops); the
    plan judges that run with the capacity definition (docs/capacity.md)."""
    default = RunConfig()
    args = ["llmsched", "simulate", "--scheduler", cfg.scheduler]
    for name, spec in RUN_FIELDS.items():
        value = getattr(cfg, name, None)
        if spec.switch or spec.kind is dict or name in ("scheduler", "horizon") or value is None \
                or isinstance(value, GpuDefault) or (name != "rate" and value == getattr(default, name, None)):
            continue
        args += [spec.flag_of(name), repr(value) if isinstance(value, float) else str(value)]
    for key, value in cfg.scheduler_params.items():
        args += ["--param", f"{key}={value}"]
    for key, value in cfg.batch_time_params.items():
        args += ["--bt-param", f"{key}={value}"]
    for key, value in cfg.router_params.items():
        args += ["--router-param", f"{key}={value}"]
    for key, value in cfg.workload_params.items():
        args += ["--wl-param", f"{key}={value}"]
    for field, flag in (("prefill_pool", "--prefill-pool"), ("decode_pool", "--decode-pool"),
                        ("pd_decider_params", "--pd-param")):
        for key, value in getattr(cfg, field).items():
            args += [flag, f"{key}={value}"]
    if cfg.oracle:
        args.append("--oracle")
    source = build_source(cfg)
    if isinstance(source, OpenLoop) and len(source):
        horizon = probe_horizon(source.arrival_times, cfg)
        if horizon > 0:
            args += ["--horizon", repr(horizon)]
    return shlex.join(args)


def probe_horizon(arrivals: np.ndarray, cfg: RunConfig) -> float:
    """Where a probe stops: its last arrival, or GRACE_S after its measurement window if that is later (as
    llmsched/capacity/probe.py's measure_point does; tests/test_plan.py checks the two agree)."""
    _, end = window(arrivals, cfg.warmup, cfg.cooldown)
    return max(float(arrivals.max()), end + GRACE_S)


def _ms(v: float) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return "inf" if math.isinf(v) else f"{v * 1e3:.0f}"


def _value(key: str, v: float) -> str:
    return f"{v:.3f}" if key.split(".")[-1] in RATIOS else _ms(v)


def table(head: list[str], rows: list[list]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    return ["  " + "  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in [head] + rows]


def deployment_rows(deps: list[Deployment], slo_keys: list[str]) -> tuple[list[str], list[list]]:
    head = ["deployment", "rate", "replicas", "GPUs", "$/hour", "$/M out tok", "out tok/s"] + \
        [k + ("" if k.split(".")[-1] in RATIOS else " ms") for k in slo_keys]
    rows = [[d.label, f"{d.rate:g}", d.replicas, d.gpus, f"{d.usd_per_hour:.2f}", f"{d.usd_per_million_tokens:.3f}",
             f"{d.output_tokens_per_s:.0f}"] + [_value(k, d.values.get(k, math.nan)) for k in slo_keys]
            for d in deps]
    return head, rows


def candidate_rows(screened, searched: list[Searched], price_of, host_cost=None) -> tuple[list[str], list[list]]:
    """Every candidate at every rate: memory, bound, least replicas, the replicas found, and each probe."""
    found = {(s.screened.candidate, s.screened.rate): s for s in searched}
    head = ["candidate", "rate", "KV tokens", "bound req/s/replica", "bound replicas", "replicas", "$/hour",
            "probes (replicas: verdict, meets)", "outcome"]
    rows = []
    for s in screened:
        cand = s.candidate
        kv = s.memory.get("kv_tokens", 0)
        bound = "—" if s.bound_rps_per_replica is None else f"{s.bound_rps_per_replica:.3g}"
        item = found.get((cand, s.rate))
        if s.pruned:
            rows.append([cand.label, f"{s.rate:g}", kv, bound, s.min_replicas if s.bound_rps_per_replica else "—",
                         "—", "—", "—", "pruned (" + s.pruned + ")"])
            continue
        probes = "; ".join(f"{r}: {p.verdict}, {'meets' if p.meets else 'fails ' + ','.join(p.failed)}"
                           for r, p in sorted(item.probes.items()))
        usd = f"{cand.usd_per_hour(price_of, item.replicas, host_cost):.2f}" if item.replicas else "—"
        outcome = f"{item.replicas} replicas" if item.replicas else "no replica count up to --max-replicas meets"
        if s.binding:
            outcome += f"; {s.binding} binds"
        rows.append([cand.label, f"{s.rate:g}", kv, bound, s.min_replicas, item.replicas or "—", usd, probes,
                     outcome])
    return head, rows


# --- HTML ------------------------------------------------------------------------------------------------------

def pareto_png(deps: list[Deployment], front: list[Deployment], winner: Deployment | None, metric: str) -> bytes:
    from ..report.sheet import Sheet
    sheet = Sheet(1, 1, panel=(6.0, 3.6))
    ax = sheet.axes[0][0]
    ax.scatter([d.usd_per_hour for d in deps], [d.latency * 1e3 for d in deps], s=18, color="0.6",
               label="deployments that meet the SLOs")
    if front:
        ax.step([d.usd_per_hour for d in front], [d.latency * 1e3 for d in front], where="post", color="C0",
                marker="o", label="Pareto frontier")
    if winner is not None:
        ax.scatter([winner.usd_per_hour], [winner.latency * 1e3], s=120, marker="*", color="C3", zorder=5,
                   label=f"cheapest: {winner.label} x{winner.replicas}")
    ax.set_xlabel("cost, USD per hour")
    ax.set_ylabel(f"{metric} (ms)")
    ax.grid(alpha=0.3)
    sheet.legend()
    return sheet.png()


def cost_png(cheap: list[Deployment]) -> bytes:
    from ..report.sheet import Sheet
    sheet = Sheet(1, 1, panel=(6.0, max(1.9, 0.28 * len(cheap))))
    ax = sheet.axes[0][0]
    labels = [f"{d.label} x{d.replicas} @{d.rate:g}" for d in cheap]
    ax.barh(range(len(cheap)), [d.usd_per_hour for d in cheap], color="C0")
    ax.set_yticks(range(len(cheap)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("USD per hour (fewest replicas that meet the SLOs)")
    ax.grid(axis="x", alpha=0.3)
    return sheet.png()


def write_html(path, context: dict) -> None:
    """One page: the winner, the frontier (plot and table), every candidate, and how to reproduce each point."""
    deps, front, cheap = context["deployments"], context["frontier"], context["cheapest"]
    winner = cheap[0] if cheap else None
    slo_keys = context["slo_keys"]
    parts = [f"<h1>llmsched plan</h1><p>{html.escape(context['title'])}</p>",
             f"<p>SLOs: <code>{html.escape(context['slo_text'])}</code>; prices: {html.escape(context['prices'])}"
             f"</p><p>Command: <code>{html.escape(context['command'])}</code></p>"]
    if winner is not None:
        parts.append("<h2 id='winner'>Cheapest deployment</h2>" + table_html(*deployment_rows([winner], slo_keys)) +
                     f"<p>Reproduce this point: <code>{html.escape(simulate_command(winner.config))}</code></p>")
    else:
        parts.append("<h2 id='winner'>No deployment meets the SLOs</h2>")
    if deps:
        parts.append(f"<h2 id='pareto'>Cost vs {html.escape(context['pareto_metric'])}: Pareto frontier</h2>"
                     + image(pareto_png(deps, front, winner, context["pareto_metric"]), "Pareto frontier"))
        head, rows = deployment_rows(front, slo_keys)
        parts.append(table_html(head + ["reproduce"], [row + [simulate_command(d.config)]
                                                          for row, d in zip(rows, front)]))
        parts.append("<h2 id='cheapest'>Each candidate's cheapest deployment</h2>"
                     + image(cost_png(cheap), "cost per candidate") + table_html(*deployment_rows(cheap, slo_keys)))
    if context.get("offload"):
        parts.append("<h2 id='offload'>Where KV offload pays</h2><ul>"
                     + "".join(f"<li>{html.escape(line)}</li>" for line in context["offload"]) + "</ul>")
    parts.append("<h2 id='candidates'>Every candidate: memory, bound, replicas, verdicts</h2>"
                 + table_html(*context["candidate_table"]))
    parts.append(f"<h2>Pruning</h2><p>{html.escape(context['pruning'])}</p>")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page("llmsched plan", parts))

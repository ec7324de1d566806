"""What a plan prints and writes: its heading, the candidate table, the cheapest deployments and the frontier (or
why none was found), what pruning saved, and the data of its JSON file and HTML page."""
from __future__ import annotations

from collections import Counter

from ..capacity.slo import RATIOS
from ..hardware.prices import PRICES_PATH
from .planner import PlanResult
from .prune import NO_BOUND, probes_saved
from .report import candidate_rows, deployment_rows, simulate_command, table


def slo_text(result: PlanResult) -> str:
    return ", ".join(s.text for s in result.slos) or "none (stability only)"


def title(result: PlanResult) -> str:
    base = result.base
    return (f"{base.model} ({base.batch_time}), {base.trace or base.workload} at "
            f"{', '.join(f'{r:g}' for r in result.rates)} req/s; SLOs: {slo_text(result)}; seeds "
            f"{', '.join(map(str, result.seeds))}")


def lines(result: PlanResult, top: int, prices_file: str | None, price_of) -> list[str]:
    """The printed plan: heading, every candidate, the ``top`` cheapest deployments and the frontier with the
    command that reproduces the cheapest (or why nothing met), and what pruning saved. ``prices_file``: the
    --prices file over the built-in table, if any."""
    cands = result.candidates
    pd = sum(1 for c in cands if c.pd is not None)
    out = [title(result),
           f"{len(cands)} candidates ({len({c.gpu for c in cands})} GPUs x {len({c.tp for c in cands})} TP x "
           f"{len({(c.scheduler, c.params) for c in cands})} scheduler settings x {len({c.router for c in cands})} "
           f"routers" + (f"; {pd} of them disaggregated, prefill and decode (GPU, TP) pairs x P:D ratios" if pd
                         else "") + ")" + (f" at each of {len(result.rates)} rates" if len(result.rates) > 1 else "")]
    out += table(*candidate_rows(result.screened, result.searched, price_of, result.host_cost))
    slo_keys = [s.key for s in result.slos]
    cheap = result.cheapest
    if cheap:
        out.append(f"\ncheapest deployments that meet the SLOs (top {min(top, len(cheap))}; prices "
                   f"{'from ' + prices_file + ' over ' if prices_file else ''}{PRICES_PATH.name}):")
        out += table(*deployment_rows(cheap[:top], slo_keys))
        out.append(f"\nPareto frontier, cost per hour vs {result.metric} (every replica count probed that met):")
        out += table(*deployment_rows(result.frontier, slo_keys))
        out.append(f"\nreproduce the cheapest: {simulate_command(cheap[0].config)}")
    else:
        out.append("\n" + none_found(result))
    if result.offload:
        out.append("\nwhere KV offload pays (host memory priced per GiB-hour, prices.json host_memory):")
        out += result.offload
    out.append(f"\n{pruning(result)}")
    return out


def none_found(result: PlanResult) -> str:
    """Why no deployment came out: every candidate pruned before a probe (it cannot run), or none met the SLOs."""
    screened = result.screened
    if all(s.pruned for s in screened):
        reasons = sorted({s.pruned.split(":")[0] for s in screened})
        return (f"no candidate can run: all {len(screened)} were pruned before any probe ({', '.join(reasons)}; "
                f"see the table); change --gpus, --tp or the model")
    return f"no candidate meets the SLOs up to --max-replicas {result.max_replicas}" + best_reached(result)


def best_reached(result: PlanResult) -> str:
    """For each SLO, the best value any probe reached and where: what failed, and by how much."""
    parts = []
    for slo in result.slos:
        seen = [(p.values[slo.key], s.screened.candidate.label, r) for s in result.searched
                for r, p in s.probes.items() if p.values.get(slo.key) == p.values.get(slo.key)]
        if not seen:
            continue
        ratio = slo.metric in RATIOS
        value, label, r = max(seen) if ratio else min(seen)
        shown = f"{value:.3g}" if ratio else f"{value:.3g} s"
        parts.append(f"{slo.key} best {shown} (limit {slo.limit:g}{'' if ratio else ' s'}) on {label} x{r}")
    unstable = [s for s in result.searched if all(p.verdict != "stable" for p in s.probes.values())]
    if unstable:
        parts.append(f"{len(unstable)} candidates never stable")
    return (": " + "; ".join(parts)) if parts else ""


def pruning(result: PlanResult) -> str:
    """How many candidates needed no probe, and how many probe rounds the bound's least replica counts saved."""
    screened, searched = result.screened, result.searched
    memory = sum(1 for s in screened if s.pruned.startswith("memory"))
    tp = [s for s in screened if s.pruned.startswith("tp")]
    bound = sum(1 for s in screened if s.pruned.startswith("bound"))
    saved = sum(probes_saved(s.screened.min_replicas) for s in searched)
    nobound = Counter(note[len(NO_BOUND):] for s in screened if not s.pruned and s.bound_rps_per_replica is None
                      for note in s.notes if note.startswith(NO_BOUND))
    split = f"{len(tp)} at a TP that does not divide the model's heads ({tp[0].pruned[4:]}), " if tp else ""
    text = (f"pruning: {memory + len(tp) + bound} of {len(screened)} candidates needed no probe ({split}{memory} do "
            f"not fit in memory, {bound} need more replicas than allowed by the sound throughput bound); the "
            f"bound's least replica counts skipped {saved} probe rounds (x{len(result.seeds)} seeds) that a search "
            f"from 1 replica (1, 2, 4, ...) would have run")
    if nobound:
        text += "; not pruned for want of a sound bound: " + ", ".join(
            f"{n} candidate{'s' if n > 1 else ''} ({why})" for why, n in nobound.items())
    return text


def probes_line(result: PlanResult, wall: float, executor: str, cache) -> str:
    cached = f"; {cache.hits} probe runs from the cache" if cache is not None else ""
    return (f"{sum(len(s.probes) for s in result.searched)} probes x {len(result.seeds)} seeds in {wall:.1f} s "
            f"({executor} executor{cached})")


def report_context(result: PlanResult, command: str, prices, price_of) -> dict:
    """What the HTML page (report.write_html) shows; ``command`` is the plan's own command line."""
    return {"title": title(result), "slo_text": slo_text(result), "slo_keys": [s.key for s in result.slos],
            "command": command, "prices": "; ".join(sorted(set(prices.sources.values()))),
            "deployments": result.deployments, "frontier": result.frontier, "cheapest": result.cheapest,
            "pareto_metric": result.metric,
            "candidate_table": candidate_rows(result.screened, result.searched, price_of, result.host_cost),
            "pruning": pruning(result), "offload": list(result.offload)}


def json_data(result: PlanResult) -> dict:
    """Every candidate, probe and deployment (the --json file)."""
    return {"title": title(result), "rates": result.rates, "slos": [s.text for s in result.slos],
            "seeds": list(result.seeds), "pareto_metric": result.metric,
            "candidates": [{"label": s.candidate.label, "rate": s.rate, "memory": s.memory,
                            "bound_rps_per_replica": s.bound_rps_per_replica, "min_replicas": s.min_replicas,
                            "pruned": s.pruned, "notes": s.notes} for s in result.screened],
            "searches": [{"label": s.screened.candidate.label, "rate": s.screened.rate, "replicas": s.replicas,
                          "probes": {str(r): p.to_dict(records=False) for r, p in sorted(s.probes.items())}}
                         for s in result.searched],
            "cheapest": [d.to_dict() for d in result.cheapest], "frontier": [d.to_dict() for d in result.frontier]}

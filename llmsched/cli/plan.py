"""``llmsched plan``: the cheapest deployment (GPU, tensor parallelism, replicas, scheduler, router) that carries a
target rate within the SLOs, with the cost-vs-latency Pareto frontier (docs/plan.md)."""
from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from pathlib import Path

from ..capacity.cache import ProbeCache
from ..capacity.probe import check_base
from ..capacity.slo import RATIOS, canonical_metric, valid_metrics
from ..experiment import build_source
from ..hardware.models import model as model_preset
from ..hardware.prices import PRICES_PATH, load_prices
from ..plan.candidates import build_candidates, parse_offloads, parse_tps, parse_variations, split_names
from ..plan.prune import LengthCache, probes_saved, screen
from ..plan.report import candidate_rows, cheapest, deployment_rows, deployments, offload_verdicts, pareto, \
    simulate_command, table, write_html
from ..plan.replica_search import search_replicas
from .capacity import add_probe_options, check_slos_apply, parse_slo_args
from .run_options import add_run_options, run_configs

DESCRIPTION = (
    "For a target rate (--target-rate R, a list R1,R2 or a range START:STOP:STEP; or a --trace at its own rate), "
    "find for every candidate GPU x TP x scheduler (x --vary parameters) x router the fewest replicas whose probe "
    "is stable and meets the SLOs (capacity definition: docs/capacity.md), and print the cheapest deployments "
    "with their cost per hour and per million output tokens, and the cost-vs-latency Pareto frontier. Before "
    "simulating, candidates whose model does not fit the GPU are listed as infeasible with the memory figures, "
    "and the sound throughput bound (`llmsched theory throughput-bound`) gives each candidate its least replicas.")
EXCLUDED = ("gpu", "gpu_spec", "tp", "replicas", "router", "rate", "horizon", "rate_schedule", "concurrency")


def add(sub) -> None:
    p = sub.add_parser("plan", help="cheapest deployment that meets the SLOs at a target rate, with its Pareto "
                                    "frontier", description=DESCRIPTION)
    p.add_argument("--target-rate", default=None, help="req/s to carry: R, R1,R2,... or START:STOP:STEP "
                                                       "(default with --trace: the trace's own mean rate)")
    p.add_argument("--slo", default="", help="comma-separated METRIC<=LIMIT, e.g. 'ttft_p90<=1s,tbt_p99<=100ms'; "
                                            f"metrics: {', '.join(valid_metrics())}. Default: none (stability)")
    p.add_argument("--attainment", type=float, default=None, help="also require this fraction of requests to "
                                                                   "meet their tier's targets (--tiers)")
    p.add_argument("--gpus", default="a100,h100,h200", help="comma-separated GPU presets (default a100,h100,h200)")
    p.add_argument("--tp", dest="tps", default="1", help="tensor-parallel degrees, e.g. 1,2,4 (default 1)")
    p.add_argument("--schedulers", default="sarathi", help="comma-separated schedulers (default sarathi)")
    p.add_argument("--vary", action="append", default=[], metavar="SCHEDULER.KEY=V1,V2",
                   help="also try these values of a scheduler parameter (repeatable; combinations multiply)")
    p.add_argument("--routers", default="round-robin", help="comma-separated routers (default round-robin)")
    p.add_argument("--kv-offloads", default=None, metavar="none,cpu:256GiB,...",
                   help="also try these KV tiers below the GPU (docs/kv-offload.md): 'none' for without, '+' "
                        "between one candidate's tiers (cpu:256GiB+disk:2TB); host memory is priced per GiB-hour "
                        "(prices.json host_memory)")
    p.add_argument("--max-replicas", type=int, default=16, help="most replicas per deployment (default 16)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per probe; a probe meets only if every seed does")
    p.add_argument("--prices", default=None, metavar="FILE", help=f"a JSON file of USD per GPU-hour on top of "
                                                                  f"{PRICES_PATH.name} (e.g. {{\"a100\": 1.79}})")
    p.add_argument("--pareto-metric", default=None, help="latency for the frontier (default: the first latency "
                                                         "SLO, else e2e_p90)")
    p.add_argument("--top", type=int, default=5, help="cheapest deployments to print (default 5)")
    p.add_argument("--report", default=None, help="write one self-contained HTML page here")
    p.add_argument("--json", dest="json_out", default=None, help="write every candidate, probe and deployment "
                                                                 "as JSON here")
    add_probe_options(p)
    add_run_options(p, exclude=EXCLUDED)
    p.set_defaults(func=plan)


def parse_target_rates(text: str) -> list[float]:
    try:
        if ":" in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if not (step > 0 and stop >= start):
                raise ValueError
            rates = [round(start + i * step, 10) for i in range(int(round((stop - start) / step)) + 1)
                     if start + i * step <= stop + 1e-9]
        else:
            rates = [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--target-rate {text!r}: give R, R1,R2,... or START:STOP:STEP with STEP > 0") from None
    if not rates or any(not r > 0 for r in rates):
        raise ValueError(f"--target-rate {text!r}: rates must be positive req/s")
    return rates


def trace_rate(cfg) -> float:
    """The mean arrival rate of the trace ``cfg`` replays (requests over the span of their arrivals)."""
    times = build_source(dataclasses.replace(cfg, rate=None)).arrival_times
    span = float(times.max() - times.min())
    if not span > 0:
        raise ValueError(f"--trace {cfg.trace}: its arrivals span no time; give --target-rate")
    return (len(times) - 1) / span


def read_prices(path: str | None):
    """--prices FILE over the built-in table; a path that is no file is named as what it is."""
    if path is None or Path(path).exists():
        return load_prices(path)
    if not path.lstrip().startswith(("{", "[")):
        raise ValueError(f"--prices {path}: no such file; give a JSON file of USD per GPU-hour")
    try:
        json.loads(path)
    except ValueError as e:
        raise ValueError(f"--prices {path!r}: neither a file nor valid JSON ({e}); give a JSON file of USD per "
                         f"GPU-hour, e.g. one holding {{\"a100\": 1.79}}") from None
    raise ValueError(f"--prices {path!r}: JSON, not a file; --prices takes a JSON file: write this to one and give "
                     f"its path")


def pareto_metric(args, slos) -> str:
    if args.pareto_metric is None:
        latency = [s.metric for s in slos if s.metric not in RATIOS and s.tier is None]
        return latency[0] if latency else "e2e_p90"
    metric = canonical_metric(args.pareto_metric)
    if metric in RATIOS:
        raise ValueError(f"--pareto-metric {args.pareto_metric}: give a latency (e.g. ttft_p90), not a fraction")
    return metric


def plan(args) -> int:
    from ..executors import make_executor
    t0 = time.perf_counter()
    slos = parse_slo_args(args)
    metric = pareto_metric(args, slos)
    for name, value, low in (("--max-replicas", args.max_replicas, 1), ("--seeds", args.seeds, 1),
                             ("--top", args.top, 1)):
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    if args.no_cache and args.cache:
        raise ValueError("--cache and --no-cache contradict each other; give one")
    schedulers = split_names(args.schedulers, "--schedulers")
    gpus = split_names(args.gpus, "--gpus")
    routers = split_names(args.routers, "--routers")
    candidates = build_candidates(gpus, parse_tps(args.tps), schedulers, routers,
                                  parse_variations(args.vary, schedulers), parse_offloads(args.kv_offloads))
    prices = read_prices(args.prices)
    for g in {c.gpu for c in candidates}:
        prices.price(g)                       # a GPU with no price: error before any simulation
    bases = {cfg.scheduler: cfg for cfg in run_configs(args, schedulers)}
    check_slos_apply(args, slos, next(iter(bases.values())))
    for cfg in bases.values():
        check_base(cfg)                       # options a probe cannot honour (--sketch): errors now
    base0 = next(iter(bases.values()))
    model_preset(base0.model)                 # unknown model: error listing the valid ones
    if args.target_rate is not None:
        rates = parse_target_rates(args.target_rate)
    elif base0.trace:
        rates = [round(trace_rate(base0), 6)]
    else:
        raise ValueError("plan needs --target-rate (or --trace to plan for the trace at its own rate)")
    seeds = tuple(range(base0.seed, base0.seed + args.seeds))
    cache = None if args.no_cache else ProbeCache(args.cache)

    lengths = LengthCache()
    screened = [screen(c, bases[c.scheduler], rate, seeds, args.max_replicas, lengths)
                for rate in rates for c in candidates]
    with make_executor(args.executor, jobs=args.jobs, ray_address=args.ray_address) as executor:
        searched = search_replicas(screened, bases, slos, seeds, args.max_replicas, executor, cache,
                                   progress=not args.no_progress)
    def host_cost(cand):  # a replica's CPU KV tier, USD per hour
        return prices.host_gib_hour * cand.host_gib(bases[cand.scheduler])
    deps = deployments(searched, prices.price, metric, host_cost)
    cheap, front = cheapest(deps), pareto(deps)

    slo_text = ", ".join(s.text for s in slos) or "none (stability only)"
    where = base0.trace or base0.workload
    title = (f"{base0.model} ({base0.batch_time}), {where} at {', '.join(f'{r:g}' for r in rates)} req/s; SLOs: "
             f"{slo_text}; seeds {', '.join(map(str, seeds))}")
    print(title)
    print(f"{len(candidates)} candidates ({len(gpus)} GPUs x {len(set(c.tp for c in candidates))} TP x "
          f"{len({(c.scheduler, c.params) for c in candidates})} scheduler settings x {len(routers)} routers)"
          + (f" at each of {len(rates)} rates" if len(rates) > 1 else ""))
    cand_table = candidate_rows(screened, searched, prices.price, host_cost)
    print("\n".join(table(*cand_table)))
    slo_keys = [s.key for s in slos]
    if cheap:
        print(f"\ncheapest deployments that meet the SLOs (top {min(args.top, len(cheap))}; prices "
              f"{'from ' + args.prices + ' over ' if args.prices else ''}{PRICES_PATH.name}):")
        print("\n".join(table(*deployment_rows(cheap[:args.top], slo_keys))))
        print(f"\nPareto frontier, cost per hour vs {metric} (every replica count probed that met):")
        print("\n".join(table(*deployment_rows(front, slo_keys))))
        print(f"\nreproduce the cheapest: {simulate_command(cheap[0].config)}")
    else:
        print("\n" + none_found(screened, searched, slos, args.max_replicas))
    verdicts = offload_verdicts(cheap, candidates)
    if verdicts:
        print(f"\nwhere KV offload pays (host memory at ${prices.host_gib_hour:g} per GiB-hour):")
        print("\n".join(verdicts))
    pruning = summary(screened, searched, seeds)
    wall = time.perf_counter() - t0
    print(f"\n{pruning}")
    cached = f"; {cache.hits} probe runs from the cache" if cache is not None else ""
    print(f"{sum(len(s.probes) for s in searched)} probes x {len(seeds)} seeds in {wall:.1f} s "
          f"({args.executor} executor{cached})")
    command = shlex.join(["llmsched"] + sys.argv[1:]) if sys.argv[1:2] == ["plan"] else "llmsched plan ..."
    if args.report:
        write_html(args.report, {"title": title, "slo_text": slo_text, "slo_keys": slo_keys, "command": command,
                                 "prices": "; ".join(sorted(set(prices.sources.values()))), "deployments": deps,
                                 "frontier": front, "cheapest": cheap, "pareto_metric": metric,
                                 "candidate_table": cand_table, "pruning": pruning, "offload": verdicts})
        print(f"wrote {args.report}")
    if args.json_out:
        data = {"title": title, "rates": rates, "slos": [s.text for s in slos], "seeds": list(seeds),
                "pareto_metric": metric,
                "candidates": [{"label": s.candidate.label, "rate": s.rate, "memory": s.memory,
                                "bound_rps_per_replica": s.bound_rps_per_replica, "min_replicas": s.min_replicas,
                                "pruned": s.pruned, "notes": s.notes} for s in screened],
                "searches": [{"label": s.screened.candidate.label, "rate": s.screened.rate, "replicas": s.replicas,
                              "probes": {str(r): p.to_dict(records=False) for r, p in sorted(s.probes.items())}}
                             for s in searched],
                "cheapest": [d.to_dict() for d in cheap], "frontier": [d.to_dict() for d in front]}
        with open(args.json_out, "w") as f:
            json.dump(data, f, indent=1, default=str)
        print(f"wrote {args.json_out}")
    return 0 if cheap else 1  # a plan that found no deployment says so in its exit status too


def none_found(screened, searched, slos, max_replicas: int) -> str:
    """Why no deployment came out: every candidate pruned before a probe (it cannot run), or none met the SLOs."""
    if all(s.pruned for s in screened):
        reasons = sorted({s.pruned.split(":")[0] for s in screened})
        return (f"no candidate can run: all {len(screened)} were pruned before any probe ({', '.join(reasons)}; "
                f"see the table); change --gpus, --tp or the model")
    return f"no candidate meets the SLOs up to --max-replicas {max_replicas}" + best_reached(searched, slos)


def best_reached(searched, slos) -> str:
    """For each SLO, the best value any probe reached and where: what failed, and by how much."""
    parts = []
    for slo in slos:
        seen = [(p.values[slo.key], s.screened.candidate.label, r) for s in searched for r, p in s.probes.items()
                if p.values.get(slo.key) == p.values.get(slo.key)]
        if not seen:
            continue
        ratio = slo.metric in RATIOS
        value, label, r = max(seen) if ratio else min(seen)
        shown = f"{value:.3g}" if ratio else f"{value:.3g} s"
        parts.append(f"{slo.key} best {shown} (limit {slo.limit:g}{'' if ratio else ' s'}) on {label} x{r}")
    unstable = [s for s in searched if all(p.verdict != "stable" for p in s.probes.values())]
    if unstable:
        parts.append(f"{len(unstable)} candidates never stable")
    return (": " + "; ".join(parts)) if parts else ""


def summary(screened, searched, seeds) -> str:
    memory = sum(1 for s in screened if s.pruned.startswith("memory"))
    bound = sum(1 for s in screened if s.pruned.startswith("bound"))
    saved = sum(probes_saved(s.screened.min_replicas) for s in searched)
    nobound = sum(1 for s in screened if not s.pruned and s.bound_rps_per_replica is None)
    text = (f"pruning: {memory + bound} of {len(screened)} candidates needed no probe ({memory} do not fit in "
            f"memory, {bound} need more replicas than allowed by the sound throughput bound); the bound's least "
            f"replica counts skipped {saved} probe rounds (x{len(seeds)} seeds) that a search from 1 replica "
            f"(1, 2, 4, ...) would have run")
    if nobound:
        text += f"; {nobound} candidates had no bound (batch-time model without one)"
    return text

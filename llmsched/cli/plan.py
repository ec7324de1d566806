"""``llmsched plan``: the cheapest deployment (GPU, tensor parallelism, replicas, scheduler, router) that carries a
target rate within the SLOs, with the cost-vs-latency Pareto frontier (docs/plan.md)."""
from __future__ import annotations

import json
import shlex
import sys
import time

from ..capacity.slo import check_run_slos, slos_with_attainment
from ..hardware.prices import PRICES_PATH
from ..plan.candidates import (build_candidates, parse_offloads, parse_ratios, parse_tps, parse_variations,
                               split_names)
from ..plan.inputs import check_runnable, pareto_metric, plan_rates, read_prices
from .probe_options import add_probe_options, add_slo_options, check_cache_options, probe_cache
from .run_options import add_run_options, run_configs
from .runs import check_out_file

DESCRIPTION = (
    "For a target rate (--target-rate R, a list R1,R2 or a range START:STOP:STEP; or a --trace at its own rate), "
    "find for every candidate GPU x TP x scheduler (x --vary parameters) x router the fewest replicas whose probe "
    "is stable and meets the SLOs (capacity definition: docs/capacity.md), and print the cheapest deployments "
    "with their cost per hour and per million output tokens, and the cost-vs-latency Pareto frontier. Before "
    "simulating, candidates whose model does not fit the GPU are listed as infeasible with the memory figures, "
    "and the sound throughput bound (`llmsched theory throughput-bound`) gives each candidate its least replicas.")
EXCLUDED = ("gpu", "gpu_spec", "tp", "replicas", "router", "rate", "horizon", "rate_schedule", "concurrency",
            "fleet", "disaggregate", "prefill_gpu", "prefill_tp", "decode_gpu", "decode_tp", "autoscaler",
            "min_replicas", "max_replicas", "autoscaler_params", "cold_start",
            "cold_start_params")  # plan chooses the deployment itself


def add(sub) -> None:
    p = sub.add_parser("plan", help="cheapest deployment that meets the SLOs at a target rate, with its Pareto "
                                    "frontier", description=DESCRIPTION)
    p.add_argument("--target-rate", default=None, help="req/s to carry: R, R1,R2,... or START:STOP:STEP "
                                                       "(default with --trace: the trace's own mean rate)")
    add_slo_options(p)
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
    p.add_argument("--pd-ratios", default=None, metavar="P:D,...",
                   help="also try disaggregated deployments at these prefill:decode replica ratios (e.g. 1:1,2:1,1:2), "
                        "each --gpus x --tp for the prefill pool with each for the decode pool, scaled as units; "
                        "--kv-link, --kv-connector, --pd-decider and --prefill-pool/--decode-pool apply to them "
                        "(docs/disaggregation.md)")
    p.add_argument("--max-replicas", dest="most_replicas", type=int, default=16,
                   help="most replicas per deployment (default 16)")
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


def plan(args) -> int:
    from ..executors import make_executor
    from ..plan.outputs import json_data, lines, probes_line, report_context
    from ..plan.planner import plan as plan_deployments
    from ..plan.report import write_html
    t0 = time.perf_counter()
    slos = slos_with_attainment(args.slo, args.attainment)
    metric = pareto_metric(args.pareto_metric, slos)
    for name, value, low in (("--max-replicas", args.most_replicas, 1), ("--seeds", args.seeds, 1),
                             ("--top", args.top, 1)):
        if value < low:
            raise ValueError(f"{name} must be >= {low}, got {value}")
    check_cache_options(args)
    check_out_file(args.report, "--report", "report.html")
    check_out_file(args.json_out, "--json")
    schedulers = split_names(args.schedulers, "--schedulers")
    ratios = parse_ratios(args.pd_ratios) if args.pd_ratios else []
    if ratios:  # the runs may carry disaggregation's fields (each colocated candidate resets them)
        args.run_defaults["disaggregate"] = "1P1D"
    candidates = build_candidates(split_names(args.gpus, "--gpus"), parse_tps(args.tps), schedulers,
                                  split_names(args.routers, "--routers"), parse_variations(args.vary, schedulers),
                                  parse_offloads(args.kv_offloads), ratios)
    if ratios:
        colocated_only = sorted({c.scheduler for c in candidates} - {c.scheduler for c in candidates if c.pd})
        if colocated_only:
            print(f"plan: tried colocated only: {', '.join(colocated_only)} (cannot run a decode pool: "
                  f"Scheduler.serves_transferred_kv)", file=sys.stderr)
    prices = read_prices(args.prices, [g for c in candidates for g in c.price_gpus])
    bases = {cfg.scheduler: cfg for cfg in run_configs(args, schedulers)}
    base0 = next(iter(bases.values()))
    check_run_slos(slos, base0, args.attainment)
    check_runnable(bases)
    rates = plan_rates(args.target_rate, base0)
    seeds = tuple(range(base0.seed, base0.seed + args.seeds))
    cache = probe_cache(args)
    with make_executor(args.executor, jobs=args.jobs, ray_address=args.ray_address) as executor:
        result = plan_deployments(candidates, bases, rates, slos, seeds, args.most_replicas, prices.price, metric,
                                  executor, cache, progress=not args.no_progress,
                                  host_cost=lambda c: prices.host_gib_hour * c.host_gib(bases[c.scheduler]))
    print("\n".join(lines(result, args.top, args.prices, prices.price)))
    print(probes_line(result, time.perf_counter() - t0, args.executor, cache))
    if args.report:
        command = shlex.join(["llmsched"] + sys.argv[1:]) if sys.argv[1:2] == ["plan"] else "llmsched plan ..."
        write_html(args.report, report_context(result, command, prices, prices.price))
        print(f"wrote {args.report}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(json_data(result), f, indent=1, default=str)
        print(f"wrote {args.json_out}")
    return 0 if result.cheapest else 1  # a plan that found no deployment says so in its exit status too

"""``llmsched capacity``: the highest arrival rate a deployment carries, stable and within the SLOs."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from ..capacity.outputs import heading, lines, write
from ..capacity.rate_search import find_capacities
from ..capacity.slo import check_run_slos, slos_with_attainment
from .probe_options import add_probe_options, add_search_parser, check_cache_options, probe_cache, probe_seeds
from .run_options import add_run_options, base_config, run_configs, tuned_names
from .runs import check_out_dir, split_names

DESCRIPTION = (
    "Find the highest arrival rate (closed loop: concurrency) at which the deployment is stable and meets every "
    "SLO, by bracket expansion and bisection to --resolution. Every request arriving in a probe's measurement "
    "window counts; unfinished ones are misses (+inf); a run whose outstanding work grows is never within its "
    "SLOs (docs/capacity.md). --rate (or --concurrency) is where the search starts. Probe results are cached "
    "by a hash of their config (and llmsched's code) in --cache.")


def add(sub) -> None:
    p = add_search_parser(sub, "capacity", "highest rate that is stable and meets the SLOs (bisection)", DESCRIPTION,
                          add_schedulers, resolution=0.02)
    add_probe_options(p)
    p.add_argument("--out", default=None, help="write capacity.json, capacity.csv and capacity.png here")
    add_run_options(p, exclude=("horizon", "rate_schedule"))
    p.set_defaults(func=capacity)


def add_schedulers(p) -> None:
    """One scheduler (``--scheduler``) or several (``--schedulers``), a search for each."""
    who = p.add_mutually_exclusive_group()
    who.add_argument("--scheduler", help="scheduler name (default: the --tuned files' schedulers, else sarathi)")
    who.add_argument("--schedulers", help="comma-separated names: a search for each, run side by side")


def capacity(args) -> int:
    from ..executors import make_executor
    check_out_dir(args.out)
    slos = slos_with_attainment(args.slo, args.attainment)
    check_cache_options(args)
    if args.schedulers is not None:
        names = split_names(args.schedulers)
    elif args.scheduler is None and tuned_names(args):
        names = tuned_names(args)
    else:
        names = [args.scheduler if args.scheduler is not None else base_config(args).get("scheduler", "sarathi")]
    configs = run_configs(args, names)
    check_run_slos(slos, configs[0], args.attainment)
    bases = {cfg.scheduler: cfg for cfg in configs}
    seeds = probe_seeds(args, configs[0].seed)
    cache = probe_cache(args)
    t0 = time.perf_counter()
    with make_executor(args.executor, jobs=args.jobs, ray_address=args.ray_address) as executor:
        results = find_capacities(bases, slos, args.resolution, seeds, executor, cache,
                                  progress=not args.no_progress, max_rate=args.max_rate)
    print(heading(configs[0], slos, seeds))
    for r in results.values():
        print("\n".join(lines(r, slos)))
    wall = time.perf_counter() - t0
    cached = f", {cache.hits} probe runs from the cache" if cache is not None else ""
    print(f"{sum(len(r.probes) for r in results.values())} probes in {wall:.1f} s{cached}")
    if args.out:
        context = {"base_configs": {k: dataclasses.asdict(v) for k, v in bases.items()}, "seeds": list(seeds),
                   "resolution": args.resolution}
        files = write(Path(args.out), results, slos, context)
        print(f"wrote {', '.join(f'{args.out}/{f}' for f in files)}")
    return 0

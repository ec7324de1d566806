"""``llmsched tune``: search a scheduler's declared parameters for the highest capacity under given SLOs (the
search itself is llmsched/tune/)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..capacity.slo import slos_with_attainment
from ..tune.study import DEFAULT_BATCH, DEFAULT_BUDGET, DEFAULT_RESOLUTION
from .probe_options import add_probe_options, add_search_parser, check_cache_options, probe_cache, probe_seeds
from .run_options import add_run_options, run_configs

DESCRIPTION = (
    "Search a scheduler's tunable parameters (each declares its ranges, the paper's value the start) for the "
    "highest capacity under --slo on the run options' workload: Optuna's TPE, seeded (--search-seed), --budget "
    "capacity searches, the first the untuned setting. Writes best.json (give it to capacity/compare/plan with "
    "--tuned), history.json and tune.png to --out. --check-on re-measures the untuned and the best setting on "
    "other traffic (another seed, workload, rate process).")


def add(sub) -> None:
    p = add_search_parser(sub, "tune", "a scheduler's parameters at their best capacity for given SLOs (Optuna TPE)",
                          DESCRIPTION, add_scheduler, resolution=DEFAULT_RESOLUTION)
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                   help=f"capacity searches, the untuned one included (default {DEFAULT_BUDGET})")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                   help=f"trials asked and searched together per round (default {DEFAULT_BATCH}; part of the result: "
                        "the same seed and batch give the same answer on any executor)")
    p.add_argument("--search-seed", type=int, default=0, help="the TPE sampler's seed (default 0)")
    p.add_argument("--params", default=None, help="comma-separated parameters to tune (default: all it declares)")
    p.add_argument("--range", action="append", default=[], metavar="NAME=LOW:HIGH",
                   help="search NAME over LOW:HIGH instead of its declared range (repeatable)")
    p.add_argument("--check-on", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                   help="re-measure the untuned and the best setting with these run options changed, e.g. "
                        "'seed=100' or 'workload=lmsys,seed=7' (repeatable)")
    p.add_argument("--out", default="tune", help="output folder (default tune/)")
    add_probe_options(p)
    add_run_options(p, exclude=("horizon", "rate_schedule"))
    p.set_defaults(func=cmd_tune)


def add_scheduler(p) -> None:
    """The one scheduler whose parameters are tuned."""
    p.add_argument("--scheduler", required=True, help="scheduler name (see `llmsched presets`)")


def parse_check(text: str) -> dict:
    from ..config_fields import parse_value
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"--check-on {text!r}: write KEY=VALUE pairs of run options, e.g. 'seed=100' or "
                             f"'workload=lmsys,seed=7'")
        out[key] = parse_value(value.strip())
    if "scheduler" in out or "scheduler_params" in out:
        raise ValueError(f"--check-on {text!r}: the check runs the tuned scheduler; change the traffic or the "
                         f"deployment, not the scheduler")
    return out


def checked_config(base, changes: dict, text: str):
    from ..run_config import RunConfig
    data = {**dataclasses.asdict(base), **changes}
    if ("trace" in changes or "concurrency" in changes) and "rate" not in changes:
        data["rate"] = None if changes.get("trace") or changes.get("concurrency") else data["rate"]
    try:
        return RunConfig.from_dict(data, origin=f"--check-on {text}")
    except ValueError as e:
        raise ValueError(f"--check-on {text!r}: {e}") from None


def cmd_tune(args) -> int:
    from ..executors import make_executor
    from ..tune.checks import check_on
    from ..tune.outputs import history, lines
    from ..tune.plot import plot_tune
    from ..tune.space import parse_ranges, search_space, split
    from ..tune.study import best_probe, tune
    from ..tune.tuned_file import tuned_record, write_tuned
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ValueError("llmsched tune needs Optuna: pip install 'llmsched[tune]' (or pip install optuna)") from None
    slos = slos_with_attainment(args.slo, args.attainment)
    if args.budget < 1:
        raise ValueError(f"--budget {args.budget}: give at least 1 capacity search (the first is the untuned "
                         f"setting)")
    check_cache_options(args)
    base = run_configs(args, [args.scheduler])[0]
    only = [s.strip() for s in args.params.split(",") if s.strip()] if args.params else None
    if args.params is not None and not only:
        raise ValueError("--params: name at least one parameter")
    params = search_space(base, only, parse_ranges(args.range))
    checks = [(text, checked_config(base, parse_check(text), text)) for text in args.check_on]
    seeds = probe_seeds(args, base.seed)
    cache = probe_cache(args)
    out = Path(args.out)
    print(f"tuning {base.scheduler} on {base.model}/{base.gpu} x{base.replicas}, {base.trace or base.workload}; SLOs: "
          f"{', '.join(s.text for s in slos) or 'none (stability only)'}; {args.budget} searches over "
          + ", ".join(f"{p.name} {p.range.text()} (from {p.start})" for p in params))
    with make_executor(args.executor, jobs=args.jobs, ray_address=args.ray_address) as executor:
        result = tune(base, slos, params, args.budget, args.search_seed, seeds, args.resolution, executor, cache,
                      args.batch, progress=not args.no_progress, max_rate=args.max_rate)
        best = result.best
        checked = check_on(checks, best.values, params, slos, args.resolution, args.seeds, executor, cache,
                           args.max_rate)
    out.mkdir(parents=True, exist_ok=True)
    (out / "history.json").write_text(json.dumps(history(result, base, slos, args.batch, args.budget, checked),
                                                 indent=2, default=str) + "\n")
    print("\n".join(lines(result, checked)))
    if best.capacity is None:
        raise ValueError(f"no setting of {base.scheduler} meets the SLOs at any rate probed ({len(result.trials)} "
                         f"settings); {best_probe(result.trials, slos)}; history in {out}/history.json")
    sched, run = split(best.values, params)
    record = tuned_record(base.scheduler, sched, run, capacity=best.capacity, unit=result.unit,
                          untuned_capacity=result.untuned.capacity, trial=best.number,
                          slos=[s.text for s in slos], tuned_on={k: v for k, v in dataclasses.asdict(base).items()
                                                                 if k not in ("scheduler", "scheduler_params")},
                          seeds=list(seeds), checks=checked)
    write_tuned(out / "best.json", record)
    plot_tune(result, out / "tune.png")
    print(f"wrote {out}/best.json, {out}/history.json, {out}/tune.png ({result.wall_s:.0f} s)")
    return 0


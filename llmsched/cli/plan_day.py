"""``llmsched plan-day``: for a day of traffic (a rate schedule, or a trace in time) and an SLO attainment target, the
cheapest fixed fleet and the cheapest autoscaler setting of each deployment, against an oracle and a lower bound,
and what longer cold starts cost them (docs/autoscaling.md, "plan-day")."""
from __future__ import annotations

import json
import math
import sys
import time

from ..config_fields import DISAGG_KEYS
from ..fleet.autoscalers import AUTOSCALER_NAMES
from ..hardware.prices import PRICES_PATH
from ..plan.candidates import build_candidates, parse_tps, split_names
from ..plan.inputs import read_prices
from .probe_options import add_probe_options, check_cache_options, probe_cache
from .runs import check_out_dir, check_out_file
from .run_options import add_run_options, run_configs

DESCRIPTION = (
    "Plan a day: give the day (--rate-schedule with --duration, or --trace in time), the SLOs (--tiers) and the "
    "fraction of the day's requests that must meet them (--attainment). For every GPU x TP x scheduler x router it "
    "measures one replica's capacity at that attainment, searches the fewest always-on replicas whose day meets it, "
    "runs each autoscaler of --autoscalers at a few settings between 1 replica and that many, and prints the "
    "cheapest of each, the oracle's GPU-hours (per minute the fewest replicas covering that minute's arrivals, "
    "started at no cost) and a lower bound (the sound throughput bound on the day's requests); --cold-starts reruns "
    "each policy's cheapest setting at other cold starts. Every day is simulated whole, on the executor (--jobs, "
    "--executor ray).")
# plan-day chooses the deployment and its autoscaler itself; its deployments are colocated (a day of
# disaggregated pools is not searched: plan --pd-ratios weighs them at one rate)
EXCLUDED = ("gpu", "gpu_spec", "tp", "replicas", "router", "rate", "horizon", "concurrency", "fleet", "autoscaler",
            "min_replicas", "max_replicas", "autoscaler_params", "dp", "expert_parallel", *DISAGG_KEYS)


def add(sub) -> None:
    p = sub.add_parser("plan-day", help="cheapest autoscaled and fixed fleets for a day of traffic, with the "
                                        "oracle's cost", description=DESCRIPTION)
    p.add_argument("--attainment", type=float, required=True,
                   help="fraction of the day's requests that must meet their tier's targets (--tiers), e.g. 0.99")
    p.add_argument("--gpus", default="h100", help="comma-separated GPU presets (default h100)")
    p.add_argument("--tp", dest="tps", default="1", help="tensor-parallel degrees, e.g. 1,2 (default 1)")
    p.add_argument("--schedulers", default="vllm-chunked", help="comma-separated schedulers (default vllm-chunked)")
    p.add_argument("--routers", default="round-robin", help="comma-separated routers (default round-robin)")
    p.add_argument("--autoscalers", default=",".join(AUTOSCALER_NAMES),
                   help=f"comma-separated autoscalers to try (default all: {', '.join(AUTOSCALER_NAMES)})")
    p.add_argument("--max-replicas", dest="most_replicas", type=int, default=32,
                   help="most replicas of a fixed fleet searched (default 32)")
    p.add_argument("--cold-starts", default="", metavar="S1,S2,...",
                   help="also rerun each policy's cheapest setting at these cold starts (seconds)")
    p.add_argument("--prices", default=None, metavar="FILE", help=f"a JSON file of USD per GPU-hour on top of "
                                                                  f"{PRICES_PATH.name}")
    p.add_argument("--json", dest="json_out", default=None, help="write every day run's figures as JSON here")
    p.add_argument("--plots", default=None, metavar="DIR",
                   help="draw the timeline (docs/autoscaling.md, 'Results over time') of each deployment's cheapest "
                        "fixed and cheapest autoscaled day, and of each day at another cold start, into DIR")
    add_probe_options(p)
    add_run_options(p, exclude=EXCLUDED, defaults={"latency_boundary": "engine"})
    p.set_defaults(func=plan_day)


def seconds_list(text: str) -> list[float]:
    if not text.strip():
        return []
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--cold-starts {text!r}: give seconds like 30,120,300") from None
    if any(not (v >= 0 and math.isfinite(v)) for v in values):
        raise ValueError(f"--cold-starts {text!r}: seconds must be finite and >= 0")
    return values


def plan_day(args) -> int:
    from ..executors import make_executor
    from ..plan.day import burst_attainment, plan_day as plan
    t0 = time.perf_counter()
    if not 0 < args.attainment <= 1:
        raise ValueError(f"--attainment {args.attainment:g}: give a fraction in (0, 1], e.g. 0.99")
    if args.most_replicas < 1:
        raise ValueError(f"--max-replicas must be >= 1, got {args.most_replicas}")
    check_cache_options(args)
    check_out_dir(args.plots, "--plots")
    check_out_file(args.json_out, "--json")
    policies = split_names(args.autoscalers, "--autoscalers")
    for name in policies:
        if name not in AUTOSCALER_NAMES:
            raise ValueError(f"--autoscalers: unknown autoscaler {name!r}; valid: {', '.join(AUTOSCALER_NAMES)}")
    cold_starts = seconds_list(args.cold_starts)
    schedulers = split_names(args.schedulers, "--schedulers")
    candidates = build_candidates(split_names(args.gpus, "--gpus"), parse_tps(args.tps), schedulers,
                                  split_names(args.routers, "--routers"))
    prices = read_prices(args.prices, [c.gpu for c in candidates])
    bases = {cfg.scheduler: cfg for cfg in run_configs(args, schedulers)}
    base = next(iter(bases.values()))
    if not (base.rate_schedule or base.trace):
        raise ValueError("plan-day plans a day of changing traffic: give --rate-schedule (with --duration) or --trace")
    if base.latency_boundary != "engine":
        raise ValueError("plan-day streams its days (millions of requests in flat memory), which measure at the "
                         "engine: leave --latency-boundary out or give engine")
    if not base.tiers:
        raise ValueError(f"--attainment {args.attainment:g} counts the requests that meet their tier's targets: give "
                         f"--tiers, e.g. 'std:ttft=2:tpot=0.1'")
    say = None if args.no_progress else (lambda text: print(text, file=sys.stderr, flush=True))
    with make_executor(args.executor, jobs=args.jobs, ray_address=args.ray_address) as executor:
        plans = plan(candidates, bases, args.attainment, policies, prices.price, args.most_replicas, executor,
                     probe_cache(args), cold_starts, say)
    for p in plans:
        print(f"\n{p.candidate.label}: one replica {p.capacity_rps or 0:.3g} req/s at attainment >= "
              f"{args.attainment:g}; busiest minute {p.peak_rps:.3g} req/s; ${p.price:g} a GPU-hour")
        fixed, auto = p.best_fixed, p.best_autoscaled
        bursts = bool(base.rate_schedule and base.rate_schedule.value.bursts)
        print(f"  {'plan':<44} {'GPU-h':>8} {'USD':>9} {'attain':>8} {'x fixed':>8}" + (f" {'burst':>8}" if bursts
                                                                                        else ""))
        rows = [("fixed " + (f"x{fixed.setting['replicas']}" if fixed else "(none met)"), fixed)]
        for policy in policies:
            mine = [d for d in p.autoscaled if d.setting["policy"] == policy]
            best = p.cheapest(mine)
            label = f"{policy} {best.setting['params'] or 'defaults'}" if best else f"{policy} (no setting met)"
            rows.append((label, best))
        for label, d in rows:
            if d is None:
                print(f"  {label:<44}")
                continue
            ratio = d.usd / fixed.usd if fixed else math.nan
            print(f"  {label[:44]:<44} {d.gpu_hours:>8.2f} {d.usd:>9.2f} {d.record['attainment']:>8.4f} "
                  f"{ratio:>8.3f}" + (f" {burst_attainment(d.record, base):>8.4f}" if bursts else ""))
        if p.oracle_gpu_hours is not None:
            print(f"  {'oracle (per minute, no cold start)':<44} {p.oracle_gpu_hours:>8.2f} "
                  f"{p.oracle_gpu_hours * p.price:>9.2f}")
        if p.bound_gpu_hours is not None:
            print(f"  {'lower bound (throughput bound)':<44} {p.bound_gpu_hours:>8.2f} "
                  f"{p.bound_gpu_hours * p.price:>9.2f}")
        if auto and fixed:
            oracle = f"; over the oracle: {auto.gpu_hours / p.oracle_gpu_hours:.3f}" if p.oracle_gpu_hours else ""
            print(f"  cheapest autoscaled / cheapest fixed: {auto.usd / fixed.usd:.3f}{oracle}")
        if p.cold_starts:
            print(f"  {'cold start (s)':<16} {'policy':<12} {'attain':>8} {'burst':>8} {'GPU-h':>8}")
            for d in sorted(p.cold_starts, key=lambda d: (d.setting["policy"], d.setting["cold_start"])):
                print(f"  {d.setting['cold_start']:<16g} {d.setting['policy']:<12} {d.record['attainment']:>8.4f} "
                      f"{burst_attainment(d.record, base):>8.4f} {d.gpu_hours:>8.2f}")
    print(f"\n{sum(len(p.fixed) + len(p.autoscaled) + len(p.cold_starts) for p in plans)} days simulated in "
          f"{time.perf_counter() - t0:.0f} s")
    if args.plots:
        drawn = draw_days(plans, args.plots, args.attainment)
        print(f"drew {len(drawn)} timelines into {args.plots}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump([day_json(p, base) for p in plans], f, indent=1, default=str)
        print(f"wrote {args.json_out}")
    return 0 if any(p.best_fixed or p.best_autoscaled for p in plans) else 1


def draw_days(plans, folder, attainment: float) -> list:
    """Each deployment's cheapest fixed and autoscaled day, and its days at other cold starts, as timeline figures
    (``report/timeline_figure.py``) named by deployment and setting."""
    from pathlib import Path

    from ..report.timeline_figure import plot_timeline
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    drawn = []
    for p in plans:
        days = [("fixed", p.best_fixed), ("autoscaled", p.best_autoscaled)]
        days += [(f"{d.setting['policy']}_cold{d.setting['cold_start']:g}s", d) for d in p.cold_starts]
        for name, d in days:
            if d is None or not d.record["timeline"]:
                continue
            what = (f"fixed x{d.setting['replicas']}" if d.kind == "fixed" else
                    f"{d.setting['policy']} {d.setting['params'] or 'defaults'}"
                    + (f", cold start {d.setting['cold_start']:g} s" if "cold_start" in d.setting else ""))
            title = (f"{p.candidate.label}: {what}; attainment {d.record['attainment']:.4f} "
                     f"(target {attainment:g}), {d.gpu_hours:.1f} GPU-h, ${d.usd:.0f}")
            path = out / f"{p.candidate.label.replace(' ', '_')}_{name}.png"
            plot_timeline({"rows": d.record["timeline"]}, path, title=title)
            drawn.append(path)
    return drawn


def day_json(p, base) -> dict:
    """A candidate's days without their timelines, each with its bursts' attainment (NaN without a burst)."""
    from ..plan.day import burst_attainment

    def days(items):
        return [{"kind": d.kind, "setting": d.setting, "usd": d.usd, "meets": d.meets, "gpu_hours": d.gpu_hours,
                 "burst_attainment": burst_attainment(d.record, base),
                 **{k: v for k, v in d.record.items() if k != "timeline"}} for d in items]
    return {"candidate": p.candidate.label, "capacity_rps": p.capacity_rps, "peak_rps": p.peak_rps,
            "usd_per_gpu_hour": p.price, "oracle_gpu_hours": p.oracle_gpu_hours,
            "bound_gpu_hours": p.bound_gpu_hours, "fixed": days(p.fixed), "autoscaled": days(p.autoscaled),
            "cold_starts": days(p.cold_starts)}

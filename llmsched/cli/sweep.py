"""``llmsched sweep``: schedulers over a range of arrival rates."""
from __future__ import annotations

import math
import os
from pathlib import Path

from .run_options import add_run_options

MAX_RATES = 1000


def add(sub) -> None:
    w = sub.add_parser("sweep", help="schedulers over a range of arrival rates",
                       description="Run each scheduler at each rate; print a table and write sweep.csv/.json "
                                   "and sweep.png to --out. With --tenants each rate is the tenants' total, "
                                   "their rates scaled by one factor (the same mix), and the rows carry each "
                                   "tenant's latencies and service. A --trace beside a real run's meta.json takes "
                                   "that run's model, GPU and limits wherever no option gives them.")
    w.add_argument("--schedulers", help="comma-separated names (default: the config file's scheduler, else "
                                        "vllm,sarathi)")
    w.add_argument("--rates", required=True, help="START:STOP:STEP (inclusive), or a comma-separated list")
    w.add_argument("--out", default="sweep", help="output folder (default: sweep/)")
    w.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel runs (default 2)")
    add_run_options(w, trace_meta="engine")
    w.set_defaults(func=sweep)


def sweep(args) -> int:
    from ..report.run_figures import plot_sweep
    from ..metrics.writers import format_table, write_table
    from .run_options import base_config, run_configs
    from .runs import (TABLE_COLUMNS, check_out_dir, run_many, say_engine_unknown, split_names, summary_row,
                       table_columns)
    check_out_dir(args.out)
    base = base_config(args)
    chosen = args.schedulers if args.schedulers is not None else base.get("scheduler") or "vllm,sarathi"
    names = split_names(chosen)
    for key in ("rate", "concurrency", "rate_schedule"):
        if base.get(key) is not None:
            raise ValueError(f"--{key.replace('_', '-')} does not apply to `llmsched sweep`, which runs each of "
                             f"--rates; remove it")
    rates = parse_rates(args.rates)
    mix = bool(base.get("tenants")) and not base.get("trace")
    if mix:  # each rate is the tenants' total, their mix kept (as a capacity probe scales it)
        configs, totals = tenant_configs(run_configs(args, names), rates)
    else:
        configs = run_configs(args, names, rates)
        totals = [cfg.rate for cfg in configs]
    outcomes = run_many(configs, args.jobs, not args.no_progress)
    rows = [{**summary_row(cfg, res, summ), "rate": total}
            for cfg, total, (res, summ) in zip(configs, totals, outcomes)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_table(rows, out / "sweep.csv", out / "sweep.json")
    plot_sweep(rows, x="rate", path=out / "sweep.png")
    per_tenant = [k for k in rows[0] if k.startswith(("ttft_p99_", "service_"))] + ["jain"] if mix else []
    print(format_table(rows, table_columns(rows, ["scheduler", "rate"] + TABLE_COLUMNS[1:])
                       + [k for k in per_tenant if k in rows[0]]))
    print(f"wrote {out}/sweep.csv, sweep.json, sweep.png")
    say_engine_unknown("sweep", args)
    return 0


def tenant_configs(configs, rates: list[float]):
    """Each config at each rate with ``--tenants``: the rate is the tenants' total, every tenant's rate scaled by
    one factor (the same mix at another load); returns the configs and their totals."""
    from ..capacity.probe import at_rate
    out, totals = [], []
    for cfg in configs:
        for rate in rates:
            out.append(at_rate(cfg, rate))
            totals.append(rate)
    return out, totals


def parse_rates(text: str) -> list[float]:
    usage = f"--rates {text!r}: use START:STOP:STEP with STEP > 0 (e.g. 1:8:1) or a list like 1,2,4"
    try:
        if ":" in text:
            start, stop, step = (float(x) for x in text.split(":"))
            n = (stop - start) / step + 1 if step > 0 and stop >= start else None
        else:
            rates = [float(x) for x in text.split(",")]
            n = len(rates)
    except ValueError:
        raise ValueError(usage) from None
    if n is None or not math.isfinite(n):
        raise ValueError(usage)
    if n > MAX_RATES:
        raise ValueError(f"--rates {text!r}: {int(n)} rates; a sweep takes at most {MAX_RATES} (raise STEP)")
    if ":" in text:
        rates = [round(start + i * step, 10) for i in range(int(round(n - 1)) + 1) if start + i * step <= stop + 1e-9]
    if not rates or any(not (r > 0 and math.isfinite(r)) for r in rates):
        raise ValueError(f"--rates {text!r}: rates must be positive")
    return rates

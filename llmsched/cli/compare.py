"""``llmsched compare``: several schedulers on the same workload, a table, results files and plots."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from .run_options import add_run_options

# `llmsched compare` with no options: ShareGPT lengths on Llama-3-8B/A100 at 2.8 req/s, just under where vllm,
# sarathi and vllm-chunked saturate (~2.8-2.9 req/s, measured with `llmsched sweep`), with Bari et al.'s
# paid (5%, TBT 0.1 s) and free (TBT 0.5 s) tiers so goodput separates the policies.
COMPARE_DEFAULTS = {"rate": 2.8, "tiers": "paid:tbt=0.1:share=0.05,free:tbt=0.5"}


def add(sub) -> None:
    c = sub.add_parser("compare", help="every registered scheduler (or --schedulers) on the same workload",
                       description="Run several schedulers on the same workload and print a table; writes "
                                   "results.json/.csv, latency/KV plots and report.html to --out. With no options: "
                                   "Llama-3-8B on an A100, ShareGPT lengths, Poisson arrivals near the baselines' "
                                   "capacity. A --trace beside a real run's meta.json takes that run's model, GPU "
                                   "and limits wherever no option gives them.")
    c.add_argument("--schedulers", help="comma-separated names, or 'all' (default: the config file's scheduler, "
                                        "else all)")
    c.add_argument("--out", default="compare", help="output folder (default: compare/)")
    c.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel runs (default 2)")
    c.add_argument("--report", metavar="FILE.html",
                   help="the report page: settings, a sortable table, the figures, a section per scheduler family; "
                        "one self-contained file (default: report.html in --out)")
    add_run_options(c, defaults=COMPARE_DEFAULTS, trace_meta="engine")
    c.set_defaults(func=compare)


def compare(args) -> int:
    from ..metrics.writers import format_table, write_table
    from ..report.compare_page import write_compare_report
    from ..report.run_figures import plot_kv_usage, plot_latency_cdfs
    from ..schedulers.registry import create_scheduler, scheduler_info, scheduler_names
    from .run_options import base_config, run_configs
    from .runs import (check_out_dir, check_out_file, run_many, say_engine_unknown, split_names, summary_row,
                       table_columns)
    check_out_dir(args.out)
    check_out_file(args.report, "--report", "report.html")
    base = base_config(args)
    chosen = args.schedulers if args.schedulers is not None else base.get("scheduler") or "all"
    every = chosen == "all"
    if every:
        names = [n for n in scheduler_names() if not n.startswith("test-")
                 and (base.get("oracle") or not scheduler_info(n)["needs_oracle"])]
    else:
        names = split_names(chosen)
    # those that cannot run beside KV tiers, or a decode pool, are left out of "all" and said so; named, refused
    # before any run
    if base.get("kv_offload"):
        left = [n for n in names if not create_scheduler(n).runs_beside_tier_loads]
        names = leave_out(names, left, every, "--kv-offload", "plans that do not count the blocks a tier loads: "
                          "Scheduler.runs_beside_tier_loads")
    decode_scheduler = (base.get("decode_pool") or {}).get("scheduler")
    if base.get("disaggregate") and decode_scheduler is None:  # each runs its decode pool too, where it can
        left = [n for n in names if not create_scheduler(n).serves_transferred_kv]
        names = leave_out(names, left, every, "--disaggregate", "plans that hold no KV for a request a prefill "
                          "instance sent: Scheduler.serves_transferred_kv; --decode-pool scheduler=NAME runs such a "
                          "policy on the prefill pool alone")
    configs = run_configs(args, names)
    t0 = time.perf_counter()
    outcomes = run_many(configs, args.jobs, not args.no_progress)
    rows = [summary_row(cfg, res, summ) for cfg, (res, summ) in zip(configs, outcomes)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_table(rows, out / "results.csv", out / "results.json")
    labelled = {cfg.scheduler: res for cfg, (res, _) in zip(configs, outcomes)}
    figures = [plot_latency_cdfs(labelled, out / "latency_cdf.png"), plot_kv_usage(labelled, out / "kv_usage.png")]
    report = write_compare_report(args.report or out / "report.html", rows, configs, figures)
    cfg0 = configs[0]
    print(f"{cfg0.model} on {cfg0.gpu}, workload {cfg0.trace or cfg0.workload}, "
          f"rate {cfg0.rate if cfg0.rate else 'as traced'} req/s, seed {cfg0.seed}")
    print(format_table(rows, table_columns(rows)))
    print(f"wrote {out}/results.csv, results.json, latency_cdf.png, kv_usage.png and {report} "
          f"({time.perf_counter() - t0:.1f} s)")
    say_engine_unknown("compare", args)
    return 0


def leave_out(names: list[str], left: list[str], every: bool, option: str, why: str) -> list[str]:
    """``names`` without ``left``, the schedulers that cannot run with ``option``: said on stderr when the list was
    every scheduler, refused (before any run) when the user named them."""
    if not left:
        return names
    if not every:
        raise ValueError(f"--schedulers {','.join(left)}: {'they cannot' if len(left) > 1 else 'it cannot'} run with "
                         f"{option} ({why}); drop {'them' if len(left) > 1 else 'it'}")
    print(f"not run with {option}: {', '.join(left)} ({why})", file=sys.stderr)
    return [n for n in names if n not in left]

"""``llmsched simulate``: one scheduler on one workload; its table row and, with --out, its files."""
from __future__ import annotations

from pathlib import Path

from .run_options import add_run_options


def add(sub) -> None:
    s = sub.add_parser("simulate", help="one scheduler on one workload",
                       description="Simulate one scheduler and write summary.json, requests.csv, steps.csv "
                                   "and meta.json (and with --plots, latency_cdf.png and kv_usage.png, and "
                                   "timeline.png for a run with a timeline) to --out. A --trace with a real run's "
                                   "meta.json beside it (or that run's folder: its log as validate-serving "
                                   "picks it) simulates that run's machine: its model, GPU, limits, KV cache and "
                                   "vLLM's scheduler, wherever no option or --config key gives one (said on "
                                   "stderr, kept in summary.json).")
    s.add_argument("--scheduler", help="scheduler name (see `llmsched presets`); default sarathi")
    s.add_argument("--out", default=None, help="output folder (default: print only)")
    s.add_argument("--plots", action="store_true",
                   help="also draw latency_cdf.png and kv_usage.png into --out (matplotlib; about 1.5 s), and "
                        "timeline.png when the run keeps a timeline (--rate-schedule, --timeline-window); a streamed "
                        "run draws only timeline.png")
    s.add_argument("--stream", action="store_true",
                   help="write requests.csv and steps.csv while the run goes and keep only running totals, so "
                        "memory stays flat however many requests; implies --sketch: the files are those of a "
                        "--sketch run (no gap array is kept, so requests.csv's gap_offset is 0), the summary's "
                        "TTFT, TPOT and E2E quantiles come from sketches (1%% error); --plots draws only the "
                        "timeline; no --warmup or "
                        "--cooldown; latencies at the engine (--latency-boundary engine) unless the client boundary is "
                        "asked for, which a streamed run cannot price: its output path needs every step's batch")
    add_run_options(s, trace_meta="run")
    s.set_defaults(func=simulate)


def simulate(args) -> int:
    from ..experiment import keeps_timeline, run
    from ..metrics.summary import summarize
    from ..metrics.writers import format_table, write_run
    from .run_options import base_config, config_with_origins, run_configs
    from .runs import (check_out_dir, print_length_cap, say_engine_unknown, schedulers_label, summary_row,
                       table_columns, warn_rejections)
    check_out_dir(args.out)
    base = base_config(args)
    name = args.scheduler if args.scheduler is not None else base.get("scheduler", "sarathi")
    cfg = run_configs(args, [name])[0]
    if args.stream:
        from ..metrics.stream_summary import check_stream_window
        check_stream_window(cfg.warmup, cfg.cooldown)
        if args.plots and not keeps_timeline(cfg):
            raise ValueError("--plots with --stream draws only timeline.png (a streamed run keeps no rows for the "
                             "others), and this run keeps no timeline: add --rate-schedule or --timeline-window, or "
                             "drop --stream")
        cfg = cfg.with_values(keep_gaps=False)
        if "latency_boundary" not in config_with_origins(args)[1]:
            cfg = cfg.with_values(latency_boundary="engine")  # the default boundary, where a stream can keep it
    result = run(cfg, progress=not args.no_progress, stream=args.stream, out=args.out)
    summ = summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)
    row = {**summary_row(cfg, result, summ), "scheduler": schedulers_label(cfg, result)}
    print(format_table([row], table_columns([row])))
    print_length_cap(summ)
    warn_rejections("simulate", summ)
    say_engine_unknown("simulate", args)
    if args.trace_engine_unknown:
        summ["run"]["trace_engine_unknown"] = args.trace_engine_unknown
    if args.trace_meta_found is not None:  # what came from the run the trace was captured from, and its KV cache
        summ["run"]["trace_meta"] = {**args.trace_meta_found.record(), "kv_blocks": result.meta["kv_blocks"],
                                     "kv_cache": result.meta["kv_cache"].get("source")}
    if args.out:
        out = Path(args.out)
        write_run(result, summ, out)
        plots = ""
        if args.plots and not args.stream:  # a streamed run keeps no rows to draw these from
            from ..report.run_figures import plot_kv_usage, plot_latency_cdfs
            plot_latency_cdfs({name: result}, out / "latency_cdf.png")
            plot_kv_usage({name: result}, out / "kv_usage.png")
            plots = ", latency_cdf.png, kv_usage.png"
        if args.plots and summ.get("timeline"):
            from ..report.timeline_figure import plot_timeline
            plot_timeline(summ["timeline"], out / "timeline.png")
            plots += ", timeline.png"
        print(f"wrote {out}/summary.json, requests.csv, steps.csv, meta.json{plots}")
    elif args.plots:
        raise ValueError("--plots draws into --out: give --out DIR")
    return 0

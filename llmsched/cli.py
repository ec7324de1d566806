"""The ``llmsched`` command: compare, simulate, sweep, presets."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .experiment import RunConfig

# Each command's own module is imported only when that command runs (see build_parser): importing them all is
# most of a short run's start-up.
ENGINE_COMMANDS = ("run", "profile", "fidelity", "make-model")  # a real vLLM engine: its threads are its own
SIMULATOR_COMMANDS = ("simulate", "compare", "sweep")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMAND_NAMES else None
    if command in SIMULATOR_COMMANDS and "numpy" not in sys.modules:
        # numpy's OpenBLAS starts a thread per core that spins after start-up and after each BLAS call: CPU time
        # (about 0.1 s a run) for nothing in a simulator of small arrays. Commands that fit or solve (capacity,
        # plan, theory, the real engine) keep it; a user's own setting wins.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser(command)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse has printed its one-line error (or --help)
        return e.code if isinstance(e.code, int) else 2
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"{prog(args)}: error: {one_line(e)}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"{prog(args)}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


def prog(args) -> str:
    sub = getattr(args, "subcommand", None)
    return f"llmsched {args.command}" + (f" {sub}" if sub else "")


def one_line(e: Exception) -> str:
    return " ".join(str(e).split())


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: the usage is in --help."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see `{self.prog} --help`)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, or with ``command`` only that one's: parsing a command's arguments needs no
    other, and the others would import their packages (capacity search, plans, the papers' theory, vLLM)."""
    p = Parser(prog="llmsched", description=(
        "Scheduling for LLM inference: simulate and compare batch schedulers on real model/GPU pairs and "
        "real traces. Times are printed in milliseconds."))
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for names, add in COMMANDS:
        if command is None or command in names:
            add(sub)
    return p


def add_compare_command(sub) -> None:
    from .options import add_run_options
    c = sub.add_parser("compare", help="every registered scheduler (or --schedulers) on the same workload",
                       description="Run several schedulers on the same workload and print a table; writes "
                                   "results.json/.csv, latency/KV plots and report.html to --out. With no options: "
                                   "Llama-3-8B on an A100, ShareGPT lengths, Poisson arrivals near the baselines' "
                                   "capacity.")
    c.add_argument("--schedulers", help="comma-separated names, or 'all' (default: the config file's scheduler, "
                                        "else all)")
    c.add_argument("--out", default="compare", help="output folder (default: compare/)")
    c.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel runs (default 2)")
    c.add_argument("--report", metavar="FILE.html",
                   help="the report page: settings, a sortable table, the figures, a section per scheduler family; "
                        "one self-contained file (default: report.html in --out)")
    add_run_options(c)
    c.set_defaults(func=cmd_compare)


def add_simulate_command(sub) -> None:
    from .options import add_run_options
    s = sub.add_parser("simulate", help="one scheduler on one workload",
                       description="Simulate one scheduler and write summary.json, requests.csv, steps.csv "
                                   "and meta.json (and with --plots, latency_cdf.png and kv_usage.png) to --out.")
    s.add_argument("--scheduler", help="scheduler name (see `llmsched presets`); default sarathi")
    s.add_argument("--out", default=None, help="output folder (default: print only)")
    s.add_argument("--plots", action="store_true",
                   help="also draw latency_cdf.png and kv_usage.png into --out (matplotlib; about 1.5 s)")
    s.add_argument("--stream", action="store_true",
                   help="write requests.csv and steps.csv while the run goes and keep only running totals, so "
                        "memory stays flat however many requests; the files are the same, the summary's TTFT, "
                        "TPOT and E2E quantiles come from sketches (1%% error); implies --sketch; no --plots, "
                        "no --warmup or --cooldown")
    add_run_options(s)
    s.set_defaults(func=cmd_simulate)


def add_sweep_command(sub) -> None:
    from .options import add_run_options
    w = sub.add_parser("sweep", help="schedulers over a range of arrival rates",
                       description="Run each scheduler at each rate; print a table and write sweep.csv/.json "
                                   "and sweep.png to --out.")
    w.add_argument("--schedulers", help="comma-separated names (default: the config file's scheduler, else "
                                        "vllm,sarathi)")
    w.add_argument("--rates", required=True, help="START:STOP:STEP (inclusive), or a comma-separated list")
    w.add_argument("--out", default="sweep", help="output folder (default: sweep/)")
    w.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel runs (default 2)")
    add_run_options(w)
    w.set_defaults(func=cmd_sweep)


def add_presets_command(sub) -> None:
    r = sub.add_parser("presets", help="list models, GPUs, workloads, schedulers, routers and their sources")
    r.add_argument("--json", action="store_true", help="print as JSON")
    r.set_defaults(func=cmd_presets)


def _package_commands(package: str, title: str, help_text: str):
    def add(sub):
        from .commands import add_package_commands
        add_package_commands(sub, package, title, help_text)
    return add


def _command_of(module: str, function: str):
    """``module.function(sub)``, the module imported when called."""
    return lambda sub: getattr(importlib.import_module(module, __package__), function)(sub)


# (the names a function adds, the function), in the order `llmsched --help` lists them
COMMANDS = (
    (("compare",), add_compare_command),
    (("simulate",), add_simulate_command),
    (("sweep",), add_sweep_command),
    (("theory",), _package_commands("llmsched.theory", "theory", "the papers' theory: capacity bounds, fluid "
                                    "optima, renewal throughput, optimal schedules")),
    (("reproduce",), _package_commands("llmsched.reproduce", "reproduce", "reproduce a paper's headline "
                                       "experiment and write its figures and tables")),
    (("capacity",), _command_of(".capacity.command", "add_capacity_command")),
    (("plan",), _command_of(".plan.command", "add_plan_command")),
    (("tune",), _command_of(".tune.command", "add_tune_command")),
    (("validate-timing",), _command_of(".validate.command", "add_command")),
    (ENGINE_COMMANDS, _command_of(".vllm.commands", "add_vllm_commands")),  # the real engine (llmsched/vllm)
    (("presets",), add_presets_command),
)
COMMAND_NAMES = {name for names, _ in COMMANDS for name in names}


def _run_one(cfg: RunConfig):
    from .experiment import run
    from .metrics.summary import summarize
    result = run(cfg)
    return result, summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)


def _run_many(configs: list[RunConfig], jobs: int, progress: bool):
    from concurrent.futures import ProcessPoolExecutor

    from tqdm import tqdm
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    bar = tqdm(total=len(configs), unit="run", desc="runs", disable=not progress, leave=False)
    results = []
    if jobs == 1 or len(configs) == 1:
        for cfg in configs:
            results.append(_run_one(cfg))
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_run_one, cfg) for cfg in configs]
            for f in futures:
                results.append(f.result())
                bar.update()
    bar.close()
    return results


# `llmsched compare` with no options: ShareGPT lengths on Llama-3-8B/A100 at 2.8 req/s, just under where vllm,
# sarathi and vllm-chunked saturate (~2.8-2.9 req/s, measured with `llmsched sweep`), with seed 000's
# paid (5%, TBT 0.1 s) and free (TBT 0.5 s) tiers so goodput separates the policies.
COMPARE_DEFAULTS = {"rate": 2.8, "tiers": "paid:tbt=0.1:share=0.05,free:tbt=0.5"}


def cmd_compare(args) -> int:
    from .metrics.writers import format_table, write_table
    from .options import TABLE_COLUMNS, base_config, run_configs
    from .report.compare_page import write_compare_report
    from .report.run_figures import plot_kv_usage, plot_latency_cdfs
    from .schedulers.registry import scheduler_info, scheduler_names
    base = base_config(args)
    chosen = args.schedulers or base.get("scheduler") or "all"
    if chosen == "all":
        names = [n for n in scheduler_names() if not n.startswith("test-")
                 and (base.get("oracle") or not scheduler_info(n)["needs_oracle"])]
    else:
        names = _split(chosen)
    configs = run_configs(args, names, defaults=COMPARE_DEFAULTS)
    t0 = time.perf_counter()
    outcomes = _run_many(configs, args.jobs, not args.no_progress)
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
    print(format_table(rows, TABLE_COLUMNS))
    print(f"wrote {out}/results.csv, results.json, latency_cdf.png, kv_usage.png and {report} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0


def cmd_simulate(args) -> int:
    from .experiment import run
    from .metrics.summary import summarize
    from .metrics.writers import format_table, write_run
    from .options import TABLE_COLUMNS, base_config, run_configs
    base = base_config(args)
    name = args.scheduler or base.get("scheduler", "sarathi")
    cfg = run_configs(args, [name])[0]
    if args.stream:
        from .metrics.stream_summary import check_stream_window
        if args.plots:
            raise ValueError("--plots draws from rows a streamed run does not keep: drop --plots or --stream")
        check_stream_window(cfg.warmup, cfg.cooldown)
        cfg = dataclasses.replace(cfg, keep_gaps=False)
    result = run(cfg, progress=not args.no_progress, stream=args.stream, out=args.out)
    summ = summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)
    print(format_table([summary_row(cfg, result, summ)], TABLE_COLUMNS))
    if args.out:
        out = Path(args.out)
        write_run(result, summ, out)
        plots = ""
        if args.plots:
            from .report.run_figures import plot_kv_usage, plot_latency_cdfs
            plot_latency_cdfs({name: result}, out / "latency_cdf.png")
            plot_kv_usage({name: result}, out / "kv_usage.png")
            plots = ", latency_cdf.png, kv_usage.png"
        print(f"wrote {out}/summary.json, requests.csv, steps.csv, meta.json{plots}")
    elif args.plots:
        raise ValueError("--plots draws into --out: give --out DIR")
    return 0


def cmd_sweep(args) -> int:
    from .report.run_figures import plot_sweep
    from .metrics.writers import format_table, write_table
    from .options import TABLE_COLUMNS, base_config, run_configs
    base = base_config(args)
    names = _split(args.schedulers or base.get("scheduler") or "vllm,sarathi")
    for key in ("rate", "concurrency", "rate_schedule"):
        if base.get(key) is not None:
            raise ValueError(f"--{key.replace('_', '-')} does not apply to `llmsched sweep`, which runs each of "
                             f"--rates; remove it")
    rates = parse_rates(args.rates)
    configs = run_configs(args, names, rates)
    outcomes = _run_many(configs, args.jobs, not args.no_progress)
    rows = [summary_row(cfg, res, summ) for cfg, (res, summ) in zip(configs, outcomes)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_table(rows, out / "sweep.csv", out / "sweep.json")
    plot_sweep(rows, x="rate", path=out / "sweep.png")
    print(format_table(rows, ["scheduler", "rate"] + TABLE_COLUMNS[1:]))
    print(f"wrote {out}/sweep.csv, sweep.json, sweep.png")
    return 0


def cmd_presets(args) -> int:
    from .presets import all_presets, format_presets
    data = all_presets()
    print(json.dumps(data, indent=2, default=str) if args.json else format_presets(data))
    return 0


MAX_RATES = 1000


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


def _split(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ValueError("no scheduler named")
    return names


def summary_row(cfg: RunConfig, result, summary: dict) -> dict:
    """One table row: the run's labels, its flat summary, and the simulator's own speed."""
    from .metrics.summary import summary_row as flat_row
    return flat_row(summary, scheduler=cfg.scheduler, rate=cfg.rate, wall_s=result.wall_time,
                    sim_steps_per_s=len(result.steps) / result.wall_time if result.wall_time else float("nan"))


if __name__ == "__main__":
    sys.exit(main())

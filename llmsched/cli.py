"""The ``llmsched`` command: compare, simulate, sweep, presets."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .commands import add_package_commands
from .vllm.commands import add_vllm_commands
from .experiment import RunConfig, load_config, run

RUN_OPTIONS = {
    # name: (type, help)
    "model": (str, "model preset (see `llmsched presets`), e.g. llama-3-8b"),
    "gpu": (str, "GPU preset, e.g. a100, h100"),
    "tp": (int, "tensor-parallel degree (overrides the model preset's)"),
    "batch_time": (str, "batch-time model: roofline, roofline-staircase, calibrated, linear"),
    "replicas": (int, "number of replicas behind the router"),
    "router": (str, "router for several replicas: random, round-robin, least-outstanding, least-load"),
    "workload": (str, "named length preset paired with --arrival at --rate (sharegpt, azure-conv, ...)"),
    "trace": (str, "replay a real trace file (Azure 2023 CSV, Vidur CSV); a bare name is looked up in "
                   "$LLMSCHED_DATA and ../shared/data/traces"),
    "rate": (float, "arrival rate in requests/s (for --trace: rescale its arrivals to this mean rate)"),
    "num_requests": (int, "number of requests (default 1000 for named workloads, the whole trace for --trace)"),
    "duration": (float, "generate arrivals for this many seconds instead of a request count"),
    "arrival": (str, "arrival process for named workloads: poisson, gamma (bursty, see --cv), constant"),
    "cv": (float, "coefficient of variation of gamma inter-arrival times (>1 is burstier than Poisson)"),
    "rate_schedule": (str, "piecewise-constant arrival rate 'START:RATE,...', e.g. '0:2,300:4' (with --workload)"),
    "concurrency": (int, "closed loop: keep this many requests in flight (a new one arrives as one finishes)"),
    "tiers": (str, "SLO tiers, e.g. 'paid:tbt=0.1:share=0.05,free:tbt=0.5' (keys ttft, tbt, tpot in seconds)"),
    "max_total_tokens": (int, "cap prompt+output tokens of generated requests"),
    "block_size": (int, "KV block size in tokens (vLLM's block_size)"),
    "max_num_seqs": (int, "most requests running at once (vLLM's max_num_seqs)"),
    "max_num_batched_tokens": (int, "most tokens in one step (vLLM's max_num_batched_tokens)"),
    "max_model_len": (int, "longest prompt+output served (default: the model's context length)"),
    "gpu_memory_utilization": (float, "fraction of GPU memory for weights+KV (vLLM's, default 0.9)"),
    "num_blocks": (int, "KV cache size in blocks (overrides the size derived from the GPU)"),
    "preemption_mode": (str, "recompute or swap"),
    "overflow": (str, "a plan that overflows the KV cache: error (default), evict-newest (newest admitted restart "
                      "from scratch, seed 003), evict-newest-recompute (they keep their tokens)"),
    "swap_space_gb": (float, "host swap space per replica in GiB (for --preemption-mode swap)"),
    "horizon": (float, "stop simulating at this time (s); requests in flight end unfinished"),
    "warmup": (float, "exclude requests arriving in the first WARMUP seconds from the summary"),
    "cooldown": (float, "exclude requests arriving in the last COOLDOWN seconds from the summary"),
    "seed": (int, "random seed: same seed, same result"),
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"llmsched {args.command}: error: {e}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llmsched", description=(
        "Scheduling for LLM inference: simulate and compare batch schedulers on real model/GPU pairs and "
        "real traces. Times are printed in milliseconds."))
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("compare", help="every registered scheduler (or --schedulers) on the same workload",
                       description="Run several schedulers on the same workload and print a table; writes "
                                   "results.json/.csv and latency/KV plots to --out. With no options: Llama-3-8B "
                                   "on an A100, ShareGPT lengths, Poisson arrivals near the baselines' capacity.")
    c.add_argument("--schedulers", default="all", help="comma-separated names, or 'all' (default)")
    c.add_argument("--out", default="compare", help="output folder (default: compare/)")
    c.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel runs (default 2)")
    _add_run_options(c)
    c.set_defaults(func=cmd_compare)

    s = sub.add_parser("simulate", help="one scheduler on one workload",
                       description="Simulate one scheduler and write summary.json, requests.csv, steps.csv, "
                                   "meta.json and plots to --out.")
    s.add_argument("--scheduler", help="scheduler name (see `llmsched presets`); default sarathi")
    s.add_argument("--out", default=None, help="output folder (default: print only)")
    _add_run_options(s)
    s.set_defaults(func=cmd_simulate)

    w = sub.add_parser("sweep", help="schedulers over a range of arrival rates",
                       description="Run each scheduler at each rate; print a table and write sweep.csv/.json "
                                   "and sweep.png to --out.")
    w.add_argument("--schedulers", default="vllm,sarathi", help="comma-separated names (default vllm,sarathi)")
    w.add_argument("--rates", required=True, help="START:STOP:STEP (inclusive), or a comma-separated list")
    w.add_argument("--out", default="sweep", help="output folder (default: sweep/)")
    w.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="parallel runs (default 2)")
    _add_run_options(w)
    w.set_defaults(func=cmd_sweep)

    add_package_commands(sub, "llmsched.theory", "theory",
                         "the papers' theory: capacity bounds, fluid optima, renewal throughput, optimal schedules")
    add_package_commands(sub, "llmsched.reproduce", "reproduce",
                         "reproduce a paper's headline experiment and write its figures and tables")
    add_vllm_commands(sub)  # run, profile, fidelity, make-model (real engine: llmsched/vllm/commands.py)

    r = sub.add_parser("presets", help="list models, GPUs, workloads, schedulers, routers and their sources")
    r.add_argument("--json", action="store_true", help="print as JSON")
    r.set_defaults(func=cmd_presets)
    return p


def _add_run_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run options (also settable in --config; CLI wins)")
    g.add_argument("--config", help="TOML or YAML file whose keys are these options (with _ or -)")
    for name, (typ, help_text) in RUN_OPTIONS.items():
        g.add_argument("--" + name.replace("_", "-"), dest=name, type=typ, default=None, help=help_text)
    g.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="scheduler parameter (repeatable); in compare/sweep use SCHEDULER.KEY=VALUE")
    g.add_argument("--bt-param", action="append", default=[], metavar="KEY=VALUE",
                   help="batch-time model parameter (repeatable)")
    g.add_argument("--oracle", action="store_true", default=None,
                   help="let schedulers read true output lengths (off by default)")
    g.add_argument("--sketch", action="store_true",
                   help="keep TBT samples only as quantile sketches (for runs of millions of requests)")
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _base_config(args) -> dict:
    data = load_config(args.config) if args.config else {}
    for name in RUN_OPTIONS:
        v = getattr(args, name)
        if v is not None:
            data[name] = v
    if args.oracle:
        data["oracle"] = True
    if args.sketch:
        data["keep_gaps"] = False
    if args.bt_param:
        data["batch_time_params"] = {**data.get("batch_time_params", {}), **_parse_params(args.bt_param)}
    if data.get("trace") and "rate" not in data:
        data["rate"] = None  # replay the trace at its own rate
    return data


def _parse_params(items: list[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--param {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        out[key.strip().replace("-", "_")] = _parse_value(value.strip())
    return out


def _parse_value(v: str):
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def _scheduler_params(args, names: list[str]) -> dict[str, dict]:
    """Split ``SCHEDULER.KEY=VALUE`` params by scheduler (plain KEY=VALUE when one scheduler)."""
    per = {n: {} for n in names}
    for key, value in _parse_params(args.param).items():
        if "." in key:
            name, key = key.split(".", 1)
            if name not in per:
                raise ValueError(f"--param {name}.{key}: {name!r} is not among the schedulers of this run")
            per[name][key] = value
        elif len(names) == 1:
            per[names[0]][key] = value
        else:
            raise ValueError(f"--param {key}: with several schedulers write SCHEDULER.{key}=VALUE")
    return per


def _configs(args, names: list[str], rates=None, defaults=None) -> list[RunConfig]:
    from .schedulers.registry import scheduler_info
    base = _base_config(args)
    if not base.get("trace") and not base.get("concurrency"):
        base = {**(defaults or {}), **base}
    params = _scheduler_params(args, names)
    configs = []
    for name in names:
        scheduler_info(name)  # unknown names fail here, before any run starts
        for rate in rates or [None]:
            data = {**base, "scheduler": name,
                    "scheduler_params": {**base.get("scheduler_params", {}), **params[name]}}
            if rate is not None:
                data["rate"] = rate
            configs.append(RunConfig.from_dict(data, origin="run options"))
    return configs


def _run_one(cfg: RunConfig):
    from .metrics.summary import summarize
    result = run(cfg)
    return result, summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)


def _run_many(configs: list[RunConfig], jobs: int, progress: bool):
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
    from .metrics.plots import plot_kv_usage, plot_latency_cdfs
    from .metrics.writers import format_table, write_table
    from .schedulers.registry import scheduler_info, scheduler_names
    if args.schedulers == "all":
        oracle = bool(args.oracle or (args.config and load_config(args.config).get("oracle")))
        names = [n for n in scheduler_names() if not n.startswith("test-")
                 and (oracle or not scheduler_info(n)["needs_oracle"])]
    else:
        names = _split(args.schedulers)
    configs = _configs(args, names, defaults=COMPARE_DEFAULTS)
    t0 = time.perf_counter()
    outcomes = _run_many(configs, args.jobs, not args.no_progress)
    rows = [summary_row(cfg, res, summ) for cfg, (res, summ) in zip(configs, outcomes)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_table(rows, out / "results.csv", out / "results.json")
    labelled = {cfg.scheduler: res for cfg, (res, _) in zip(configs, outcomes)}
    plot_latency_cdfs(labelled, out / "latency_cdf.png")
    plot_kv_usage(labelled, out / "kv_usage.png")
    cfg0 = configs[0]
    print(f"{cfg0.model} on {cfg0.gpu}, workload {cfg0.trace or cfg0.workload}, "
          f"rate {cfg0.rate if cfg0.rate else 'as traced'} req/s, seed {cfg0.seed}")
    print(format_table(rows, TABLE_COLUMNS))
    print(f"wrote {out}/results.csv, results.json, latency_cdf.png, kv_usage.png "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0


def cmd_simulate(args) -> int:
    from .metrics.plots import plot_kv_usage, plot_latency_cdfs
    from .metrics.summary import summarize
    from .metrics.writers import format_table, write_run
    base = _base_config(args)
    name = args.scheduler or base.get("scheduler", "sarathi")
    cfg = _configs(args, [name])[0]
    result = run(cfg, progress=not args.no_progress)
    summ = summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)
    print(format_table([summary_row(cfg, result, summ)], TABLE_COLUMNS))
    if args.out:
        out = Path(args.out)
        write_run(result, summ, out)
        plot_latency_cdfs({name: result}, out / "latency_cdf.png")
        plot_kv_usage({name: result}, out / "kv_usage.png")
        print(f"wrote {out}/summary.json, requests.csv, steps.csv, meta.json, latency_cdf.png, kv_usage.png")
    return 0


def cmd_sweep(args) -> int:
    from .metrics.plots import plot_sweep
    from .metrics.writers import format_table, write_table
    names = _split(args.schedulers)
    rates = parse_rates(args.rates)
    configs = _configs(args, names, rates)
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


def parse_rates(text: str) -> list[float]:
    try:
        if ":" in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if step <= 0 or stop < start:
                raise ValueError
            n = int(round((stop - start) / step)) + 1
            rates = [round(start + i * step, 10) for i in range(n) if start + i * step <= stop + 1e-9]
        else:
            rates = [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--rates {text!r}: use START:STOP:STEP with STEP > 0 (e.g. 1:8:1) or a list "
                         f"like 1,2,4") from None
    if not rates or any(r <= 0 for r in rates):
        raise ValueError(f"--rates {text!r}: rates must be positive")
    return rates


def _split(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise ValueError("no scheduler named")
    return names


TABLE_COLUMNS = ["scheduler", "finished", "rejected", "ttft_p50", "ttft_p99", "tbt_p99", "tpot_p50", "e2e_p50",
                 "throughput_rps", "output_tps", "goodput_rps", "slo_attainment", "preemptions", "wall_s"]


def summary_row(cfg: RunConfig, result, summary: dict) -> dict:
    """One table row: the run's labels, its flat summary, and the simulator's own speed."""
    from .metrics.summary import summary_row as flat_row
    return flat_row(summary, scheduler=cfg.scheduler, rate=cfg.rate, wall_s=result.wall_time,
                    sim_steps_per_s=len(result.steps) / result.wall_time if result.wall_time else float("nan"))


if __name__ == "__main__":
    sys.exit(main())

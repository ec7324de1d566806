"""The run options every command takes the same way: the CLI's compare/simulate/sweep and the vLLM commands.

One place defines the options (RUN_OPTIONS), how a --config file and the CLI merge (CLI wins), how
``--param KEY=VALUE`` is parsed and split by scheduler, and how that becomes RunConfigs.
"""
from __future__ import annotations

import argparse

from .config_fields import API, Origin, check_combination, check_field, conflicts_with
from .experiment import RunConfig, read_run_config

RUN_OPTIONS = {
    # name: (type, help)
    "model": (str, "model preset (see `llmsched presets`), e.g. llama-3-8b"),
    "gpu": (str, "GPU preset, e.g. a100, h100"),
    "tp": (int, "tensor-parallel degree (overrides the model preset's)"),
    "batch_time": (str, "batch-time model: roofline, roofline-staircase, calibrated, engine, linear"),
    "replicas": (int, "number of replicas behind the router"),
    "router": (str, "router for several replicas: random, round-robin, least-outstanding, least-load"),
    "workload": (str, "named length preset paired with --arrival at --rate (sharegpt, azure-conv, ...)"),
    "lengths": (str, "your own length file (CSV with num_prefill_tokens,num_decode_tokens or question_length,"
                     "answer_length; or any trace, its arrivals unused) as the length distribution, with --rate"),
    "trace": (str, "replay a real trace file with arrival times (Azure 2023 CSV, Vidur CSV); a bare name is looked "
                   "up in $LLMSCHED_DATA and ../shared/data/traces (length-only files go to --lengths)"),
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

TABLE_COLUMNS = ["scheduler", "finished", "rejected", "ttft_p50", "ttft_p99", "tbt_p99", "tpot_p50", "e2e_p50",
                 "throughput_rps", "output_tps", "goodput_rps", "slo_attainment", "preemptions", "wall_s"]


def add_run_options(p: argparse.ArgumentParser, exclude=()) -> None:
    """The run options on ``p``, except ``exclude`` (options that do not apply to the command: a config file
    that sets one of them is an error too)."""
    unknown = sorted(set(exclude) - set(RUN_OPTIONS))
    if unknown:
        raise ValueError(f"add_run_options: no run option(s) {', '.join(unknown)}")
    g = p.add_argument_group("run options (also settable in --config; CLI wins)")
    g.add_argument("--config", help="TOML or YAML file whose keys are these options (with _ or -)")
    for name, (typ, help_text) in RUN_OPTIONS.items():
        if name not in exclude:
            g.add_argument("--" + name.replace("_", "-"), dest=name, type=typ, default=None, help=help_text)
    g.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="scheduler parameter (repeatable); in compare/sweep use SCHEDULER.KEY=VALUE")
    g.add_argument("--bt-param", action="append", default=[], metavar="KEY=VALUE",
                   help="batch-time model parameter (repeatable)")
    g.add_argument("--tuned", "--params-file", dest="tuned", action="append", default=[], metavar="FILE",
                   help="a best.json from `llmsched tune`: its scheduler's tuned parameters and run fields apply to "
                        "that scheduler's runs (repeatable, one file per scheduler; --param and run options given "
                        "here win)")
    g.add_argument("--oracle", action="store_true", default=None,
                   help="let schedulers read true output lengths (off by default)")
    g.add_argument("--sketch", action="store_true",
                   help="keep TBT samples only as quantile sketches (for runs of millions of requests)")
    g.add_argument("--no-fast-forward", dest="no_fast_forward", action="store_true",
                   help="step every decode-only step through the policy instead of fast-forwarding runs of them "
                        "(the same results, slower; for checking)")
    g.add_argument("--no-lanes", dest="no_lanes", action="store_true",
                   help="run every replica in the one event loop instead of one at a time where routing and "
                        "source allow it (the same rows; rows tied across replicas in event order, not by replica)")
    g.add_argument("--check-invariants", action="store_true",
                   help="check the KV and decode-group accounting of every replica after every step (slow; the "
                        "tests run with it)")
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(excluded_run_options=tuple(exclude))


CLI = Origin("cli")


def base_config(args) -> dict:
    """The --config file's keys overridden by the options given on the command line, each checked."""
    return config_with_origins(args)[0]


def config_with_origins(args) -> tuple[dict, dict[str, Origin]]:
    """``base_config`` and, per key, where it was written (for errors that name the option or file and line)."""
    data, origins = {}, {}
    if args.config:
        data, file_origin = read_run_config(args.config)
        origins = dict.fromkeys(data, file_origin)
    command = getattr(args, "command", None) or "this command"
    for key in getattr(args, "excluded_run_options", ()):
        if key in data:
            raise ValueError(f"{origins[key].name(key)} does not apply to `llmsched {command}`; remove it")
    for name in RUN_OPTIONS:
        v = getattr(args, name, None)
        if v is not None:
            data[name] = check_field(name, v, CLI)
            origins[name] = CLI
    if args.oracle:
        data["oracle"] = True
        origins["oracle"] = CLI
    if args.sketch:
        data["keep_gaps"] = False
        origins["keep_gaps"] = CLI
    if getattr(args, "no_fast_forward", False):
        data["fast_forward"] = False
        origins["fast_forward"] = CLI
    if getattr(args, "no_lanes", False):
        data["lanes"] = False
        origins["lanes"] = CLI
    if getattr(args, "check_invariants", False):
        data["check_invariants"] = True
        origins["check_invariants"] = CLI
    if args.bt_param:
        data["batch_time_params"] = {**data.get("batch_time_params", {}), **parse_params(args.bt_param, "--bt-param")}
        origins["batch_time_params"] = CLI
    if (data.get("trace") or data.get("concurrency")) and "rate" not in data:
        data["rate"] = None  # a trace replays at its own rate; a closed loop has none
    check_combination(data, lambda key: origins.get(key, API))
    return data, origins


def parse_params(items: list[str], option: str = "--param") -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{option} {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if not key:
            raise ValueError(f"{option} {item!r}: the KEY before '=' is empty; expected KEY=VALUE")
        out[key] = parse_value(value.strip())
    return out


def parse_value(v: str):
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


def scheduler_params(args, names: list[str], base: dict | None = None) -> dict[str, dict]:
    """Per scheduler, its parameters from the --config file's ``scheduler_params`` and from ``--param``.

    Both take the same forms: ``SCHEDULER.KEY=VALUE`` (or a ``[scheduler_params.SCHEDULER]`` table in the file)
    for one scheduler of several, plain ``KEY=VALUE`` when the run has one scheduler. CLI values win. A file's
    table for a scheduler that is not in this run is kept for runs that have it (one file serves every command).
    """
    from .schedulers.registry import scheduler_names
    if base is None:
        base = base_config(args)
    where = f"scheduler_params (in {args.config})" if args.config else "scheduler_params"
    per = {n: {} for n in names}
    for source, option in ((base.get("scheduler_params") or {}, where), (parse_params(args.param), "--param")):
        for key, value in source.items():
            if isinstance(value, dict) and key in per:
                per[key].update(value)
            elif isinstance(value, dict):
                if key not in scheduler_names():
                    raise ValueError(f"{option}: [{key}] is not a scheduler (see `llmsched presets`)")
                if option == "--param":
                    raise ValueError(f"{option}: [{key}] is not among the schedulers of this run "
                                     f"({', '.join(names)})")
                # a config file's table for another scheduler: it applies to runs of that scheduler
            elif "." in key:
                name, sub = key.split(".", 1)
                if name not in per:
                    raise ValueError(f"{option} {name}.{sub}: {name!r} is not among the schedulers of this run "
                                     f"({', '.join(names)})")
                per[name][sub] = value
            elif len(names) == 1:
                per[names[0]][key] = value
            else:
                raise ValueError(f"{option} {key}: with several schedulers write SCHEDULER.{key}=VALUE (in a "
                                 f"config file: a [scheduler_params.SCHEDULER] table)")
    return per


def run_configs(args, names: list[str], rates=None, defaults=None) -> list[RunConfig]:
    """One RunConfig per scheduler (and per rate): defaults < --config < CLI options.

    A default that does not apply to the run (the default rate of a trace replay or closed loop) is left out;
    the rest (e.g. compare's SLO tiers) applies to every kind of workload."""
    from .schedulers.registry import scheduler_info
    base, origins = config_with_origins(args)
    for key, value in (defaults or {}).items():
        if key not in base and not conflicts_with(key, base) and not (key == "rate" and base.get("trace")):
            base[key] = value
    params = scheduler_params(args, names, base)
    if "scheduler_params" in origins:
        origins["scheduler_params"] = origins["scheduler_params"] if not args.param else CLI
    elif args.param:
        origins["scheduler_params"] = CLI
    tuned = tuned_settings(args, names)
    configs = []
    for name in names:
        scheduler_info(name)  # unknown names fail here, before any run starts
        for rate in rates or [None]:
            data = {**base, "scheduler": name, "scheduler_params": params[name]}
            where = origins
            if name in tuned:
                data, where = with_tuned(data, origins, tuned[name])
            if rate is not None:
                data["rate"] = rate
            configs.append(RunConfig.from_dict(data, origin=where))
    return configs


def tuned_names(args) -> list[str]:
    """The schedulers of the --tuned files, in the order given (a command's default when none is named)."""
    from .tuned_file import read_tuned
    return list(dict.fromkeys(read_tuned(path)["scheduler"] for path in getattr(args, "tuned", None) or ()))


def tuned_settings(args, names: list[str]) -> dict[str, dict]:
    """Per scheduler of this run, its --tuned file's record; a file for a scheduler not in the run, or two files
    for one scheduler, is an error."""
    from .tuned_file import read_tuned
    out: dict[str, dict] = {}
    for path in getattr(args, "tuned", None) or ():
        record = read_tuned(path)
        name = record["scheduler"]
        if name not in names:
            raise ValueError(f"--tuned {path} is for scheduler {name!r}, which is not among this run's "
                             f"({', '.join(names)}); add it (--scheduler/--schedulers) or drop the file")
        if name in out:
            raise ValueError(f"--tuned: two files for scheduler {name!r} ({out[name]['path']}, {path}); give one")
        out[name] = record
    return out


def with_tuned(data: dict, origins: dict, record: dict) -> tuple[dict, dict]:
    """``data`` with the tuned record's scheduler parameters and run fields under what the user gave (on the command
    line or in --config): those win."""
    where = Origin.file(record["path"])
    data = {**data, "scheduler_params": {**record["scheduler_params"], **data["scheduler_params"]}}
    origins = dict(origins)
    for key, value in record["run"].items():
        if key in ("scheduler", "scheduler_params") or key in data:
            continue  # the user's own setting wins
        data[key] = value
        origins[key] = where
    if record["scheduler_params"] and "scheduler_params" not in origins:
        origins["scheduler_params"] = where
    return data, origins

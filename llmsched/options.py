"""The run options every command takes the same way: the CLI's compare/simulate/sweep and the vLLM commands.

One place defines the options (RUN_OPTIONS), how a --config file and the CLI merge (CLI wins), how
``--param KEY=VALUE`` is parsed and split by scheduler, and how that becomes RunConfigs.
"""
from __future__ import annotations

import argparse

from .experiment import RunConfig, load_config

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

TABLE_COLUMNS = ["scheduler", "finished", "rejected", "ttft_p50", "ttft_p99", "tbt_p99", "tpot_p50", "e2e_p50",
                 "throughput_rps", "output_tps", "goodput_rps", "slo_attainment", "preemptions", "wall_s"]


def add_run_options(p: argparse.ArgumentParser) -> None:
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


def base_config(args) -> dict:
    """The --config file's keys overridden by the options given on the command line."""
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
        data["batch_time_params"] = {**data.get("batch_time_params", {}), **parse_params(args.bt_param)}
    if data.get("trace") and "rate" not in data:
        data["rate"] = None  # replay the trace at its own rate
    return data


def parse_params(items: list[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--param {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        out[key.strip().replace("-", "_")] = parse_value(value.strip())
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


def scheduler_params(args, names: list[str]) -> dict[str, dict]:
    """Split ``SCHEDULER.KEY=VALUE`` params by scheduler (plain KEY=VALUE when one scheduler)."""
    per = {n: {} for n in names}
    for key, value in parse_params(args.param).items():
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


def run_configs(args, names: list[str], rates=None, defaults=None) -> list[RunConfig]:
    """One RunConfig per scheduler (and per rate): defaults < --config < CLI options."""
    from .schedulers.registry import scheduler_info
    base = base_config(args)
    if not base.get("trace") and not base.get("concurrency"):
        base = {**(defaults or {}), **base}
    params = scheduler_params(args, names)
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

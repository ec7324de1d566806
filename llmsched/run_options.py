"""The run options every command takes the same way (name, type, help) and the parsing of ``KEY=VALUE`` settings.

Below the command line so that a library composing or reading a run's options (a plan's "reproduce this point"
command, ``--vary`` values, the vLLM plug-in's ``LLMSCHED_PARAMS``) needs no import of the CLI.
"""
from __future__ import annotations

RUN_OPTIONS = {
    # name: (type, help)
    "model": (str, "model preset (see `llmsched presets`), e.g. llama-3-8b, or a Hugging Face config.json (or a "
                   "folder holding one)"),
    "gpu": (str, "GPU preset, e.g. a100, h100, rtx-pro-6000 (or a GPU spec file, as --gpu-spec)"),
    "gpu_spec": (str, "a GPU spec file (.toml/.json) of its datasheet figures, for a card without a preset"),
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

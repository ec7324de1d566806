"""One set of bounds for every number a user gives: rates, counts, lengths, durations, weights and sizes.

A number beyond these is a typo or a unit slip (1e-300, 1e30, bytes for GiB), not an experiment: the run would
never end, never start, run out of memory, or overflow after it ended. Each place a number enters checks it here
and refuses it in one line naming its source: the command line and config files (the run fields' declarations in
``run_config.py`` and ``engine/limits.py``), tenants, workload parameters, traces (CSV and JSONL), a model's
config.json and a GPU spec file. Each bound is set one or two orders of magnitude beyond the largest real value
named beside it, so that no real model, card, trace or experiment meets it.
"""
from __future__ import annotations

import math

# a run's arrivals
MIN_RATE = 1e-6  # requests/s: a mean gap of 11.6 days
MAX_REQUESTS = 100_000_000  # requests in one run, and the seats of a replica
MAX_SECONDS = 1e9  # seconds of arrivals, about 32 years of simulated time
# a request's length (prompt or output), in tokens: the longest context served is 10,485,760 (Llama 4 Scout)
MAX_TOKENS = 1 << 24
# a tenant's weight, its share in fair sharing relative to the others'
MIN_WEIGHT, MAX_WEIGHT = 1e-6, 1e6
# a linear batch-time model's coefficient given on the command line (seconds per step, per token, per context token,
# per prefill): a step's fixed cost is about 0.01 s, a token's 5e-5 s on the GPUs of the presets
MAX_STEP_COEFFICIENT = 10.0
# a replica's KV cache, in blocks (an H200's 141 GB holds about 65 thousand 16-token blocks of Llama-3-8B's KV,
# 128 KiB a token)
MAX_BLOCKS = 1 << 27

# a model's config.json: its sizes, each with the largest public value beside it
MODEL_SIZES = {
    "num_hidden_layers": 1024,  # Llama-3.1-405B: 126
    "hidden_size": 1 << 17,  # Llama-3.1-405B: 16,384
    "num_attention_heads": 1 << 12,  # Llama-3.1-405B: 128
    "num_key_value_heads": 1 << 12,
    "head_dim": 1 << 12,  # Gemma 2: 256
    "vocab_size": 1 << 24,  # Gemma 3: 262,144
    "max_position_embeddings": MAX_TOKENS,  # Llama 4 Scout: 10,485,760
    "num_local_experts": 1 << 16,  # Kimi K2: 384 routed experts
    "num_experts": 1 << 16,
    "n_routed_experts": 1 << 16,
}
MAX_MODEL_SIZE = 1 << 22  # any other size of a config.json (an FFN width: Llama-3.1-405B's 53,248)

# a GPU's datasheet figures (SI units), each range beyond the slowest and fastest cards llmsched knows
GPU_FIGURES = {
    "flops": (1e12, 1e17),  # dense BF16 FLOP/s: T4 65e12 ... B200 2.25e15
    "fp8_flops": (0.0, 1e17),  # 0: no FP8 tensor cores
    "mem_bw": (1e10, 1e14),  # bytes/s: RTX 4060 272e9 ... B200 8e12
    "mem_bytes": (1 << 30, 1 << 44),  # 1 GiB ... 16 TiB (B300: 288 GB)
    "mem_gib": (1, 1 << 14),
    "host_bw": (1e8, 1e13),  # PCIe 3.0 x1 ~1e9 ... PCIe 6.0 x16 256e9
    "interconnect_bw": (1e8, 1e14),  # NVLink 5: 1.8e12
    "sms": (1, 1 << 16),  # B200: 148
    "t_row": (1, 1 << 16),
    "t_col": (1, 1 << 16),
    "t_red": (1, 1 << 16),
    "link_latency": (0.0, 1e-2),  # seconds per ring hop: NCCL's 0.4-1 µs
    "allreduce_busbw": (0.0, 1e14),
    "copy_bw": (0.0, 1e14),  # measured device-to-device copy, bytes/s (0: not measured); at most mem_bw
}


def outside(value, low: float, high: float) -> bool:
    """True when ``value`` is not a finite number in [low, high]."""
    return not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and low <= value <= high)


def within(where: str, value, low: float, high: float, unit: str = "") -> None:
    """``value`` in [low, high], else a one-line ValueError naming ``where`` (the source and the field)."""
    if outside(value, low, high):
        unit = f" {unit}" if unit else ""
        raise ValueError(f"{where} = {value!r} must be a number from {low:g} to {high:g}{unit}: a value beyond is "
                         f"a typo or a unit slip, not a setting")

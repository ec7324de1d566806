"""KV-cache capacity of a model on a GPU, the way vLLM sizes its block pool.

vLLM gives the KV cache whatever is left of ``gpu_memory_utilization`` × GPU memory once the weights and the
peak activations of a profiling step are in place (Bari et al. §1.7 [R]); every GPU of a tensor-parallel
group holds its shard of the weights and of every token's KV.
"""
from __future__ import annotations

from ..engine.limits import MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS
from .gpus import GiB, GPUSpec, gpu as _gpu
from .models import ModelSpec, model as _model

# CUDA context, cuBLAS/attention workspaces, CUDA graphs and the allocator's slack: vLLM's "non-torch"
# memory is typically 0.3–1 GiB per GPU; we keep a round 1 GiB.
RUNTIME_RESERVE_BYTES = 1 * GiB
DEFAULT_MAX_NUM_BATCHED_TOKENS = MAX_NUM_BATCHED_TOKENS.default  # the run's defaults (engine/limits.py)
DEFAULT_MAX_NUM_SEQS = MAX_NUM_SEQS.default


def kv_bytes_per_token(model: ModelSpec | str, per_gpu: bool = False) -> int:
    """K and V bytes of one token in every layer (whole model, or one GPU's shard)."""
    spec = _model(model)
    return spec.kv_bytes_per_token_per_gpu if per_gpu else spec.kv_bytes_per_token


def default_activation_reserve(model: ModelSpec | str, max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
                             max_num_seqs: int = DEFAULT_MAX_NUM_SEQS) -> int:
    """Per-GPU memory kept out of the KV pool: the runtime reserve plus the peak activations of a step of
    ``max_num_batched_tokens`` tokens (the MLP's gate/up output, its activation and a few hidden-state
    buffers, sharded by tp) and fp32 logits for ``max_num_seqs`` sampled rows. An estimate of what vLLM's
    profiling run measures."""
    spec = _model(model)
    per_token = (3 * spec.ffn // spec.tp + 6 * spec.hidden) * spec.dtype_bytes
    logits = max_num_seqs * (spec.vocab // spec.tp) * 4
    return RUNTIME_RESERVE_BYTES + max_num_batched_tokens * per_token + logits


def kv_capacity_tokens(model: ModelSpec | str, gpu: GPUSpec | str, gpu_memory_utilization: float = 0.9,
                       activation_reserve_bytes: int | None = None) -> int:
    """Tokens of KV cache that fit: per GPU, memory × utilisation − weight shard − reserve, divided by the
    per-GPU KV bytes of a token. ``activation_reserve_bytes`` defaults to :func:`default_activation_reserve`.

    Raises ValueError when the weights and the reserve leave no room, naming the fix (more tensor
    parallelism, a bigger GPU, or a higher utilisation).
    """
    spec, device = _model(model), _gpu(gpu)
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    reserve = default_activation_reserve(spec) if activation_reserve_bytes is None else activation_reserve_bytes
    if reserve < 0:
        raise ValueError(f"activation_reserve_bytes must be >= 0, got {reserve}")
    budget = device.mem_bytes * gpu_memory_utilization
    free = budget - spec.weight_bytes_per_gpu - reserve
    tokens = int(free // spec.kv_bytes_per_token_per_gpu) if free > 0 else 0
    if tokens <= 0:
        need_tp = _smallest_tp_that_fits(spec, device, gpu_memory_utilization, reserve)
        hint = f"use tensor parallelism (model '{spec.base_name}-tp{need_tp}')" if need_tp else \
            "use a GPU with more memory"
        raise ValueError(
            f"{spec.name} does not fit on {device.name}: {spec.weight_bytes_per_gpu / GiB:.1f} GiB of weights "
            f"per GPU (tp={spec.tp}) + {reserve / GiB:.1f} GiB reserve > {gpu_memory_utilization:g} × "
            f"{device.mem_bytes / GiB:.0f} GiB; {hint}")
    return tokens


def kv_capacity_blocks(model: ModelSpec | str, gpu: GPUSpec | str, gpu_memory_utilization: float = 0.9,
                       activation_reserve_bytes: int | None = None, block_size: int = 16) -> int:
    """Whole KV blocks of ``block_size`` tokens that fit (vLLM's ``num_gpu_blocks``)."""
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    return kv_capacity_tokens(model, gpu, gpu_memory_utilization, activation_reserve_bytes) // block_size


def _smallest_tp_that_fits(spec: ModelSpec, device: GPUSpec, utilization: float, reserve: int) -> int | None:
    for tp in (2, 4, 8, 16):
        try:
            shard = spec.with_tp(tp)
        except ValueError:          # tp does not divide the heads
            continue
        if device.mem_bytes * utilization - shard.weight_bytes_per_gpu - reserve > shard.kv_bytes_per_token_per_gpu:
            return tp
    return None

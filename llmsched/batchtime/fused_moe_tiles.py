"""The rows vLLM's Triton fused-MoE kernel computes: each expert's tokens padded to the kernel's M tile.

vLLM runs the routed experts of a bf16 MoE layer as two Triton grouped GEMMs (``fused_moe_kernel``, gate/up then
down) over tokens sorted by expert (vllm/model_executor/layers/fused_moe/fused_moe.py, ``fused_experts_impl``;
``experts/triton_moe.py``, ``TritonExperts.apply``). ``moe_align_block_size`` (moe_align_block_size.py) sorts the
(token, expert) pairs by expert and pads **each expert's** rows up to a multiple of ``BLOCK_SIZE_M``; the kernel
launches one program per ``BLOCK_SIZE_M × BLOCK_SIZE_N`` tile of that padded list and computes the whole tile,
the padding rows masked on load and store but multiplied all the same (``fused_moe_kernel``: only tiles past
``num_tokens_post_padded`` exit early). So the GEMMs' FLOPs follow Σ_e ⌈n_e / BLOCK_SIZE_M⌉ · BLOCK_SIZE_M, not
Σ_e n_e. The tile is chosen by the step's token count M (``try_get_optimal_moe_config``, the tokens the layer
sees, gathered over DP ranks under expert parallelism); without a tuned config file for the (E, N, device) the
default is ``get_default_config``'s bf16 rule, BLOCK_SIZE_M = 16 / 32 / 64 / 128 for M ≤ 32 / ≤ 96 / ≤ 512 /
above (vLLM 0.32; the tuned H200 file for E = 128, N = 768 picks 16 up to M ≈ 192, then 32, 64 and 128 from
M ≈ 768: the same tiles where prompt tokens dominate).

Under uniform routing each expert's count n is Binomial(M, k/E) (a token picks k distinct experts), so an
expert's padded rows are BLOCK_SIZE_M · E[⌈n / BLOCK_SIZE_M⌉] = BLOCK_SIZE_M · Σ_{j ≥ 0} P(n > j·BLOCK_SIZE_M).
"""
from __future__ import annotations

import math
from functools import lru_cache


def default_block_m(tokens: int) -> int:
    """``get_default_config``'s BLOCK_SIZE_M for a bf16/fp16 (or per-tensor fp8) MoE layer of ``tokens`` tokens."""
    if tokens <= 32:
        return 16
    if tokens <= 96:
        return 32
    if tokens <= 512:
        return 64
    return 128


@lru_cache(maxsize=16384)
def padding_factor(tokens: int, experts: int, experts_per_token: int) -> float:
    """Rows the grouped GEMMs compute over the (token, expert) pairs they hold: E · BLOCK_SIZE_M ·
    E[⌈n / BLOCK_SIZE_M⌉] / (tokens · k), with n ~ Binomial(tokens, k/E) an expert's pairs (≥ 1).
    The same factor holds on every GPU of the MoE group (each holds E/G experts and 1/G of the pairs with
    expert parallelism; all E experts' pairs with a G-th of each expert's width without it)."""
    if tokens <= 0:
        return 1.0
    block = default_block_m(tokens)
    p = experts_per_token / experts
    mean = tokens * p
    if p >= 1:
        return block * math.ceil(tokens / block) / tokens
    sd = math.sqrt(mean * (1 - p))
    lo, hi = max(0, int(mean - 12 * sd) - 1), min(tokens, int(mean + 12 * sd) + 2)
    log_norm = math.lgamma(tokens + 1)
    lp, lq = math.log(p), math.log1p(-p)
    tiles = 0.0
    for n in range(lo, hi + 1):
        log_pmf = log_norm - math.lgamma(n + 1) - math.lgamma(tokens - n + 1) + n * lp + (tokens - n) * lq
        tiles += math.exp(log_pmf) * math.ceil(n / block)
    return experts * block * tiles / (tokens * experts_per_token)

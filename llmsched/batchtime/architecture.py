"""Roofline terms of the architectures beyond a dense grouped-query decoder: routed experts, latent attention,
sliding windows, and the communication of experts spread over GPUs.

The roofline (:mod:`.roofline`) keeps its dense formula for the layers' shared part (attention projections,
dense MLPs, shared experts, the router); this module adds what the shape of a mixture-of-experts or MLA model
changes, for one GPU of the MoE group (``tp · dp`` GPUs, :attr:`ModelSpec.moe_group`):

* **routed experts**, all MoE layers:
  ``smax(T_g·k·F_e / G / (P·e_c),  D(T_g)·W_e / G / (B·e_m) + T·A_e / (B·e_m))`` with ``T_g = T · dp`` tokens in the group (the DP ranks are assumed to carry batches of the same size: vLLM
  steps them together), ``k`` experts a token, ``F_e``/``W_e`` one expert's FLOPs per token and weight bytes,
  ``D(T_g) = E·(1 − (1 − k/E)^T_g)`` the distinct experts the group's tokens touch under uniform routing
  (:meth:`ModelSpec.expected_active_experts`), and ``A_e`` the grouped GEMMs' activation bytes a token. The
  FLOPs follow tokens × experts per token; the weights read follow the distinct experts, from ``k`` at one token
  to all ``E`` of them. Expert parallelism divides the experts among the G GPUs, tensor parallelism each
  expert's intermediate dimension; both divide FLOPs and weights by G.
* **the MoE block's kernels**: ``MOE_EXTRA_KERNELS`` more than a dense MLP's, each at the fixed cost a dense
  layer's kernel has (``layer_overhead`` / 9, the operators it was fitted on);
* **expert-parallel communication** with ``dp`` > 1: vLLM's default ``allgather_reducescatter`` backend gathers
  every DP rank's hidden states before each MoE layer and reduce-scatters the outputs after it, two ring
  collectives over the ``dp`` ranks: ``2 · ((dp−1) · T·h·bytes / link + latency + (dp−1)·hop)`` per MoE layer
  (where the GPU's ``collective_model`` is ``nccl``: NCCL's tuning model of an all-gather and a reduce-scatter
  of the ``dp·T·h·bytes`` gathered states, :mod:`llmsched.hardware.nccl_model`);
  ``dispatch_combine`` (DeepEP-style all-to-all) sends each token to its ``k`` experts and back:
  ``2 · (k · T·h·bytes · (G−1)/G / link + latency + hop)``.
* **MLA** (DeepSeek-V2/V3): decode attends in the latent space (vLLM's absorbed MLA): per cached token and layer
  it reads the ``kv_lora_rank + qk_rope_head_dim`` latent (every GPU holds it whole) and computes
  ``2·heads/tp·(2·kv_lora_rank + qk_rope_head_dim)`` FLOPs, so a decode costs the larger of the two. A prefill
  chunk decompresses the latent of its ``m + c`` tokens into per-head keys and values
  (``2·kv_lora_rank·heads/tp·(qk_nope + v_head_dim)`` FLOPs a token) and attends with ``head_dim``-wide keys and
  ``v_head_dim``-wide values (``ModelSpec.attention_pair_flops``).
* **sliding windows**: a sliding layer attends over at most ``sliding_window`` tokens, in decode and prefill.
"""
from __future__ import annotations

import math

from ..hardware.gpus import GPUSpec
from ..hardware.models import ModelSpec
from .fused_moe_tiles import padding_factor

MOE_ALL2ALL = ("allgather_reducescatter", "dispatch_combine")
# Kernels a MoE layer runs beyond a dense MLP's three (gate/up GEMM, activation, down GEMM) in vLLM's fused MoE
# (vllm/model_executor/layers/fused_moe): the router GEMM, topk_softmax, moe_align_block_size and the moe_sum
# that combines the k expert outputs. Each costs the fixed time a kernel of the dense layer costs: the fitted
# per-layer overhead (calibration.json) over the operators it was fitted on (profiled.LAYER_OPS).
MOE_EXTRA_KERNELS = 4
DENSE_LAYER_KERNELS = 9


class ArchitectureTerms:
    """Seconds of the architecture-specific work of one step on one GPU (see the module docstring)."""

    def __init__(self, model: ModelSpec, gpu: GPUSpec, *, compute_eff: float, mem_eff: float,
                 attn_compute_eff: float, decode_attn_eff: float, comm_eff: float, collective_latency: float,
                 hop_latency: float, sharpness: float, moe_all2all: str, layer_overhead: float,
                 moe_tile_padding: bool = True):
        if moe_all2all not in MOE_ALL2ALL:
            raise ValueError(f"moe_all2all must be one of {', '.join(MOE_ALL2ALL)}, got {moe_all2all!r}")
        m, g = model, gpu
        self.model, self.moe_all2all, self.p = m, moe_all2all, float(sharpness)
        tp, b, wb = m.tp, m.dtype_bytes, m.weight_dtype_bytes
        flops = g.gemm_flops(wb) * compute_eff
        bw = g.mem_bw * mem_eff
        self.moe = m.is_moe
        self.tile_padding = bool(moe_tile_padding)
        if self.moe:
            group, dp, k, f = m.moe_group, m.dp, m.experts_per_token, m.expert_ffn
            ep = m.expert_parallel
            self._dp = dp
            self._kernels = m.moe_layers * MOE_EXTRA_KERNELS * layer_overhead / DENSE_LAYER_KERNELS
            self._c = m.moe_layers * k * dp * 2 * m.expert_params / group / flops          # s per token
            self._w = m.moe_layers * m.expert_params * m.expert_weight_bytes / group / bw  # s per active expert
            # a (token, expert) pair reads its hidden state and writes its output (h each) and writes, then reads
            # the gate/up and activated intermediates (2f + f); the activation reads 2f and writes f, the
            # weighted combine reads h. Expert parallelism: G-th of the pairs, whole f; else every pair, f / G.
            width = f if ep else f / group
            pairs = k * dp / group if ep else k * dp
            self._a = m.moe_layers * pairs * (2 * m.hidden + 3 * width) * b / bw
            self._elem = m.moe_layers * pairs * (3 * width + m.hidden) * b / bw
            link = g.collective_bw(comm_eff)
            self._gather = g.nccl_collective("allgather", dp, comm_eff) if moe_all2all == "allgather_reducescatter" \
                else None
            self._scatter = g.nccl_collective("reducescatter", dp, comm_eff) if self._gather else None
            self._group_bytes = dp * m.hidden * b                  # the gathered hidden states, a token per rank
            if self._gather is not None:    # NCCL's model prices both collectives in experts()
                self._comm_const = self._comm_tok = 0.0
            elif dp > 1 and moe_all2all == "allgather_reducescatter":
                self._comm_const = m.moe_layers * 2 * (collective_latency + (dp - 1) * hop_latency)
                self._comm_tok = m.moe_layers * 2 * (dp - 1) * m.hidden * b / link
            elif group > 1 and ep and moe_all2all == "dispatch_combine":
                self._comm_const = m.moe_layers * 2 * (collective_latency + hop_latency)
                self._comm_tok = m.moe_layers * 2 * k * (group - 1) / group * m.hidden * b / link
            else:   # the TP all-reduce after the MoE layer is the roofline's own
                self._comm_const = self._comm_tok = 0.0
        self.mla = m.is_mla
        L = m.layers
        self.window, self.sliding = m.sliding_window, m.sliding_layers
        if self.mla:
            heads = m.heads / tp
            latent_bytes = m.kv_width * m.kv_dtype_bytes
            decode_flops = 2 * heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
            self.kv_decode = L * max(latent_bytes / (g.mem_bw * decode_attn_eff),
                                     decode_flops / (g.flops * attn_compute_eff))          # s per context token
            nope = m.head_dim - m.qk_rope_head_dim
            self._decompress = L * 2 * m.kv_lora_rank * heads * (nope + m.v_head_dim) / flops   # s per token
        self._pair = m.attention_pair_flops / tp / (g.flops * attn_compute_eff)      # s per pair and layer
        self._kv_read = m.kv_bytes_per_token_per_gpu / m.layers / bw                # s per token and layer

    # --- experts ------------------------------------------------------------------------------------------
    def experts(self, tokens: int) -> float:
        """The routed experts' time for a step of ``tokens`` tokens on this DP rank (0 for a dense model)."""
        if not self.moe or not tokens:
            return 0.0
        m = self.model
        group_tokens = tokens * self._dp
        active = m.expected_active_experts(group_tokens)
        a = tokens * self._c
        if self.tile_padding:
            a *= padding_factor(group_tokens, m.experts, m.experts_per_token)
        w = active * self._w + tokens * self._a
        p = self.p
        if p == math.inf:
            gemm = a if a > w else w
        else:
            gemm = (a ** p + w ** p) ** (1.0 / p)
        t = gemm + tokens * self._elem + self._kernels + self._comm_const + tokens * self._comm_tok
        if self._gather is not None:
            size = tokens * self._group_bytes
            t += m.moe_layers * (self._gather.time(size) + self._scatter.time(size))
        return t

    # --- attention ----------------------------------------------------------------------------------------
    def decode_context(self, contexts) -> float:
        """Σ over decodes of the context each attends over, windows applied: full layers see ``ctx``, sliding
        ones ``min(ctx, window)`` (averaged over the layers)."""
        total = sum(contexts)
        if not self.sliding:
            return total
        w, share = self.window, self.sliding / self.model.layers
        return total * (1 - share) + sum(c if c < w else w for c in contexts) * share

    def prefill_attention(self, new: int, cached: int) -> float:
        """A chunk of ``new`` tokens over ``cached`` ones: FLOP- or byte-bound per layer kind (full / sliding),
        plus MLA's decompression of the latent."""
        L = self.model.layers
        full = L - self.sliding
        t = 0.0
        for layers, window in ((full, 0), (self.sliding, self.window)):
            if not layers:
                continue
            pairs, span = _pairs(new, cached, window)
            f = layers * pairs * self._pair
            r = layers * span * self._kv_read
            t += f if f > r else r
        if self.mla:
            t += (new + cached) * self._decompress
        return t


def _pairs(new: int, cached: int, window: int) -> tuple[float, int]:
    """Query-key pairs of a causal chunk (query i of ``new`` sees ``cached + i`` tokens, at most ``window``
    when > 0) and the KV tokens it reads."""
    if not window or cached + new <= window:
        return new * cached + new * (new + 1) / 2, cached + new
    # queries that still see all their tokens (cached + i <= window), then the rest see exactly `window`
    full = max(0, min(new, window - cached))
    seen = full * cached + full * (full + 1) / 2
    return seen + (new - full) * window, min(cached + new, window + new - 1)

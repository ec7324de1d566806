"""Roofline batch time: a step's duration from the model's shape and the GPU's peak rates.

Per step, on each of the ``tp`` GPUs (every quantity below is that GPU's shard):

* linear layers (QKV, attention output, MLP) of all ``τ`` new tokens:
  ``smax(τ_c · F_lin / (P·e_c),  (W_lin + τ · A_lin) / (B·e_m))`` where ``F_lin`` is FLOPs per token,
  ``W_lin`` the weight bytes, ``A_lin`` the GEMMs' activation bytes per token, ``P`` peak FLOP/s, ``B`` memory
  bandwidth, ``e_c``/``e_m`` the compute and memory efficiencies. ``smax(a, b) = (a^p + b^p)^(1/p)`` is a
  smoothed maximum (``sharpness`` p; ``inf`` gives the hard roofline ``max``): GEMMs near the ridge point are
  neither purely compute- nor memory-bound, and p = 2 fits Vidur's per-operator profiles best (docs/batch-time.md).
  ``τ_c = τ``, or with ``staircase=True`` Bari et al.'s tile staircase ``t_col · ⌈τ / t_col⌉`` (eq. 4/7);
* element-wise ops (norms, residual adds, rotary embedding, the MLP activation): ``τ · E / (B·e_m)``, plus a
  fixed ``layer_overhead`` per layer (kernel launches and minimum kernel latency);
* LM head for the rows that sample, one per item (decode or prefill chunk): ``smax(rows · F_head / (P·e_c),
  W_head / (B·e_m))``;
* prefill attention of chunk (c new tokens over m cached ones), causal, FlashAttention-style:
  ``max(4·layers·q_dim·(c·m + c(c+1)/2) / (P·e_attn),  (m + c)·KV / (B·e_m))``;
* decode attention, memory-bound: ``Σ ctx · KV / (B·e_m)`` (KV = KV bytes per token on one GPU);
* with tp > 1, two ring all-reduces of the hidden states per layer:
  ``2·layers·(latency + 2(tp−1)/tp · τ·hidden·dtype / C)`` with ``C`` the GPU's measured all-reduce bus
  bandwidth where it has one (``GPUSpec.allreduce_busbw``: PCIe cards without NVLink reach far less than their
  link's rate), else ``interconnect/2 · e_comm``; where the GPU's ``collective_model`` is ``nccl``, each
  all-reduce of ``τ·hidden·dtype`` bytes costs what NCCL's tuning model gives at bus bandwidth ``C``
  (:mod:`llmsched.hardware.nccl_model`: the least over its protocols of their latency + size / bandwidth, so
  small all-reduces pay LL's or Simple's latency and LL's halved bandwidth), in place of ``allreduce_latency``
  and ``allreduce_hop_latency``;
* a fixed ``step_overhead`` (scheduling, input preparation, sampling) plus ``per_seq_overhead`` per item;
* for a mixture-of-experts, MLA or sliding-window model, :mod:`.architecture`'s terms: the layers' shared part
  (attention projections, dense layers, shared experts, router) takes the linear layers' place above, the
  routed experts add ``smax(FLOPs of tokens × experts a token, weights of the distinct experts touched)`` and,
  across data-parallel ranks, their all-gather/reduce-scatter (or all-to-all); MLA decodes read the latent;
  sliding layers attend over their window. fp8 weights stream at one byte and multiply at the GPU's FP8 rate.

Engine terms (all off by default; the ``engine`` kind turns them on with figures fitted by
``scripts/calibrate_timing.py``, see docs/batch-time.md):

* ring all-reduce per-hop latency: each all-reduce also pays ``2(tp−1) · allreduce_hop_latency`` (NCCL's ring
  has 2(tp−1) steps, each a link latency);
* host: launching the kernels (one per op in eager mode) takes ``layers · (host_layer + host_prefill_layer ·
  [step has a prefill])``; launches are asynchronous, so they overlap the GPU's work and the step costs the
  larger of the two (``host_sharpness`` p: ``(gpu^p + host^p)^(1/p)``, ``inf`` = the hard maximum). The
  host's serial work (scheduling, input preparation, reading the sampled tokens back: it waits on the GPU)
  adds ``host_step + rows · host_per_seq``;
* ``decode_attn_eff``: decode attention reads the KV cache at this fraction of peak bandwidth. By default the
  card's measured copy rate over its datasheet bandwidth (``GPUSpec.stream_fraction``: its own measurement, else a
  measured card of its family; H100 0.898, H200 0.888), else ``mem_eff``. Decode attention is a streaming read of
  the KV cache, and on both measured cards a decode step's attention time (the PyTorch step grid with attention
  less without, tests/data/gpu_runs/h1x0-step-grid.csv) reaches the copy rate once the KV read dominates (3.0-3.1
  TB/s on the H100, 3.8-4.3 on the H200, at 64-256 sequences of 4k tokens), where ``mem_eff`` was fitted on the
  weight-streaming GEMMs of an eager per-op profile (``measured_stream=False`` keeps ``mem_eff``, as the
  ``engine`` kind's terms were fitted); ``decode_gqa=False``: the decode kernel reads one K/V copy per *query*
  head (an engine that repeats grouped KV heads, as Hugging Face's ``repeat_kv`` does), heads/kv_heads times the
  bytes.

``compute_eff`` and ``mem_eff`` default to the figures fitted by ``scripts/calibrate_profiles.py`` for the GPU
(``calibration.json``), else to :data:`DEFAULT_EFFICIENCY`.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from math import sqrt
from pathlib import Path

from ..hardware.gpus import GPUSpec, gpu as _gpu
from ..hardware.models import ModelSpec, model as _model
from .architecture import ArchitectureTerms
from .base import Batch, BatchTimeModel

CALIBRATION_PATH = Path(__file__).with_name("calibration.json")

# Documented defaults for GPUs without a calibration, chosen a priori: dense GEMMs in serving reach ~60–70% of
# peak tensor FLOP/s and weight streaming ~70–80% of peak bandwidth; FlashAttention-2's forward pass ~50% of
# peak on serving-sized chunks. The "before" columns of docs/batch-time.md compare them with Vidur's profiles.
DEFAULT_EFFICIENCY = {"compute_eff": 0.65, "mem_eff": 0.75, "layer_overhead": 0.0}
DEFAULT_PARAMS = dict(attn_compute_eff=0.5, comm_eff=0.7, allreduce_latency=10e-6, step_overhead=2e-3,
                      per_seq_overhead=0.0, sharpness=2.0)
ENGINE_TERMS = ("comm_eff", "allreduce_hop_latency", "host_step", "host_layer", "host_prefill_layer",
                "host_per_seq", "host_sharpness", "decode_attn_eff", "decode_gqa", "step_overhead")


@lru_cache(maxsize=1)
def load_calibration() -> dict:
    """The fitted efficiencies in ``calibration.json`` ({} when the file is absent)."""
    if not CALIBRATION_PATH.exists():
        return {}
    return json.loads(CALIBRATION_PATH.read_text())


def calibration_for(gpu: GPUSpec, staircase: bool = False) -> dict | None:
    """Fitted figures for ``gpu`` (by name, else by chip family), for the plain or the staircase variant."""
    table = load_calibration().get("gpus", {})
    variant = "roofline-staircase" if staircase else "roofline"
    for key in (gpu.name, gpu.family):
        entry = table.get(key, {}).get(variant)
        if entry:
            return entry
    return None


def rates(m, g, compute_eff: float, mem_eff: float) -> tuple[float, float, float]:
    """``(FLOP/s of the linear layers, bytes/s of memory, FLOP/s of the LM head)`` of model ``m`` on GPU ``g`` at
    the efficiencies: fp8 weights stream at one byte and multiply at the FP8 rate; the LM head stays at the
    activations' dtype."""
    return g.gemm_flops(m.weight_dtype_bytes) * compute_eff, g.mem_bw * mem_eff, g.flops * compute_eff


def layer_traffic(m) -> tuple[float, float]:
    """``(GEMM inputs and outputs, element-wise reads and writes)`` of one layer of ``m`` on one GPU, in elements
    per token. GEMM: the hidden-sized ones (QKV and up-projection inputs, attention-output and down-projection
    outputs) are whole on every GPU, the head- and ffn-sized ones sharded. Element-wise: two fused add+RMSNorm
    (read and write hidden and residual), rotary embedding (read and write q and k), the MLP activation (read 2
    ffn, write ffn; read and write ffn without a gate)."""
    ffn_mats = 3 if m.gated_mlp else 2
    return (4 * m.hidden + (2 * m.q_dim + 2 * m.kv_dim + ffn_mats * m.ffn) / m.tp,
            8 * m.hidden + (2 * (m.q_dim + m.kv_dim) + ffn_mats * m.ffn) / m.tp)


class RooflineBatchTime(BatchTimeModel):
    """Step time from FLOPs and bytes moved; see the module docstring for the formula."""

    name = "roofline"

    def __init__(self, model: ModelSpec | str, gpu: GPUSpec | str, *, compute_eff: float | None = None,
                 mem_eff: float | None = None, layer_overhead: float | None = None,
                 attn_compute_eff: float = DEFAULT_PARAMS["attn_compute_eff"],
                 comm_eff: float = DEFAULT_PARAMS["comm_eff"],
                 allreduce_latency: float = DEFAULT_PARAMS["allreduce_latency"],
                 step_overhead: float = DEFAULT_PARAMS["step_overhead"],
                 per_seq_overhead: float = DEFAULT_PARAMS["per_seq_overhead"],
                 sharpness: float = DEFAULT_PARAMS["sharpness"], staircase: bool = False, t_col: int | None = None,
                 calibration: str = "auto", allreduce_hop_latency: float = 0.0, host_step: float = 0.0,
                 host_layer: float = 0.0, host_prefill_layer: float = 0.0, host_per_seq: float = 0.0,
                 host_sharpness: float = math.inf, decode_attn_eff: float | None = None, decode_gqa: bool = True,
                 moe_all2all: str = "allgather_reducescatter", moe_tile_padding: bool = True,
                 measured_stream: bool = True):
        self.model, self.gpu = _model(model), _gpu(gpu)
        self.staircase = bool(staircase)
        if staircase:
            self.name = "roofline-staircase"
        if calibration not in ("auto", "off", "require"):
            raise ValueError(f"calibration must be 'auto', 'off' or 'require', got {calibration!r}")
        fitted = calibration_for(self.gpu, self.staircase) if calibration != "off" else None
        if calibration == "require" and fitted is None:
            calibrated = sorted(load_calibration().get("gpus", {}))
            raise ValueError(f"no calibration for GPU {self.gpu.name!r} in {CALIBRATION_PATH.name}; calibrated "
                             f"GPUs: {', '.join(calibrated) or 'none'} (run scripts/calibrate_profiles.py)")
        base = fitted or DEFAULT_EFFICIENCY
        self.efficiency_source = fitted.get("source", "calibration.json") if fitted else "documented defaults"
        overridden = [k for k, v in (("compute_eff", compute_eff), ("mem_eff", mem_eff),
                                     ("layer_overhead", layer_overhead)) if v is not None]
        if overridden:
            self.efficiency_source += f" (given: {', '.join(overridden)})"
        self.compute_eff = base["compute_eff"] if compute_eff is None else compute_eff
        self.mem_eff = base["mem_eff"] if mem_eff is None else mem_eff
        self.layer_overhead = base.get("layer_overhead", 0.0) if layer_overhead is None else layer_overhead
        self.attn_compute_eff, self.comm_eff = attn_compute_eff, comm_eff
        self.allreduce_latency, self.step_overhead = allreduce_latency, step_overhead
        self.per_seq_overhead, self.sharpness = per_seq_overhead, float(sharpness)
        self.t_col = self.gpu.t_col if t_col is None else t_col
        self.allreduce_hop_latency = allreduce_hop_latency
        self.host_step, self.host_layer, self.host_prefill_layer = host_step, host_layer, host_prefill_layer
        self.host_per_seq, self.host_sharpness = host_per_seq, float(host_sharpness)
        stream = self.gpu.stream_fraction() if measured_stream else None
        if decode_attn_eff is not None:
            self.decode_attn_eff, self.decode_attn_source = decode_attn_eff, "given"
        elif stream is not None:
            self.decode_attn_eff, self.decode_attn_source = stream
        else:
            why = "no copy rate measured on the card or its family" if measured_stream else "as its terms were fitted"
            self.decode_attn_eff, self.decode_attn_source = self.mem_eff, f"mem_eff ({why})"
        self.decode_gqa = bool(decode_gqa)
        self.moe_all2all = moe_all2all
        self.moe_tile_padding = bool(moe_tile_padding)
        for label, value in (("compute_eff", self.compute_eff), ("mem_eff", self.mem_eff),
                             ("attn_compute_eff", attn_compute_eff), ("comm_eff", comm_eff),
                             ("decode_attn_eff", self.decode_attn_eff)):
            if not 0 < value <= 1:
                raise ValueError(f"{label} must be in (0, 1], got {value}")
        for label, value in (("layer_overhead", self.layer_overhead), ("allreduce_latency", allreduce_latency),
                             ("step_overhead", step_overhead), ("per_seq_overhead", per_seq_overhead),
                             ("allreduce_hop_latency", allreduce_hop_latency), ("host_step", host_step),
                             ("host_layer", host_layer), ("host_prefill_layer", host_prefill_layer),
                             ("host_per_seq", host_per_seq)):
            if value < 0:
                raise ValueError(f"{label} must be >= 0 seconds, got {value}")
        for label, value in (("host_sharpness", host_sharpness), ("sharpness", sharpness)):
            if float(value) < 1:
                raise ValueError(f"{label} must be >= 1 (inf for a hard max), got {value}")
        if self.t_col <= 0:
            raise ValueError(f"t_col must be positive, got {t_col}")
        self._precompute()

    def _precompute(self) -> None:
        m, g = self.model, self.gpu
        tp, b = m.tp, m.dtype_bytes
        flops, bw, head_flops = rates(m, g, self.compute_eff, self.mem_eff)
        gemm_io, elementwise = layer_traffic(m)
        self._layer_c = m.layer_linear_params * 2 / tp / flops            # s per token (compute)
        self._layer_w = m.layer_linear_params * m.weight_dtype_bytes / tp / bw   # s (weights)
        self._layer_a = gemm_io * b / bw                                  # s per token (GEMM activations)
        self._layer_e = elementwise * b / bw                              # s per token (element-wise ops)
        L = m.layers
        self._lin_c, self._lin_w, self._lin_a = L * self._layer_c, L * self._layer_w, L * self._layer_a
        self._elem = L * self._layer_e
        self._head_c = m.lm_head_flops_per_token / tp / head_flops
        self._head_m = m.hidden * m.vocab * b / tp / bw
        self._kv_read = m.kv_bytes_per_token_per_gpu / bw
        decode_kv = m.kv_bytes_per_token_per_gpu if self.decode_gqa else \
            2 * L * max(1, m.heads // tp) * m.head_dim * m.kv_dtype_bytes
        self._kv_decode = decode_kv / (g.mem_bw * self.decode_attn_eff)
        self._attn_c = 4.0 * L * m.q_dim / tp / (g.flops * self.attn_compute_eff)
        self.architecture = None
        if m.is_moe or m.is_mla or m.sliding_window:
            self._precompute_architecture(flops, bw)
        self._const = self.step_overhead + L * self.layer_overhead
        self._layers_const = L * self.layer_overhead
        self.allreduce = g.nccl_collective("allreduce", tp, self.comm_eff)     # None: the fixed latency below
        self._ar_bytes, self._ar_calls = m.hidden * b, 2 * L           # a token's hidden state; two a layer
        if tp > 1 and self.allreduce is None:
            link = g.collective_bw(self.comm_eff)                      # one direction
            self._ar_const = 2 * L * (self.allreduce_latency + 2 * (tp - 1) * self.allreduce_hop_latency)
            self._ar_tok = 2 * L * 2 * (tp - 1) / tp * m.hidden * b / link
        else:
            self._ar_const = self._ar_tok = 0.0
        self._p = self.sharpness
        self._host = self.host_step > 0 or self.host_layer > 0 or self.host_prefill_layer > 0 or self.host_per_seq > 0
        self._host_decode = L * self.host_layer
        self._host_prefill = self._host_decode + L * self.host_prefill_layer
        # what every step reads, in one tuple: a compiled step time unpacks it once (each attribute of this plain
        # class is a dictionary lookup, and a step read some twenty of them)
        self._hot = (self.staircase, self.t_col, self._p, self._lin_c, self._lin_w, self._lin_a, self._head_c,
                     self._head_m, self._layers_const if self._host else self._const, self.per_seq_overhead,
                     self._elem, self._kv_decode, self._attn_c, self._kv_read, self._ar_const, self._ar_tok,
                     self.allreduce, self.architecture, self._host)

    def _precompute_architecture(self, flops: float, bw: float) -> None:
        """The shared part of a MoE or MLA model's layers (attention, dense layers, shared experts, router) in
        the dense formula's place, and :class:`ArchitectureTerms` for routed experts, MLA and windows."""
        m, tp, b = self.model, self.model.tp, self.model.dtype_bytes
        L, h = m.layers, m.hidden
        if m.is_moe or m.is_mla:
            sharded = L * m.attention_params + m.dense_layers * m.dense_mlp_params + \
                m.moe_layers * m.shared_expert_params
            replicated = m.moe_layers * m.router_params
            if m.is_mla:     # vLLM replicates the latent down-projections on every GPU
                down = h * (m.q_lora_rank + m.kv_width)
                sharded, replicated = sharded - L * down, replicated + L * down
            per_gpu = sharded / tp + replicated
            if m.is_mla:
                attn_io = 2 * h + m.q_lora_rank + m.kv_width + 2 * (m.q_dim + m.heads * m.v_head_dim) / tp
            else:
                attn_io = 2 * h + (2 * m.q_dim + 2 * m.kv_dim) / tp
            mats, shared = m.mlp_mats, m.shared_expert_ffn
            gemm_io = L * attn_io + m.dense_layers * (2 * h + mats * m.ffn / tp) + \
                (m.moe_layers * (2 * h + mats * shared / tp) if shared else 0)
            elementwise = L * (8 * h + 2 * (m.q_dim + m.kv_dim) / tp) + m.dense_layers * mats * m.ffn / tp + \
                m.moe_layers * mats * shared / tp
            self._lin_c = per_gpu * 2 / flops
            self._lin_w = per_gpu * m.weight_dtype_bytes / bw
            self._lin_a, self._elem = gemm_io * b / bw, elementwise * b / bw
            self._layer_c, self._layer_w = self._lin_c / L, self._lin_w / L
            self._layer_a, self._layer_e = self._lin_a / L, self._elem / L
        self.architecture = ArchitectureTerms(
            m, self.gpu, compute_eff=self.compute_eff, mem_eff=self.mem_eff, attn_compute_eff=self.attn_compute_eff,
            decode_attn_eff=self.decode_attn_eff, comm_eff=self.comm_eff, collective_latency=self.allreduce_latency,
            hop_latency=self.gpu.link_latency, sharpness=self.sharpness, moe_all2all=self.moe_all2all,
            layer_overhead=self.layer_overhead, moe_tile_padding=self.moe_tile_padding)
        if m.is_mla:
            self._kv_decode = self.architecture.kv_decode
        if m.sliding_window:
            self.decode_sum_only = False     # a decode's cost depends on its own context, not only the sum

    def _smax(self, a: float, b: float) -> float:
        p = self._p
        if p == 2.0:
            return sqrt(a * a + b * b)
        if p == math.inf:
            return a if a > b else b
        return (a ** p + b ** p) ** (1.0 / p)

    decode_sum_only = True

    def step_time(self, batch: Batch) -> float:
        prefill_new, decode_ctx = batch.prefill_new, batch.decode_ctx
        n_decodes = len(decode_ctx)
        if n_decodes and self.architecture is not None and self.architecture.sliding:
            context = self.architecture.decode_context(decode_ctx)
        else:
            context = sum(decode_ctx) if n_decodes else 0
        return self._time(n_decodes + len(prefill_new), sum(prefill_new) + n_decodes, n_decodes, context,
                          prefill_new, batch.prefill_ctx)

    def decode_sum_time(self, num_decodes: int, context_sum: int) -> float:
        return self._time(num_decodes, num_decodes, num_decodes, context_sum, (), ())

    def sum_step_time(self, prefill_new, prefill_ctx, num_decodes: int, context_sum: int) -> float:
        return self._time(num_decodes + len(prefill_new), sum(prefill_new) + num_decodes, num_decodes,
                          context_sum if num_decodes else 0, prefill_new, prefill_ctx)

    def _time(self, rows: int, tokens: int, n_decodes: int, decode_ctx_sum: int, prefill_new, prefill_ctx) -> float:
        """The step time of a batch given by its totals and its prefill chunks (one formula for both paths)."""
        if tokens == 0:
            return 0.0
        (staircase, t_col, p, lin_c, lin_w, lin_a, head_c, head_m, const, per_seq, elem, kv_decode, attn_c, kv_read,
         ar_const, ar_tok, allreduce, arch, host_on) = self._hot
        compute_tokens = -(-tokens // t_col) * t_col if staircase else tokens
        a, b = compute_tokens * lin_c, lin_w + tokens * lin_a
        h, w = rows * head_c, head_m
        if p == 2.0:
            t = sqrt(a * a + b * b) + sqrt(h * h + w * w)
        else:
            t = self._smax(a, b) + self._smax(h, w)
        t += const + rows * per_seq + tokens * elem
        if n_decodes:
            t += decode_ctx_sum * kv_decode
        if prefill_new:
            if arch is None:
                for c, ctx in zip(prefill_new, prefill_ctx):
                    f = (c * ctx + c * (c + 1) * 0.5) * attn_c
                    r = (ctx + c) * kv_read
                    t += f if f > r else r
            else:
                for c, ctx in zip(prefill_new, prefill_ctx):
                    t += arch.prefill_attention(c, ctx)
        if ar_const:
            t += ar_const + tokens * ar_tok
        elif allreduce is not None:
            t += self._ar_calls * allreduce.time(tokens * self._ar_bytes)
        if arch is not None and arch.moe:
            t += arch.experts(tokens)
        if host_on:
            host = self._host_prefill if prefill_new else self._host_decode
            q = self.host_sharpness
            t = (t if t > host else host) if q == math.inf else (t ** q + host ** q) ** (1.0 / q)
            t += self.step_overhead + self.host_step + rows * self.host_per_seq
        return t

    def attention_time(self, batch: Batch) -> float:
        """The attention terms of ``batch``'s step on one GPU (decode KV reads, prefill attention): what a step
        without attention would not spend."""
        t, arch = 0.0, self.architecture
        if batch.decode_ctx:
            windowed = arch is not None and arch.sliding
            t += (arch.decode_context(batch.decode_ctx) if windowed else sum(batch.decode_ctx)) * self._kv_decode
        for c, ctx in zip(batch.prefill_new, batch.prefill_ctx):
            if arch is not None:
                t += arch.prefill_attention(c, ctx)
            else:
                f = (c * ctx + c * (c + 1) * 0.5) * self._attn_c
                r = (ctx + c) * self._kv_read
                t += f if f > r else r
        return t

    def layer_components(self, tokens):
        """One layer's non-attention seconds on one GPU for ``tokens`` tokens, split as (GEMM compute time,
        GEMM memory time, element-wise time); an int or a numpy array of token counts."""
        compute_tokens = -(-tokens // self.t_col) * self.t_col if self.staircase else tokens
        return (compute_tokens * self._layer_c, self._layer_w + tokens * self._layer_a, tokens * self._layer_e)

    def layer_nonattention_time(self, tokens):
        """Seconds of one layer's non-attention work (GEMMs, element-wise ops, layer overhead) for ``tokens``
        tokens on one GPU: what Vidur's per-operator profiles measure. Accepts an int or a numpy array."""
        a, b, elementwise = self.layer_components(tokens)
        p = self._p
        if p == math.inf:
            linear = (a + b + abs(a - b)) / 2          # max(a, b) for numbers and numpy arrays alike
        else:
            linear = (a ** p + b ** p) ** (1.0 / p)
        return linear + elementwise + self.layer_overhead

    def describe(self) -> dict:
        return {"name": self.name, "model": self.model.name, "gpu": self.gpu.name,
                "compute_eff": self.compute_eff, "mem_eff": self.mem_eff, "layer_overhead": self.layer_overhead,
                "attn_compute_eff": self.attn_compute_eff, "comm_eff": self.comm_eff,
                "allreduce_latency": self.allreduce_latency, "step_overhead": self.step_overhead,
                "per_seq_overhead": self.per_seq_overhead, "sharpness": self.sharpness,
                "staircase": self.staircase, "t_col": self.t_col, "efficiency_source": self.efficiency_source,
                "allreduce_hop_latency": self.allreduce_hop_latency, "host_step": self.host_step,
                "host_layer": self.host_layer, "host_prefill_layer": self.host_prefill_layer,
                "host_per_seq": self.host_per_seq, "host_sharpness": self.host_sharpness,
                "decode_attn_eff": self.decode_attn_eff, "decode_attn_source": self.decode_attn_source,
                "decode_gqa": self.decode_gqa,
                "moe_all2all": self.moe_all2all, "moe_tile_padding": self.moe_tile_padding,
                "model_source": self.model.source, "gpu_source": self.gpu.source}

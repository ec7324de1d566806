"""Model presets: the transformer shapes a batch-time and memory model needs, from public model cards (the presets
are data, in models.json)."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from . import hf_config, hub_models


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer served with tensor parallelism ``tp`` (per-GPU figures divide by it).

    ``ffn`` is the MLP intermediate size of a dense layer; ``gated_mlp`` means three FFN matrices (SwiGLU), else
    two. ``params`` is the published parameter count (embedding and LM head included once each, or once when
    ``tied_embeddings``).

    Mixture of experts (``experts`` > 0): ``moe_layers`` of the ``layers`` (default all) replace the dense MLP by a
    router over ``experts`` routed experts of intermediate size ``expert_ffn``, ``experts_per_token`` of them a
    token, plus shared experts every token runs (``shared_expert_ffn``: their intermediate sizes summed;
    ``shared_expert_gate``: Qwen2-MoE's sigmoid gate). The other layers keep the dense MLP of size ``ffn``.

    Multi-head latent attention (``kv_lora_rank`` > 0, DeepSeek-V2/V3): K and V are cached as one latent of
    ``kv_lora_rank`` plus a shared rotary key of ``qk_rope_head_dim`` per token and layer; ``head_dim`` is the
    query/key head size (nope + rope), ``v_head_dim`` the value head size; queries go through a rank
    ``q_lora_rank`` bottleneck when it is > 0.

    ``sliding_window`` > 0: ``sliding_layers`` layers (default all) attend over the last ``sliding_window`` tokens
    only; ``chunked_local``: they attend within their chunk of ``sliding_window`` tokens instead (Llama-4's chunked
    local attention), which vLLM's KV cache frees chunk by chunk (hardware/kv_groups.py). ``dtype_bytes`` is the
    activations' dtype; ``weight_dtype_bytes`` the linear layers' weights (1 for fp8; embedding and LM head stay
    at ``dtype_bytes``), ``kv_dtype_bytes`` the KV cache's (1 for fp8); both default to ``dtype_bytes``.
    ``expert_weight_bytes``: the routed experts' bytes a weight where their format differs (gpt-oss's MXFP4: 4.25
    bits), default ``weight_dtype_bytes``. ``dp`` and ``expert_parallel``: data-parallel ranks and vLLM's
    ``--enable-expert-parallel``; MoE layers shard their experts over ``tp * dp`` GPUs either way (vLLM's
    ``FusedMoEParallelConfig``: by expert with expert parallelism, else each expert's intermediate dimension).
    """

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    params: int
    dtype_bytes: int = 2
    tp: int = 1
    max_model_len: int
    gated_mlp: bool = True
    tied_embeddings: bool = False
    source: str
    experts: int = 0
    experts_per_token: int = 0
    expert_ffn: int = 0
    shared_expert_ffn: int = 0
    shared_expert_gate: bool = False
    moe_layers: int | None = None
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int | None = None
    sliding_window: int = 0
    sliding_layers: int | None = None
    chunked_local: bool = False
    qkv_bias: bool = False
    qk_norm: bool = False
    weight_dtype_bytes: int | None = None
    expert_weight_bytes: float | None = None
    kv_dtype_bytes: int | None = None
    dp: int = 1
    expert_parallel: bool = False

    def __post_init__(self):
        resolved = {"moe_layers": self.layers if self.experts else 0, "v_head_dim": self.head_dim,
                    "sliding_layers": self.layers if self.sliding_window else 0,
                    "weight_dtype_bytes": self.dtype_bytes, "kv_dtype_bytes": self.dtype_bytes}
        for field_name, default in resolved.items():
            if getattr(self, field_name) is None:
                object.__setattr__(self, field_name, default)
        if self.expert_weight_bytes is None:
            object.__setattr__(self, "expert_weight_bytes", self.weight_dtype_bytes)
        if not (isinstance(self.expert_weight_bytes, (int, float)) and 0 < self.expert_weight_bytes <= 4):
            raise ValueError(f"model {self.name!r}: expert_weight_bytes must be in (0, 4], got "
                             f"{self.expert_weight_bytes!r}")
        for field_name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "params",
                           "dtype_bytes", "tp", "max_model_len", "v_head_dim", "weight_dtype_bytes",
                           "kv_dtype_bytes", "dp"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"model {self.name!r}: {field_name} must be a positive int, got {value!r}")
        for field_name in ("experts", "experts_per_token", "expert_ffn", "shared_expert_ffn", "moe_layers",
                           "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "sliding_window", "sliding_layers"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"model {self.name!r}: {field_name} must be an int >= 0, got {value!r}")
        if self.heads % self.kv_heads:
            raise ValueError(f"model {self.name!r}: heads ({self.heads}) must be a multiple of kv_heads "
                             f"({self.kv_heads})")
        if self.heads % self.tp:
            raise ValueError(f"model {self.name!r}: tp={self.tp} must divide the {self.heads} attention heads; "
                             f"use tp in {_divisors(self.heads)}")
        if not self.is_mla and self.kv_heads % self.tp and self.tp % self.kv_heads:
            raise ValueError(f"model {self.name!r}: tp={self.tp} must divide kv_heads={self.kv_heads} or be a "
                             f"multiple of it; use tp in {_divisors(self.kv_heads)} or a multiple of "
                             f"{self.kv_heads}")
        if self.experts:
            if not self.experts_per_token or not self.expert_ffn:
                raise ValueError(f"model {self.name!r}: a mixture of experts needs experts_per_token and "
                                 f"expert_ffn (got {self.experts_per_token} and {self.expert_ffn})")
            if self.experts_per_token > self.experts:
                raise ValueError(f"model {self.name!r}: experts_per_token={self.experts_per_token} is more than the "
                                 f"{self.experts} experts; a token picks at most every expert")
            if not 0 < self.moe_layers <= self.layers:
                raise ValueError(f"model {self.name!r}: moe_layers={self.moe_layers} must be in 1..{self.layers}")
        elif self.experts_per_token or self.expert_ffn or self.shared_expert_ffn or self.moe_layers:
            raise ValueError(f"model {self.name!r}: experts_per_token, expert_ffn, shared_expert_ffn and moe_layers "
                             f"need experts > 0")
        if self.is_mla and not (self.qk_rope_head_dim and self.qk_rope_head_dim < self.head_dim):
            raise ValueError(f"model {self.name!r}: latent attention (kv_lora_rank={self.kv_lora_rank}) needs "
                             f"0 < qk_rope_head_dim < head_dim, got {self.qk_rope_head_dim} and {self.head_dim}")
        if self.sliding_layers > self.layers or (self.sliding_layers and not self.sliding_window):
            raise ValueError(f"model {self.name!r}: sliding_layers={self.sliding_layers} needs a sliding_window and "
                             f"at most {self.layers} layers")
        if self.chunked_local and not self.sliding_window:
            raise ValueError(f"model {self.name!r}: chunked_local needs sliding_window (the chunk size)")
        if self.expert_parallel and not self.experts:
            raise ValueError(f"model {self.name!r}: expert parallelism needs a mixture-of-experts model")

    # --- shapes -------------------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        """One layer's attention matrices: QKV (or MLA's low-rank projections) and the output projection."""
        if not self.is_mla:
            return self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        if self.q_lora_rank:
            q = self.hidden * self.q_lora_rank + self.q_lora_rank * self.q_dim
        else:
            q = self.hidden * self.q_dim
        nope = self.head_dim - self.qk_rope_head_dim
        kv = self.hidden * (self.kv_lora_rank + self.qk_rope_head_dim) + \
            self.kv_lora_rank * self.heads * (nope + self.v_head_dim)
        return q + kv + self.heads * self.v_head_dim * self.hidden

    @property
    def mlp_mats(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def dense_mlp_params(self) -> int:
        """One dense layer's MLP."""
        return self.mlp_mats * self.hidden * self.ffn

    @property
    def layer_linear_params(self) -> int:
        """Weights of one dense layer's matrices: QKV, attention output, and the MLP."""
        return self.attention_params + self.dense_mlp_params

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers

    @property
    def expert_params(self) -> int:
        """One routed expert's MLP."""
        return self.mlp_mats * self.hidden * self.expert_ffn

    @property
    def router_params(self) -> int:
        return self.hidden * self.experts

    @property
    def shared_expert_params(self) -> int:
        return self.mlp_mats * self.hidden * self.shared_expert_ffn + (self.hidden if self.shared_expert_gate else 0)

    @property
    def moe_mlp_params(self) -> int:
        """One MoE layer's MLP: router, every routed expert, shared experts."""
        return self.router_params + self.experts * self.expert_params + self.shared_expert_params

    @property
    def routed_expert_params(self) -> int:
        """All routed experts of the model (the weights expert parallelism shards)."""
        return self.moe_layers * self.experts * self.expert_params

    @property
    def shape_params(self) -> int:
        """Parameter count implied by the shape (norms ignored); checks ``params`` against the card."""
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        if not self.is_moe:
            return self.layers * self.layer_linear_params + embeddings
        return (self.layers * self.attention_params + self.dense_layers * self.dense_mlp_params
                + self.moe_layers * self.moe_mlp_params + embeddings)

    @property
    def norm_params(self) -> int:
        """RMSNorm weights (two a layer, the final one, Qwen3's per-head q/k norms, MLA's latent norms) and
        biases (Qwen2's QKV) that ``shape_params`` leaves out: what makes a config's count exact."""
        per_layer = 2 * self.hidden + (2 * self.head_dim if self.qk_norm else 0) + \
            (self.q_dim + 2 * self.kv_dim if self.qkv_bias else 0)
        if self.is_mla:
            per_layer += self.kv_lora_rank + self.q_lora_rank
        return self.layers * per_layer + self.hidden

    @property
    def active_params(self) -> int:
        """Parameters one token runs through (routed experts: ``experts_per_token`` of them); norms ignored."""
        if not self.is_moe:
            return self.shape_params
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return (self.layers * self.attention_params + self.dense_layers * self.dense_mlp_params
                + self.moe_layers * self.active_moe_mlp_params + embeddings)

    @property
    def active_moe_mlp_params(self) -> int:
        """One MoE layer's weights one token uses: router, ``experts_per_token`` experts, shared experts."""
        return self.router_params + self.experts_per_token * self.expert_params + self.shared_expert_params

    # --- memory -------------------------------------------------------------------------------------------
    @property
    def kv_width(self) -> int:
        """Elements cached per token and layer: K and V of the KV heads, or MLA's latent plus rotary key (as
        vLLM sizes it: ``kv_lora_rank + qk_rope_head_dim``, one 'head')."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_dim

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token in every layer, whole model: 2 · layers · kv_heads · head_dim · kv dtype bytes
        (MLA: layers · (kv_lora_rank + qk_rope_head_dim) · kv dtype bytes)."""
        if self.is_mla:
            return self.layers * self.kv_width * self.kv_dtype_bytes
        return 2 * self.layers * self.kv_dim * self.kv_dtype_bytes

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads each GPU holds; with tp > kv_heads every GPU keeps a replica of one head (as vLLM does).
        MLA's latent is one head that every GPU keeps whole."""
        if self.is_mla:
            return 1
        return max(1, self.kv_heads // self.tp)

    @property
    def kv_bytes_per_token_per_gpu(self) -> int:
        if self.is_mla:
            return self.kv_bytes_per_token
        return 2 * self.layers * self.kv_heads_per_gpu * self.head_dim * self.kv_dtype_bytes

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def weight_bytes(self) -> int:
        """Every weight at its dtype: embedding and LM head at ``dtype_bytes``, routed experts at
        ``expert_weight_bytes``, the rest at ``weight_dtype_bytes`` (vLLM's fp8 quantises the linear layers only)."""
        experts = self.routed_expert_params
        if self.weight_dtype_bytes == self.dtype_bytes:
            dense = self.params * self.dtype_bytes
        else:
            embeddings = min(self.embedding_params, self.params)
            dense = embeddings * self.dtype_bytes + (self.params - embeddings) * self.weight_dtype_bytes
        if self.expert_weight_bytes == self.weight_dtype_bytes:
            return dense
        return int(dense + experts * (self.expert_weight_bytes - self.weight_dtype_bytes))

    @property
    def weight_bytes_per_gpu(self) -> float:
        """Weights are sharded over the tp GPUs (vLLM shards the embedding and LM head too); routed experts over
        tp · dp GPUs (by expert with expert parallelism, else by intermediate dimension)."""
        if not self.is_moe or self.dp == 1:
            return self.weight_bytes / self.tp
        experts = self.routed_expert_params * self.expert_weight_bytes
        return (self.weight_bytes - experts) / self.tp + experts / (self.tp * self.dp)

    @property
    def moe_group(self) -> int:
        """GPUs one MoE layer's experts are spread over: tp · dp (vLLM flattens both into the MoE group)."""
        return self.tp * self.dp

    @property
    def expert_parallel_size(self) -> int:
        """GPUs the experts are divided among whole (1 without expert parallelism)."""
        return self.moe_group if self.expert_parallel else 1

    # --- compute ------------------------------------------------------------------------------------------
    @property
    def linear_flops_per_token(self) -> int:
        """FLOPs of the per-layer matrices for one token, all layers, whole model (LM head excluded)."""
        if not self.is_moe:
            return 2 * self.layers * self.layer_linear_params
        return 2 * (self.layers * self.attention_params + self.dense_layers * self.dense_mlp_params
                    + self.moe_layers * self.active_moe_mlp_params)

    @property
    def lm_head_flops_per_token(self) -> int:
        return 2 * self.hidden * self.vocab

    @property
    def attention_pair_flops(self) -> int:
        """FLOPs of one query-key pair in one layer, whole model: QKᵀ over the query/key head size and PV over
        the value head size, 2 FLOPs a multiply-add: 2 · heads · (head_dim + v_head_dim) (4 · q_dim without
        MLA)."""
        if not self.is_mla and self.v_head_dim == self.head_dim:
            return 4 * self.q_dim
        return 2 * self.heads * (self.head_dim + self.v_head_dim)

    def attention_flops(self, new_tokens: int, context: int = 0) -> float:
        """Causal attention FLOPs (QKᵀ and PV) of ``new_tokens`` queries over ``context`` cached tokens plus
        themselves, all layers, whole model: 4 · layers · heads · head_dim · (new·context + new·(new+1)/2)."""
        pairs = new_tokens * context + new_tokens * (new_tokens + 1) / 2
        if self.attention_pair_flops == 4 * self.q_dim:
            return 4.0 * self.layers * self.q_dim * pairs
        return float(self.layers * self.attention_pair_flops) * pairs

    def expected_active_experts(self, tokens: float) -> float:
        """Expected distinct routed experts ``tokens`` tokens touch in one MoE layer under uniform routing.

        Each token picks ``k`` of the ``E`` experts without repetition, so a given expert is among its picks with
        probability k/E and escapes all ``T`` independent tokens with probability (1 − k/E)^T; by linearity of
        expectation the distinct experts number E · (1 − (1 − k/E)^T) (the occupancy problem: Feller, *An
        Introduction to Probability Theory*, vol. 1, §II.11 and §IV.2). It grows from k at T = 1 to E."""
        if not self.is_moe or tokens <= 0:
            return 0.0
        e, k = self.experts, self.experts_per_token
        if k == e:
            return float(e)
        return e * -math.expm1(tokens * math.log1p(-k / e))

    # --- variants -----------------------------------------------------------------------------------------
    @property
    def parallel_suffix(self) -> str:
        """``-tp<n>``, ``-dp<n>`` and ``-ep`` for the parallelism this spec is served with ('' for one GPU)."""
        return (f"-tp{self.tp}" if self.tp != 1 else "") + (f"-dp{self.dp}" if self.dp != 1 else "") + \
            ("-ep" if self.expert_parallel else "")

    @property
    def base_name(self) -> str:
        """The name without its parallelism suffix: the preset (or config path) to look up again."""
        suffix = self.parallel_suffix
        return self.name[:-len(suffix)] if suffix and self.name.endswith(suffix) else self.name

    def with_tp(self, tp: int) -> "ModelSpec":
        """The same model sharded over ``tp`` GPUs, named ``<base>-tp<n>`` (``<base>`` for tp=1)."""
        return self.with_parallel(tp=tp)

    def with_parallel(self, tp: int | None = None, dp: int | None = None,
                      expert_parallel: bool | None = None) -> "ModelSpec":
        """The same model with tensor parallelism ``tp``, ``dp`` data-parallel ranks and (for MoE models) expert
        parallelism, named ``<base>[-tp<n>][-dp<n>][-ep]``; a figure left None keeps this spec's."""
        tp = self.tp if tp is None else tp
        dp = self.dp if dp is None else dp
        ep = self.expert_parallel if expert_parallel is None else bool(expert_parallel)
        spec = replace(self, tp=tp, dp=dp, expert_parallel=ep)
        return replace(spec, name=self.base_name + spec.parallel_suffix)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0 and d <= 64)


PRESETS_PATH = Path(__file__).with_name("models.json")
MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    ModelSpec(**entry) for entry in json.loads(PRESETS_PATH.read_text(encoding="utf-8"))["models"])}

_ALIASES = {
    "meta-llama/llama-2-7b-hf": "llama-2-7b", "llama2-7b": "llama-2-7b",
    "meta-llama/meta-llama-3-8b": "llama-3-8b", "llama3-8b": "llama-3-8b",
    "meta-llama/llama-3.1-8b": "llama-3.1-8b", "llama3.1-8b": "llama-3.1-8b",
    "meta-llama/llama-3.1-8b-instruct": "llama-3.1-8b",
    "mistralai/mistral-7b-instruct-v0.2": "mistral-7b", "mistral-7b-instruct-v0.2": "mistral-7b",
    "qwen/qwen3-14b": "qwen3-14b",
    "ibm-granite/granite-3.1-8b-instruct": "granite-3.1-8b", "ibm-granite/granite-3.1-8b-base": "granite-3.1-8b",
    "meta-llama/meta-llama-3-70b": "llama-3-70b", "llama3-70b": "llama-3-70b",
    "meta-llama/llama-2-70b-hf": "llama-2-70b", "llama2-70b": "llama-2-70b",
    "bigscience/bloom": "bloom-176b", "bloom": "bloom-176b",
    "meta-llama/llama-3.1-70b": "llama-3.1-70b", "meta-llama/llama-3.1-70b-instruct": "llama-3.1-70b",
    "meta-llama/meta-llama-3.1-70b": "llama-3.1-70b", "llama3.1-70b": "llama-3.1-70b",
    "codellama/codellama-34b-hf": "codellama-34b", "codellama/codellama-34b-instruct-hf": "codellama-34b",
    "qwen/qwen3-32b": "qwen3-32b", "qwen/qwen3-30b-a3b-instruct-2507": "qwen3-30b-a3b",
    "mistralai/mixtral-8x7b-v0.1": "mixtral-8x7b", "mistralai/mixtral-8x7b-instruct-v0.1": "mixtral-8x7b",
    # the same shapes by the names their repos had before Meta renamed them (vLLM's bench results and meta.json
    # files still carry them), and the chat/instruct checkpoints of the base presets (identical config shapes)
    "meta-llama/meta-llama-3-8b-instruct": "llama-3-8b", "meta-llama/meta-llama-3-70b-instruct": "llama-3-70b",
    "meta-llama/meta-llama-3.1-8b": "llama-3.1-8b", "meta-llama/meta-llama-3.1-8b-instruct": "llama-3.1-8b",
    "meta-llama/meta-llama-3.1-70b-instruct": "llama-3.1-70b",
    "meta-llama/llama-2-7b-chat-hf": "llama-2-7b", "meta-llama/llama-2-70b-chat-hf": "llama-2-70b",
}


def model(name: str | ModelSpec) -> ModelSpec:
    """The preset called ``name`` (case-insensitive, Hugging Face ids accepted; a ModelSpec passes through), the
    model of a Hugging Face ``config.json`` (a path to it, or to a folder holding one), or a shipped Hugging Face
    id (hub_models.json); an id that is not shipped is refused with what to pass instead.

    A ``-tp<n>`` suffix (then ``-dp<n>``, ``-ep``) on any preset or path gives its parallel variant:
    ``model("llama-3-70b-tp8")``.
    """
    if isinstance(name, ModelSpec):
        return name
    text = str(name).strip()
    key = _ALIASES.get(text.lower(), text.lower())
    if key in MODELS:
        return MODELS[key]
    if hf_config.looks_like_path(text):
        return from_config(text)
    if hub_models.shipped(text):
        return from_hub(hub_models.shipped(text))
    match = re.fullmatch(r"(.+?)(?:-tp(\d+))?(?:-dp(\d+))?(-ep)?", text)
    if match and any(match.groups()[1:]):
        base, tp, dp, ep = match.groups()
        if hf_config.looks_like_path(base):
            spec = from_config(base)
        elif hub_models.shipped(base):
            spec = from_hub(hub_models.shipped(base))
        else:
            spec = MODELS.get(_ALIASES.get(base.lower(), base.lower()))
        if spec is not None:
            return spec.with_parallel(tp=int(tp or 1), dp=int(dp or 1), expert_parallel=bool(ep))
    if hub_models.looks_like_hub_id(text):
        raise ValueError(hub_models.not_shipped(text))
    raise ValueError(f"unknown model {name!r}; valid models: {', '.join(sorted(MODELS))} "
                     f"(append -tp<n> for tensor parallelism), or the path of a Hugging Face config.json")


def from_config(path: str | Path) -> ModelSpec:
    """The model of a Hugging Face ``config.json`` (or a folder holding one), named by the path as given; its
    ``params`` is the count its shape implies (norms and biases included). Read once per file version."""
    file = hf_config.config_file(path)
    stat = file.stat()
    return _from_config(str(path).strip().rstrip("/"), str(file.resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=None)
def from_hub(hub_id: str) -> ModelSpec:
    """The model of a shipped Hugging Face id (hub_models.json), built once."""
    fields = hub_models.hub_fields(hub_id)
    try:
        spec = ModelSpec(params=1, **fields)
    except ValueError as e:
        raise ValueError(f"hub model {hub_id}: {e}") from None
    return replace(spec, params=spec.shape_params + spec.norm_params)


@lru_cache(maxsize=64)
def _from_config(name: str, file: str, mtime_ns: int, size: int) -> ModelSpec:
    fields = hf_config.spec_fields(file, name=name)
    try:
        spec = ModelSpec(params=1, **fields)
    except ValueError as e:
        raise ValueError(f"{file}: {e}") from None
    return replace(spec, params=spec.shape_params + spec.norm_params)

"""Model presets: the transformer shapes a batch-time and memory model needs, from public model cards."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer served with tensor parallelism ``tp`` (per-GPU figures divide by it).

    ``ffn`` is the MLP intermediate size; ``gated_mlp`` means three FFN matrices (SwiGLU), else two.
    ``params`` is the published parameter count (embedding and LM head included once each, or once when
    ``tied_embeddings``).
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

    def __post_init__(self):
        for field_name in ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "params",
                           "dtype_bytes", "tp", "max_model_len"):
            value = getattr(self, field_name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"model {self.name!r}: {field_name} must be a positive int, got {value!r}")
        if self.heads % self.kv_heads:
            raise ValueError(f"model {self.name!r}: heads ({self.heads}) must be a multiple of kv_heads "
                             f"({self.kv_heads})")
        if self.heads % self.tp:
            raise ValueError(f"model {self.name!r}: tp={self.tp} must divide the {self.heads} attention heads")
        if self.kv_heads % self.tp and self.tp % self.kv_heads:
            raise ValueError(f"model {self.name!r}: tp={self.tp} must divide kv_heads={self.kv_heads} or be a "
                             f"multiple of it")

    # --- shapes -------------------------------------------------------------------------------------------
    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def layer_linear_params(self) -> int:
        """Weights of one layer's matrices: QKV, attention output, and the MLP."""
        attention = self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        return attention + (3 if self.gated_mlp else 2) * self.hidden * self.ffn

    @property
    def shape_params(self) -> int:
        """Parameter count implied by the shape (norms ignored); checks ``params`` against the card."""
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * self.layer_linear_params + embeddings

    # --- memory -------------------------------------------------------------------------------------------
    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token in every layer, whole model: 2 · layers · kv_heads · head_dim · dtype_bytes."""
        return 2 * self.layers * self.kv_dim * self.dtype_bytes

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads each GPU holds; with tp > kv_heads every GPU keeps a replica of one head (as vLLM does)."""
        return max(1, self.kv_heads // self.tp)

    @property
    def kv_bytes_per_token_per_gpu(self) -> int:
        return 2 * self.layers * self.kv_heads_per_gpu * self.head_dim * self.dtype_bytes

    @property
    def weight_bytes(self) -> int:
        return self.params * self.dtype_bytes

    @property
    def weight_bytes_per_gpu(self) -> float:
        """Weights are sharded over the tp GPUs (vLLM shards the embedding and LM head too)."""
        return self.weight_bytes / self.tp

    # --- compute ------------------------------------------------------------------------------------------
    @property
    def linear_flops_per_token(self) -> int:
        """FLOPs of the per-layer matrices for one token, all layers, whole model (LM head excluded)."""
        return 2 * self.layers * self.layer_linear_params

    @property
    def lm_head_flops_per_token(self) -> int:
        return 2 * self.hidden * self.vocab

    def attention_flops(self, new_tokens: int, context: int = 0) -> float:
        """Causal attention FLOPs (QKᵀ and PV) of ``new_tokens`` queries over ``context`` cached tokens plus
        themselves, all layers, whole model: 4 · layers · heads · head_dim · (new·context + new·(new+1)/2)."""
        pairs = new_tokens * context + new_tokens * (new_tokens + 1) / 2
        return 4.0 * self.layers * self.q_dim * pairs

    # --- variants -----------------------------------------------------------------------------------------
    @property
    def base_name(self) -> str:
        return re.sub(r"-tp\d+$", "", self.name)

    def with_tp(self, tp: int) -> "ModelSpec":
        """The same model sharded over ``tp`` GPUs, named ``<base>-tp<n>`` (``<base>`` for tp=1)."""
        name = self.base_name if tp == 1 else f"{self.base_name}-tp{tp}"
        return replace(self, name=name, tp=tp)


_LLAMA3_8B = dict(layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256,
                  params=8_030_261_248)
_LLAMA3_70B = dict(layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672, vocab=128256,
                   params=70_553_706_496, max_model_len=8192)
_LLAMA3_70B_SOURCE = ("meta-llama/Meta-Llama-3-70B config.json (Hugging Face model card): 80 layers, hidden 8192, "
                      "64 heads, 8 KV heads, head_dim 128, intermediate 28672, vocab 128256, 8k context; 70.6B "
                      "parameters")

MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    ModelSpec(name="llama-2-7b", layers=32, hidden=4096, heads=32, kv_heads=32, head_dim=128, ffn=11008,
              vocab=32000, params=6_738_415_616, max_model_len=4096,
              source="meta-llama/Llama-2-7b-hf config.json (Hugging Face model card): 32 layers, hidden 4096, "
                     "32 heads (no GQA), head_dim 128, intermediate 11008, vocab 32000, 4k context; 6.74B "
                     "parameters"),
    ModelSpec(name="llama-3-8b", **_LLAMA3_8B, max_model_len=8192,
              source="meta-llama/Meta-Llama-3-8B config.json (Hugging Face model card): 32 layers, hidden 4096, "
                     "32 heads, 8 KV heads, head_dim 128, intermediate 14336, vocab 128256, 8k context; 8.03B "
                     "parameters"),
    ModelSpec(name="llama-3.1-8b", **_LLAMA3_8B, max_model_len=131072,
              source="meta-llama/Llama-3.1-8B config.json (Hugging Face model card): Llama-3-8B's shape with "
                     "a 128k context; 8.03B parameters. The model of seed 002 (on A800)"),
    ModelSpec(name="mistral-7b", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336,
              vocab=32000, params=7_241_732_096, max_model_len=32768,
              source="mistralai/Mistral-7B-Instruct-v0.2 config.json (Hugging Face model card): 32 layers, "
                     "hidden 4096, 32 heads, 8 KV heads, head_dim 128, intermediate 14336, vocab 32000, 32k "
                     "context; 7.24B parameters. The model of seed 000 (on RTX 6000 Ada)"),
    ModelSpec(name="qwen3-14b", layers=40, hidden=5120, heads=40, kv_heads=8, head_dim=128, ffn=17408,
              vocab=151936, params=14_768_307_200, max_model_len=40960,
              source="Qwen/Qwen3-14B config.json (Hugging Face model card): 40 layers, hidden 5120, 40 heads, "
                     "8 KV heads, head_dim 128, intermediate 17408, vocab 151936, 40,960 positions; 14.8B "
                     "parameters. The model of seed 002 (on H20)"),
    ModelSpec(name="granite-3.1-8b", layers=40, hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=12800,
              vocab=49155, params=8_170_864_640, max_model_len=131072, tied_embeddings=True,
              source="ibm-granite/granite-3.1-8b-instruct config.json (Hugging Face model card): 40 layers, "
                     "hidden 4096, 32 heads, 8 KV heads, head_dim 128, intermediate 12800, vocab 49155, tied "
                     "embeddings, 128k context; 8.17B parameters. The model of seed 004 (on A100)"),
    ModelSpec(name="llama-2-70b", layers=80, hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672,
              vocab=32000, params=68_976_648_192, max_model_len=4096,
              source="meta-llama/Llama-2-70b-hf config.json (Hugging Face model card): 80 layers, hidden 8192, 64 "
                     "heads, 8 KV heads, head_dim 128, intermediate 28672, vocab 32000, 4k context; 69.0B "
                     "parameters. The model of the Splitwise measurements (Patel et al., ISCA 2024) at TP 2/4/8"),
    ModelSpec(name="bloom-176b", layers=70, hidden=14336, heads=112, kv_heads=112, head_dim=128, ffn=57344,
              vocab=250880, params=176_247_271_424, max_model_len=16384, gated_mlp=False, tied_embeddings=True,
              source="bigscience/bloom config.json (Hugging Face model card): 70 layers, hidden 14336, 112 heads "
                     "(multi-head, no GQA), GELU MLP of 4×hidden = 57344, vocab 250880, tied embeddings, ALiBi "
                     "positions (trained at 2048 tokens; no hard limit, and Splitwise measured prompts of 8192 "
                     "plus 8192 generated, hence 16384 here); 176.2B parameters. The other Splitwise model (TP 8)"),
    ModelSpec(name="llama-3-70b", **_LLAMA3_70B, source=_LLAMA3_70B_SOURCE),
    ModelSpec(name="llama-3-70b-tp4", **_LLAMA3_70B, tp=4,
              source=_LLAMA3_70B_SOURCE + "; served with tensor parallelism 4, as in seed 001 (4×A100) and "
                     "seed 002 (Llama-3.3-70B on 4×H20)"),
)}

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
}


def model(name: str | ModelSpec) -> ModelSpec:
    """The preset called ``name`` (case-insensitive, Hugging Face ids accepted; a ModelSpec passes through).

    A ``-tp<n>`` suffix on any preset gives its tensor-parallel variant: ``model("llama-3-70b-tp8")``.
    """
    if isinstance(name, ModelSpec):
        return name
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key in MODELS:
        return MODELS[key]
    match = re.fullmatch(r"(.+)-tp(\d+)", key)
    if match:
        base = _ALIASES.get(match.group(1), match.group(1))
        if base in MODELS:
            return MODELS[base].with_tp(int(match.group(2)))
    raise ValueError(f"unknown model {name!r}; valid models: {', '.join(sorted(MODELS))} "
                   f"(append -tp<n> for tensor parallelism)")

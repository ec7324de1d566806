"""A Hugging Face ``config.json`` read as the shape facts a :class:`~.models.ModelSpec` is built from.

Families read (``model_type``): Llama, Mistral, Qwen2, Qwen3 (GQA, explicit ``head_dim``, tied embeddings, sliding
window), Mixtral, Qwen2-MoE and Qwen3-MoE (routed experts, experts per token, ``moe_intermediate_size``, shared
experts, dense layers by ``decoder_sparse_step`` / ``mlp_only_layers``), DeepSeek-V2/V3 (MLA: ``kv_lora_rank`` +
``qk_rope_head_dim`` cached per token and layer, q/kv LoRA projections, ``first_k_dense_replace`` /
``moe_layer_freq``, shared experts), Llama-4 (``llama4_text``: routed experts with a shared expert, MoE layers
every ``interleave_moe_layer_step``-th, dense ones of ``intermediate_size_mlp``, chunked local attention as a window),
gpt-oss (routed experts with MXFP4 weights, sliding window on alternate ``layer_types``) and Gemma-3 (``gemma3_text``:
sliding window on 5 of 6 layers, tied embeddings, q/k norm); a multimodal Llama-4, Gemma-3 or Mistral-3 checkpoint
is read as its ``text_config`` (the vision tower is not modelled). Field names and defaults follow transformers' configuration classes and vLLM's
reading of them (``vllm/transformers_utils/model_arch_config_convertor.py``). Weights: bf16/fp16 (fp32 checkpoints
are served in 16 bits, as vLLM's ``dtype="auto"`` does), or fp8 through ``quantization_config`` (MXFP4 for gpt-oss's
experts). DeepSeek's
multi-token-prediction layers (``num_nextn_predict_layers``) are not counted: vLLM runs them only for speculative
decoding.

Everything else is refused with one line naming the file and the field: a vision or audio tower, state-space
layers, an unknown ``model_type``, a missing field, and contradictions (KV heads not dividing heads, more experts
a token than experts, a ``layer_types`` not of one known type a layer, sliding layers without a window), and a
size beyond ``bounds.MODEL_SIZES`` (far above any public model's). This module imports nothing of llmsched's but
those bounds: ``models.model(path)`` builds the spec.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

from ..bounds import MAX_MODEL_SIZE, MODEL_SIZES

DENSE = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text")
MOE = ("mixtral", "qwen2_moe", "qwen3_moe", "llama4_text", "gpt_oss")
MLA = ("deepseek_v2", "deepseek_v3")
SUPPORTED = DENSE + MOE + MLA
# multimodal checkpoints whose text decoder is modelled: the wrapper's model_type -> its text_config's (the vision
# tower is not modelled, and its weights are not counted)
TEXT_OF = {"llama4": "llama4_text", "gemma3": "gemma3_text", "mistral3": "mistral"}
# weight formats by quantization_config.quant_method: bytes a weight of the layers they cover
FP8_METHODS = ("fp8", "fbgemm_fp8")
MXFP4_BYTES = 4.25 / 8      # OCP MX FP4: 4-bit E2M1 values, one 8-bit E8M0 scale per 32 (OCP MX spec v1.0, §5.3)
# fields whose presence means a part llmsched does not model
TOWERS = ("vision_config", "audio_config", "vision_tower", "mm_vision_tower", "visual", "speech_config")
STATE_SPACE = ("ssm_cfg", "mamba_d_state", "mamba_expand", "ssm_state_size", "layers_block_type",
               "hybrid_override_pattern", "attn_layer_indices", "linear_attn_config", "state_size")
STATE_SPACE_TYPES = ("mamba", "mamba2", "falcon_mamba", "jamba", "zamba", "zamba2", "bamba", "nemotron_h",
                     "granitemoehybrid", "plamo2", "lfm2", "rwkv", "rwkv5", "rwkv6", "recurrent_gemma", "xlstm")
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 2, "float": 2}
KV_CACHE_DTYPE_BYTES = {"auto": None, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "fp8_e4m3": 1,
                        "fp8_e5m2": 1, "fp8_inc": 1}
CONFIG_NAME = "config.json"
# layer_types values llmsched models (transformers' names): Llama-4's local layers are chunked, the others' sliding
DEFAULT_LAYER_TYPES = ("full_attention", "sliding_attention")
LAYER_TYPES = {"llama4_text": ("full_attention", "chunked_attention")}


def config_file(path: str | Path) -> Path:
    """The config.json at ``path`` (the file, or a folder holding one)."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / CONFIG_NAME
    if not path.is_file():
        raise ValueError(f"model {path}: no such file; give a Hugging Face config.json or a folder holding one")
    return path


def looks_like_path(name: str) -> bool:
    """Whether a model name is meant as a file: it ends in .json or names an existing file or folder."""
    return name.endswith(".json") or Path(name).expanduser().exists()


def read_config(path: str | Path) -> tuple[dict, Path]:
    """The parsed config.json and its path; a text config nested under ``text_config`` is not unwrapped (a model
    with one has a vision or audio tower, refused by :func:`spec_fields`)."""
    file = config_file(path)
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"{file}: cannot read it ({e}); give a Hugging Face config.json") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{file}: not valid JSON (line {e.lineno}: {e.msg}); give a Hugging Face config.json") \
            from None
    if not isinstance(data, dict):
        raise ValueError(f"{file}: a config.json holds one JSON object of fields, got {type(data).__name__}")
    return data, file


class _Fields:
    """Typed access to one config's fields, every error naming the file and the field."""

    def __init__(self, data: dict, file: Path):
        self.data, self.file = data, file
        self.kind = data.get("model_type")

    def fail(self, field: str, problem: str, fix: str) -> NoReturn:
        raise ValueError(f"{self.file}: {field} {problem}; {fix}")

    def int(self, field: str, default=None, minimum: int = 1) -> int:
        value = self.data.get(field, default)
        if value is None:
            if default is None and field not in self.data:
                self.fail(field, "is missing", f"a {self.kind} config.json needs it (see the model's Hugging Face "
                                                f"config)")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(field, f"= {json.dumps(value)} is not an integer >= {minimum}", "fix the value")
        high = MODEL_SIZES.get(field, MAX_MODEL_SIZE)
        if value > high:
            self.fail(field, f"= {value} is more than {high:,}, far beyond any public model's",
                      "fix the value (a typo or a unit slip)")
        return value

    def optional_int(self, field: str) -> int:
        """0 when absent or null (an optional size, such as q_lora_rank)."""
        value = self.data.get(field)
        return 0 if value is None else self.int(field, minimum=0)

    def bool(self, field: str, default: bool) -> bool:
        value = self.data.get(field, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(field, f"= {json.dumps(value)} is not true or false", "fix the value")
        return value


def spec_fields(path: str | Path, name: str | None = None) -> dict:
    """Keyword arguments of ``ModelSpec`` for the model whose config.json is at ``path`` (``name`` defaults to
    the path as given). ``params`` is the count the shape implies, norms and biases included."""
    data, file = read_config(path)
    return fields_from(data, str(file), name or str(path))


def text_part(data: dict) -> dict:
    """A multimodal checkpoint's text decoder (its ``text_config``, with the wrapper's dtype and quantization
    where the text part names none) for the wrappers in :data:`TEXT_OF`; any other config unchanged."""
    kind, text = data.get("model_type"), data.get("text_config")
    if kind not in TEXT_OF or not isinstance(text, dict):
        return data
    out = {k: v for k, v in data.items() if k in ("torch_dtype", "dtype", "quantization_config")}
    out.update(text)
    out["model_type"] = text.get("model_type") or TEXT_OF[kind]
    if out["model_type"] == "llama4":
        out["model_type"] = "llama4_text"
    return out


def fields_from(data: dict, where: str, name: str) -> dict:
    """``spec_fields`` of a parsed config (``where`` names it in errors: a file, or a shipped hub id)."""
    data = text_part(data)
    f = _Fields(data, where)
    for field in TOWERS + ("text_config",):
        if field in data:
            f.fail(f"field '{field}'", "belongs to a multimodal model (a vision or audio tower), which llmsched "
                                      "does not model", "give the config.json of a text-only decoder")
    for field in STATE_SPACE:
        if field in data:
            f.fail(f"field '{field}'", "describes state-space (recurrent) layers, which llmsched does not model",
                   "give the config.json of an attention-only decoder")
    kind = data.get("model_type")
    if kind is None:
        f.fail("model_type", "is missing", f"a Hugging Face config.json names it; llmsched reads "
                                           f"{', '.join(SUPPORTED)}")
    if kind in STATE_SPACE_TYPES:
        f.fail("model_type", f"= {json.dumps(kind)} has state-space (recurrent) layers, which llmsched does not "
                             f"model", f"give one of {', '.join(SUPPORTED)}")
    if kind not in SUPPORTED:
        f.fail("model_type", f"= {json.dumps(kind)} is not an architecture llmsched can model",
               f"supported: {', '.join(SUPPORTED)}")
    hidden = f.int("hidden_size")
    layers = f.int("num_hidden_layers")
    heads = f.int("num_attention_heads")
    kv_heads = f.int("num_key_value_heads", default=heads)
    if heads % kv_heads:
        f.fail("num_key_value_heads", f"= {kv_heads} does not divide num_attention_heads = {heads}",
               f"grouped-query attention needs a divisor of {heads}")
    out = dict(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
               vocab=f.int("vocab_size"), max_model_len=f.int("max_position_embeddings"),
               tied_embeddings=f.bool("tie_word_embeddings", kind == "gemma3_text"), gated_mlp=True)
    out["dtype_bytes"] = _dtype_bytes(f)
    out["weight_dtype_bytes"], out["expert_weight_bytes"] = _weight_bytes(f, out["dtype_bytes"])
    if kind in MLA:
        out.update(_mla(f, heads))
    else:
        out["head_dim"] = _head_dim(f, hidden, heads)
    out["qkv_bias"] = kind in ("qwen2", "qwen2_moe") and f.bool("qkv_bias", True) or \
        kind in ("llama", "qwen3", "qwen3_moe", "gpt_oss") and f.bool("attention_bias", False)
    out["qk_norm"] = kind in ("qwen3", "qwen3_moe", "gemma3_text")   # Llama-4's qk norm is a weightless L2 norm
    out.update(_sliding_window(f, kind, layers))
    out.update(_experts(f, kind, layers, hidden))
    out["source"] = (f"{where} (model_type {kind}"
                     f"{', ' + '/'.join(data['architectures']) if isinstance(data.get('architectures'), list) else ''}"
                     f"); parameter count from the shape")
    return out


def _dtype_bytes(f: _Fields) -> int:
    dtype = f.data.get("torch_dtype", f.data.get("dtype")) or "bfloat16"
    field = "torch_dtype" if "torch_dtype" in f.data else "dtype"
    if dtype not in DTYPE_BYTES:
        f.fail(field, f"= {json.dumps(dtype)} is not a dtype llmsched serves",
               f"use one of {', '.join(sorted(DTYPE_BYTES))} (fp32 checkpoints are served in 16 bits)")
    return DTYPE_BYTES[dtype]


def _weight_bytes(f: _Fields, dtype_bytes: int) -> tuple[int, float | None]:
    """Bytes a weight of the linear layers, and of the routed experts where they differ (None: the same)."""
    quant = f.data.get("quantization_config")
    if quant is None:
        return dtype_bytes, None
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    if method == "fp8":
        return 1, None
    if method == "compressed-tensors" or method == "compressed_tensors":
        schemes = [g.get("weights", {}) for g in (quant.get("config_groups") or {}).values() if isinstance(g, dict)]
        if schemes and all(s.get("type") == "float" and s.get("num_bits") == 8 for s in schemes):
            return 1, None
    if method == "mxfp4" and f.kind == "gpt_oss":
        # gpt-oss: MXFP4 routed experts; attention, router, embedding and LM head stay 16-bit (its
        # modules_to_not_convert). vLLM's kernels (Marlin, triton_kernels' matmul_ogs) multiply them in BF16.
        return dtype_bytes, MXFP4_BYTES
    f.fail("quantization_config.quant_method", f"= {json.dumps(method)} is not a weight format llmsched models",
           "give a bf16 or fp8 checkpoint's config.json (quant_method \"fp8\", or compressed-tensors with 8-bit "
           "float weights; mxfp4 for gpt-oss's experts)")


def _head_dim(f: _Fields, hidden: int, heads: int) -> int:
    if f.data.get("head_dim"):
        return f.int("head_dim")
    if hidden % heads:
        f.fail("head_dim", f"is missing and hidden_size = {hidden} is not a multiple of num_attention_heads = "
                           f"{heads}", "give head_dim")
    return hidden // heads


def _mla(f: _Fields, heads: int) -> dict:
    kv_lora = f.int("kv_lora_rank")
    rope = f.int("qk_rope_head_dim")
    nope = f.int("qk_nope_head_dim")
    return dict(head_dim=nope + rope, v_head_dim=f.int("v_head_dim"), kv_lora_rank=kv_lora, qk_rope_head_dim=rope,
                q_lora_rank=f.optional_int("q_lora_rank"))


def _layer_types(f: _Fields, kind: str, layers: int) -> list | None:
    """The config's ``layer_types`` checked against ``num_hidden_layers`` and the types llmsched models (None when
    absent): a short list or an unknown type would otherwise be read as full attention and misstate the KV cache."""
    types = f.data.get("layer_types")
    if types is None:
        return None
    known = LAYER_TYPES.get(kind, DEFAULT_LAYER_TYPES)
    if not isinstance(types, list):
        f.fail("layer_types", f"= {json.dumps(types)[:60]} is not a list", f"give one of {', '.join(known)} a layer")
    if len(types) != layers:
        f.fail("layer_types", f"has length {len(types)} but num_hidden_layers = {layers}",
               f"give one type a layer ({layers} entries)")
    for i, t in enumerate(types):
        if t not in known:
            f.fail(f"layer_types[{i}]", f"= {json.dumps(t)[:60]} is not a layer type llmsched models for {kind}",
                   f"use one of {', '.join(known)}")
    return types


def _sliding_window(f: _Fields, kind: str, layers: int) -> dict:
    window = f.data.get("sliding_window")
    types = _layer_types(f, kind, layers)
    if kind == "llama4_text":
        # chunked local attention (attention_chunk_size) on the RoPE layers, global attention on the NoPE ones
        # (every no_rope_layer_interval-th, transformers' Llama4TextConfig); modelled as a sliding window of the
        # chunk: exact up to one chunk of context, an upper bound beyond (a query sees 1..chunk tokens, not chunk)
        window = f.data.get("attention_chunk_size")
        rope = f.data.get("no_rope_layers")
        if isinstance(rope, list) and len(rope) == layers:
            sliding = sum(1 for r in rope if r)
        else:
            interval = f.int("no_rope_layer_interval", default=4)
            sliding = sum(1 for i in range(layers) if (i + 1) % interval)
        return dict(sliding_window=f.int("attention_chunk_size"), sliding_layers=sliding,
                    chunked_local=True) if window else {}
    if types is not None:
        sliding = sum(t == "sliding_attention" for t in types)
        if sliding and window is None:
            f.fail("sliding_window", f"is {'null' if 'sliding_window' in f.data else 'missing'} but layer_types "
                                     f"names {sliding} sliding_attention layers",
                   "give the window in tokens, or mark those layers full_attention")
        if sliding:     # a window of 0 or a non-integer is refused here, not read as no window
            return dict(sliding_window=f.int("sliding_window"), sliding_layers=sliding)
    elif kind == "gemma3_text":
        # transformers' Gemma3TextConfig: every sliding_window_pattern-th layer global, the others sliding
        pattern = f.int("sliding_window_pattern", default=6)
        sliding = layers - layers // pattern
    elif kind in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        # transformers' Qwen2/Qwen3: layers from max_window_layers on slide, and only with use_sliding_window
        if not f.bool("use_sliding_window", False):
            return {}
        sliding = layers - min(layers, f.int("max_window_layers", default=layers, minimum=0))
    elif kind in ("mistral", "mixtral"):
        sliding = layers
    else:
        return {}
    if not window or not sliding:
        return {}
    return dict(sliding_window=f.int("sliding_window"), sliding_layers=sliding)


def _experts(f: _Fields, kind: str, layers: int, hidden: int) -> dict:
    if kind in DENSE:
        return dict(ffn=f.int("intermediate_size"))
    if kind in ("mixtral", "gpt_oss"):
        experts, expert_ffn = f.int("num_local_experts"), f.int("intermediate_size")
        moe = list(range(layers))
        ffn, shared, gate = expert_ffn, 0, False
    elif kind == "llama4_text":
        # transformers' Llama4TextConfig: MoE layers every interleave_moe_layer_step-th (moe_layers where given),
        # each with a shared expert of intermediate_size; the others dense of intermediate_size_mlp
        experts, expert_ffn = f.int("num_local_experts"), f.int("intermediate_size")
        step = f.int("interleave_moe_layer_step", default=1)
        moe = f.data.get("moe_layers") or list(range(step - 1, layers, step))
        if not isinstance(moe, list) or not all(isinstance(i, int) and 0 <= i < layers for i in moe):
            f.fail("moe_layers", f"= {json.dumps(moe)} is not a list of layer indices below {layers}", "fix the list")
        ffn = f.int("intermediate_size_mlp") if len(moe) < layers else expert_ffn
        shared, gate = expert_ffn, False
    elif kind in ("qwen2_moe", "qwen3_moe"):
        experts, expert_ffn = f.int("num_experts"), f.int("moe_intermediate_size")
        step = f.int("decoder_sparse_step", default=1)
        only = f.data.get("mlp_only_layers") or []
        if not isinstance(only, list) or not all(isinstance(i, int) and 0 <= i < layers for i in only):
            f.fail("mlp_only_layers", f"= {json.dumps(only)} is not a list of layer indices below {layers}",
                   "fix the list")
        moe = [i for i in range(layers) if i not in only and (i + 1) % step == 0]
        ffn = f.int("intermediate_size")
        shared = f.int("shared_expert_intermediate_size", minimum=0) if kind == "qwen2_moe" else 0
        gate = shared > 0
    else:  # deepseek_v2 / deepseek_v3
        experts, expert_ffn = f.int("n_routed_experts"), f.int("moe_intermediate_size")
        first = f.int("first_k_dense_replace", default=0, minimum=0)
        freq = f.int("moe_layer_freq", default=1)
        moe = [i for i in range(layers) if i >= first and i % freq == 0]
        ffn = f.int("intermediate_size")
        shared = f.int("n_shared_experts", default=0, minimum=0) * expert_ffn
        gate = False
    k = f.int("num_experts_per_tok")
    if k > experts:
        f.fail("num_experts_per_tok", f"= {k} is more than the {experts} routed experts",
               f"a token picks at most every expert: give at most {experts}")
    if not moe:
        f.fail(*_dense_everywhere(f, kind, layers))
    return dict(ffn=ffn, experts=experts, experts_per_token=k, expert_ffn=expert_ffn, shared_expert_ffn=shared,
                shared_expert_gate=gate, moe_layers=len(moe))


def _dense_everywhere(f: _Fields, kind: str, layers: int) -> tuple[str, str, str]:
    """(field, problem, fix) for a MoE config whose fields leave no layer with experts: the field that does it."""
    if kind in ("qwen2_moe", "qwen3_moe"):
        step = f.int("decoder_sparse_step", default=1)
        if step > layers:
            return ("decoder_sparse_step", f"= {step} leaves no layer with experts (every {step}th of "
                                           f"num_hidden_layers = {layers})", f"give at most {layers}")
        return "mlp_only_layers", "leaves no layer with experts", "drop the experts or keep a MoE layer"
    first = f.int("first_k_dense_replace", default=0, minimum=0)
    if first >= layers:
        return ("first_k_dense_replace", f"= {first} makes all num_hidden_layers = {layers} dense, leaving no layer "
                                         f"with experts", f"give at most {layers - 1}")
    freq = f.int("moe_layer_freq", default=1)
    return ("moe_layer_freq", f"= {freq} leaves no layer with experts after the first {first} dense ones",
            "give a smaller frequency")


def kv_cache_dtype_bytes(kv_cache_dtype: str) -> int | None:
    """Bytes per cached element for vLLM's ``--kv-cache-dtype`` (None for ``auto``: the model's dtype)."""
    key = str(kv_cache_dtype).strip().lower()
    if key not in KV_CACHE_DTYPE_BYTES:
        raise ValueError(f"kv_cache_dtype {kv_cache_dtype!r}: use one of {', '.join(KV_CACHE_DTYPE_BYTES)}")
    return KV_CACHE_DTYPE_BYTES[key]

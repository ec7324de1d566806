"""Models from a Hugging Face config.json: shape arithmetic against published parameter counts, the presets
against their own configs, MoE / MLA / window / dtype fields, and one-line errors for what cannot be modelled."""
import json
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from llmsched.hardware import MODELS, model
from llmsched.hardware.hf_config import kv_cache_dtype_bytes

DATA = Path(__file__).parent / "data"
CONFIGS = DATA / "configs"
RUNS = DATA / "gpu_runs"


# (fixture, published total, published per-token count, whether that count leaves out the input embedding)
PUBLISHED = {
    "mixtral-8x7b": (46.7e9, 12.9e9, False),     # Mistral AI, "Mixtral of experts"
    "deepseek-v3": (671e9, 36.6e9, True),        # DeepSeek-V3 report: 671B, 36.6B activated incl. 0.9B head
    "deepseek-v2-lite": (15.7e9, 2.4e9, True),   # model card: 15.7B total, 2.4B activated
    "codellama-34b": (33.7e9, None, False),      # model card: 33.7B
    "llama-3.1-70b": (70.6e9, None, False),      # model card: 70.6B
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_the_published_ones(name):
    m = model(CONFIGS / name)
    total, active, without_embedding = PUBLISHED[name]
    assert m.params == pytest.approx(total, abs=0.05e9)       # the published figures are rounded to 0.1B
    if active:
        per_token = m.active_params - (m.vocab * m.hidden if without_embedding else 0)
        assert per_token == pytest.approx(active, abs=0.05e9 * (1 + (name == "deepseek-v2-lite")))


@pytest.mark.parametrize("run", ["h200-llama-3.1-8b", "h200-qwen3-30b-a3b", "h200-qwen3-32b"])
def test_presets_are_their_configs(run):
    preset = {"h200-llama-3.1-8b": "llama-3.1-8b", "h200-qwen3-30b-a3b": "qwen3-30b-a3b",
              "h200-qwen3-32b": "qwen3-32b"}[run]
    from_file = asdict(model(RUNS / run))
    from_preset = asdict(MODELS[preset])
    differ = {k for k in from_file if from_file[k] != from_preset[k]} - {"name", "source"}
    assert differ == set(), differ
    assert model(RUNS / run).params == MODELS[preset].params


@pytest.mark.parametrize("name", ["codellama-34b", "llama-3.1-70b", "mixtral-8x7b"])
def test_new_presets_match_their_fixture_configs(name):
    a, b = asdict(model(CONFIGS / name)), asdict(MODELS[name])
    assert {k for k in a if a[k] != b[k]} - {"name", "source"} == set()


def test_moe_fields():
    q = MODELS["qwen3-30b-a3b"]
    assert (q.experts, q.experts_per_token, q.expert_ffn, q.moe_layers, q.dense_layers) == (128, 8, 768, 48, 0)
    v3 = model(CONFIGS / "deepseek-v3")
    assert (v3.experts, v3.experts_per_token, v3.moe_layers, v3.dense_layers) == (256, 8, 58, 3)  # first_k_dense 3
    assert v3.shared_expert_ffn == 2048 and v3.ffn == 18432
    lite = model(CONFIGS / "deepseek-v2-lite")
    assert (lite.moe_layers, lite.shared_expert_ffn, lite.q_lora_rank) == (26, 2 * 1408, 0)
    mix = MODELS["mixtral-8x7b"]
    assert (mix.experts, mix.experts_per_token, mix.expert_ffn, mix.shared_expert_ffn) == (8, 2, 14336, 0)


def test_mla_kv_cache_is_the_latent():
    v3 = model(CONFIGS / "deepseek-v3")
    # vLLM caches kv_lora_rank + qk_rope_head_dim = 576 elements a token and layer, one 'head' every GPU keeps
    assert v3.kv_bytes_per_token == 61 * (512 + 64) * 2
    assert v3.with_tp(8).kv_bytes_per_token_per_gpu == v3.kv_bytes_per_token
    assert (v3.head_dim, v3.v_head_dim) == (192, 128)
    assert replace(v3, kv_dtype_bytes=1).kv_bytes_per_token == 61 * 576


def test_fp8_weights_and_kv_dtype():
    v3 = model(CONFIGS / "deepseek-v3")            # quantization_config: fp8
    assert v3.weight_dtype_bytes == 1 and v3.dtype_bytes == 2
    embeddings = 2 * v3.vocab * v3.hidden
    assert v3.weight_bytes == v3.params + embeddings     # fp8 everywhere but the embedding and LM head
    assert kv_cache_dtype_bytes("fp8") == 1 and kv_cache_dtype_bytes("auto") is None
    with pytest.raises(ValueError, match="kv_cache_dtype 'int3'"):
        kv_cache_dtype_bytes("int3")


def write(tmp_path, **fields) -> Path:
    base = json.loads((RUNS / "h200-llama-3.1-8b" / "config.json").read_text())
    base.update(fields)
    for k in [k for k, v in fields.items() if v is None]:
        base.pop(k)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(base))
    return path


def test_sliding_window_per_family(tmp_path):
    mistral = model(write(tmp_path, model_type="mistral", sliding_window=4096))
    assert (mistral.sliding_window, mistral.sliding_layers) == (4096, 32)
    (tmp_path / "q").mkdir()
    qwen = model(write(tmp_path / "q", model_type="qwen2", sliding_window=4096, use_sliding_window=False))
    assert qwen.sliding_window == 0     # Qwen2 slides only with use_sliding_window
    (tmp_path / "t").mkdir()
    typed = model(write(tmp_path / "t", model_type="qwen3", sliding_window=1024,
                        layer_types=["sliding_attention", "full_attention"] * 16))
    assert (typed.sliding_window, typed.sliding_layers) == (1024, 16)


def test_a_folder_and_its_file_are_the_same_model_and_read_once():
    assert model(RUNS / "h200-qwen3-32b") is model(RUNS / "h200-qwen3-32b")
    assert asdict(model(RUNS / "h200-qwen3-32b")) == {**asdict(model(RUNS / "h200-qwen3-32b" / "config.json")),
                                                       "name": str(RUNS / "h200-qwen3-32b")}
    tp2 = model(f"{RUNS / 'h200-qwen3-32b'}-tp2")
    assert tp2.tp == 2 and tp2.base_name == str(RUNS / "h200-qwen3-32b")
    dp = model("qwen3-30b-a3b-dp2-ep")
    assert (dp.tp, dp.dp, dp.expert_parallel, dp.name) == (1, 2, True, "qwen3-30b-a3b-dp2-ep")
    assert dp.with_parallel(dp=1, expert_parallel=False) == MODELS["qwen3-30b-a3b"]


def test_expert_weights_are_spread_over_the_moe_group():
    q = MODELS["qwen3-30b-a3b"]
    experts = q.routed_expert_params * 2
    dp2 = q.with_parallel(dp=2, expert_parallel=True)
    assert dp2.weight_bytes_per_gpu == pytest.approx(q.weight_bytes - experts / 2)
    assert q.with_tp(2).weight_bytes_per_gpu == pytest.approx(q.weight_bytes / 2)


def test_distinct_experts_follow_the_occupancy_formula():
    q = MODELS["qwen3-30b-a3b"]
    assert q.expected_active_experts(1) == pytest.approx(8)
    assert q.expected_active_experts(10_000) == pytest.approx(128)
    values = [q.expected_active_experts(t) for t in (1, 2, 4, 16, 64, 256)]
    assert values == sorted(values)
    # against uniform routing itself: each token draws 8 distinct experts of 128
    rng = np.random.default_rng(0)
    for tokens in (1, 3, 10, 40):
        counts = [len({e for _ in range(tokens) for e in rng.choice(128, 8, replace=False)}) for _ in range(400)]
        assert np.mean(counts) == pytest.approx(q.expected_active_experts(tokens), rel=0.02)


@pytest.mark.parametrize("fields, expect", [
    ({"vision_config": {"hidden_size": 1024}}, ["field 'vision_config'", "multimodal"]),
    ({"model_type": "mamba"}, ["model_type = \"mamba\"", "state-space"]),
    ({"layers_block_type": ["mamba", "attention"]}, ["field 'layers_block_type'", "state-space"]),
    ({"model_type": "falcon"}, ["model_type = \"falcon\"", "supported: llama"]),
    ({"model_type": None}, ["model_type is missing"]),
    ({"hidden_size": None}, ["hidden_size is missing"]),
    ({"num_key_value_heads": 5}, ["num_key_value_heads = 5 does not divide num_attention_heads = 32"]),
    ({"num_hidden_layers": 0}, ["num_hidden_layers = 0 is not an integer >= 1"]),
    ({"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 9},
     ["num_experts_per_tok = 9 is more than the 8 routed experts"]),
    ({"quantization_config": {"quant_method": "awq"}}, ["quantization_config.quant_method = \"awq\""]),
    ({"torch_dtype": "int8"}, ["torch_dtype = \"int8\""]),
])
def test_bad_configs_get_one_line_naming_file_and_field(tmp_path, fields, expect):
    path = write(tmp_path, **fields)
    with pytest.raises(ValueError) as info:
        model(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    for want in expect:
        assert want in message


def test_tp_that_does_not_divide_the_heads_names_the_file_and_the_fix():
    with pytest.raises(ValueError, match=r"h200-qwen3-32b.*tp=3 must divide the 64 attention heads; use tp in "
                                         r"1, 2, 4, 8, 16, 32, 64"):
        model(RUNS / "h200-qwen3-32b").with_tp(3)
    spec = replace(model(RUNS / "h200-qwen3-32b"), heads=12, kv_heads=4)
    with pytest.raises(ValueError, match="tp=6 must divide kv_heads=4 or be a multiple of it; use tp in 1, 2, 4"):
        spec.with_tp(6)

"""Hub ids added to llmsched/hardware/hub_models.json on 2026-12-01: each resolves to the shape its config.json gives
and to the parameter count its model card publishes."""
import pytest

from llmsched.hardware.hub_models import hub_table
from llmsched.hardware.models import model

# id: (layers, hidden, heads, kv_heads, head_dim, kv_bytes_per_token, tied embeddings, qkv bias, published params (B))
SHAPES = {
    "meta-llama/Llama-3.1-405B-Instruct": (126, 16384, 128, 8, 128, 516_096, False, False, 405.85),
    "Qwen/Qwen3-0.6B": (28, 1024, 16, 8, 128, 114_688, True, False, 0.6),
    "Qwen/Qwen2.5-0.5B-Instruct": (24, 896, 14, 2, 64, 12_288, True, True, 0.49),
    "Qwen/Qwen2.5-1.5B-Instruct": (28, 1536, 12, 2, 128, 28_672, True, True, 1.54),
    "Qwen/Qwen2.5-3B-Instruct": (36, 2048, 16, 2, 128, 36_864, True, True, 3.09),
    "Qwen/QwQ-32B": (64, 5120, 40, 8, 128, 262_144, False, True, 32.5),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": (28, 3584, 28, 4, 128, 57_344, False, True, 7.62),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B": (64, 5120, 40, 8, 128, 262_144, False, True, 32.5),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-8B": (32, 4096, 32, 8, 128, 131_072, False, False, 8.03),
    "deepseek-ai/DeepSeek-R1-Distill-Llama-70B": (80, 8192, 64, 8, 128, 327_680, False, False, 70.6),
    "mistralai/Mistral-7B-Instruct-v0.3": (32, 4096, 32, 8, 128, 131_072, False, False, 7.25),
}


@pytest.mark.parametrize("hub_id", sorted(SHAPES))
def test_added_id_resolves_to_its_config_shape(hub_id):
    layers, hidden, heads, kv_heads, head_dim, kv_bytes, tied, qkv_bias, billions = SHAPES[hub_id]
    entry = hub_table()[hub_id]
    assert entry["source"] == f"https://huggingface.co/{hub_id}/blob/main/config.json"
    assert entry["checked"] == "2026-12-01" and entry["read_from"].startswith("https://")
    spec = model(hub_id)
    assert spec.name == hub_id and entry["source"] in spec.source
    assert (spec.layers, spec.hidden, spec.heads, spec.kv_heads, spec.head_dim) == \
        (layers, hidden, heads, kv_heads, head_dim)
    assert spec.kv_bytes_per_token == kv_bytes == 2 * layers * kv_heads * head_dim * 2   # K and V, bf16
    assert (spec.tied_embeddings, spec.qkv_bias, spec.is_moe, spec.sliding_window) == (tied, qkv_bias, False, 0)
    assert spec.params / 1e9 == pytest.approx(billions, rel=0.03)


def test_context_lengths_and_details_read_from_the_configs():
    assert model("Qwen/Qwen3-0.6B").qk_norm and model("Qwen/Qwen3-0.6B").max_model_len == 40960
    assert model("Qwen/QwQ-32B").max_model_len == 131072                 # QwQ's 128k, not Qwen2.5-32B's 32k
    assert model("mistralai/Mistral-7B-Instruct-v0.3").vocab == 32768     # v0.3's extended vocabulary
    assert model("deepseek-ai/DeepSeek-R1-Distill-Llama-70B").ffn == 28672
    for hub_id in ("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-3B-Instruct"):
        assert model(hub_id).max_model_len == 32768


def test_presets_keep_their_own_ids():
    """Qwen3-14B and Qwen3-32B stand for presets and are not duplicated in the hub table."""
    table = {k.lower() for k in hub_table()}
    for preset_id in ("Qwen/Qwen3-14B", "Qwen/Qwen3-32B"):
        assert preset_id.lower() not in table
        model(preset_id)

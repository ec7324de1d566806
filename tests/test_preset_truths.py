"""The shipped GPU and model presets against their public sources: datasheet figures per GPU, config.json facts per
model, and the quantities derived from them (weights against published parameter counts, KV bytes a token,
parameters a token for MoE) against what the model cards publish. A figure changed here changes every run on it."""
import json

import pytest

from llmsched.hardware.gpus import GPUS, GiB
from llmsched.hardware.hub_models import hub_table
from llmsched.hardware.models import MODELS, model

# Vendor datasheets (dense tensor rates: the "with sparsity" figure halved where the sheet gives only that one):
# name: (BF16 TFLOP/s, FP8 TFLOP/s or 0, memory GB/s, memory GB, SMs or CUs, GPU link GB/s, host PCIe GB/s)
DATASHEETS = {
    "a100": (312, 0, 2039, 80, 108, 600, 64),            # A100 80GB SXM datasheet; GA100 whitepaper (108 SMs)
    "a100-pcie": (312, 0, 1935, 80, 108, 64, 64),        # A100 80GB PCIe datasheet
    "h100": (989, 1979, 3350, 80, 132, 900, 128),        # H100 SXM datasheet: 1,979 / 3,958 with sparsity
    "h200": (989, 1979, 4800, 141, 132, 900, 128),       # H200 SXM datasheet
    "h100-pcie": (756, 1513, 2000, 80, 114, 128, 128),   # H100 PCIe datasheet: 1,513 / 3,026 with sparsity
    "b200": (2250, 4500, 8000, 180, 148, 1800, 128),     # HGX B200 datasheet, per GPU: 4.5 / 9 PF with sparsity
    "a800": (312, 0, 1935, 80, 108, 400, 64),            # A800 80GB PCIe datasheet (NVLink bridge 400 GB/s)
    "h20": (148, 296, 4000, 96, 78, 900, 128),           # HGX H20 as published for the China market
    "l20": (119.5, 239, 864, 48, 92, 64, 64),            # L20 product brief (AD102, 11,776 CUDA cores = 92 SMs)
    "l4": (121, 242.5, 300, 24, 58, 64, 64),             # L4 datasheet: 242 / 485 with sparsity
    "l40s": (362.05, 733, 864, 48, 142, 64, 64),         # L40S datasheet: BF16 362.05, FP8 733 dense
    "rtx-6000-ada": (364.2, 728.5, 960, 48, 142, 64, 64),  # RTX 6000 Ada datasheet, Ada whitepaper appendix
    "rtx-4090": (165.2, 330.3, 1008, 24, 128, 64, 64),   # Ada whitepaper appendix, FP32 accumulate
    "rtx-pro-6000": (503.8, 1007.6, 1792, 96, 188, 128, 128),  # RTX Blackwell whitepaper: 4,000 FP4 TOPS sparse
    "mi300x": (1307.4, 2614.9, 5300, 192, 304, 896, 128),  # AMD Instinct MI300X data sheet: 7 x 128 GB/s IF
    "a100-40gb": (312, 0, 1555, 40, 108, 600, 64),       # A100 40GB SXM datasheet
    "h100-nvl": (835.5, 1670.5, 3900, 94, 132, 128, 128),  # H100 NVL datasheet: 1,671 / 3,341 with sparsity
    "l40": (181.05, 362, 864, 48, 142, 64, 64),          # L40 datasheet: BF16 181.05, FP8 362 dense
}


def test_every_gpu_preset_has_its_datasheet_row():
    assert set(DATASHEETS) == set(GPUS)


@pytest.mark.parametrize("name", sorted(DATASHEETS))
def test_gpu_figures_are_the_datasheets(name):
    g, (bf16, fp8, mem_bw, mem_gb, sms, link, host) = GPUS[name], DATASHEETS[name]
    assert g.flops == pytest.approx(bf16 * 1e12, rel=1e-4)
    assert g.fp8_flops == pytest.approx(fp8 * 1e12, rel=1e-4)
    assert g.mem_bw == pytest.approx(mem_bw * 1e9) and g.mem_bytes == mem_gb * GiB
    assert (g.sms, g.interconnect_bw, g.host_bw) == (sms, link * 1e9, host * 1e9)
    assert (g.interconnect == "pcie") == (g.interconnect_bw == g.host_bw)   # no GPU link: all-reduce over PCIe


# Hugging Face config.json facts of each preset: (layers, hidden, heads, kv_heads, head_dim, ffn, vocab,
# max_position_embeddings, tie_word_embeddings)
CONFIGS = {
    "llama-2-7b": (32, 4096, 32, 32, 128, 11008, 32000, 4096, False),
    "llama-3-8b": (32, 4096, 32, 8, 128, 14336, 128256, 8192, False),
    "llama-3.1-8b": (32, 4096, 32, 8, 128, 14336, 128256, 131072, False),
    "mistral-7b": (32, 4096, 32, 8, 128, 14336, 32000, 32768, False),          # Instruct-v0.2: no sliding window
    "qwen3-14b": (40, 5120, 40, 8, 128, 17408, 151936, 40960, False),
    "granite-3.1-8b": (40, 4096, 32, 8, 128, 12800, 49155, 131072, True),
    "llama-2-70b": (80, 8192, 64, 8, 128, 28672, 32000, 4096, False),
    "bloom-176b": (70, 14336, 112, 112, 128, 57344, 250880, 16384, True),       # 16384: Splitwise's, not config
    "llama-3-70b": (80, 8192, 64, 8, 128, 28672, 128256, 8192, False),
    "llama-3-70b-tp4": (80, 8192, 64, 8, 128, 28672, 128256, 8192, False),
    "llama-3.1-70b": (80, 8192, 64, 8, 128, 28672, 128256, 131072, False),
    "codellama-34b": (48, 8192, 64, 8, 128, 22016, 32000, 16384, False),
    "qwen3-32b": (64, 5120, 64, 8, 128, 25600, 151936, 40960, False),
    "qwen3-30b-a3b": (48, 2048, 32, 4, 128, 6144, 151936, 262144, False),       # Instruct-2507
    "mixtral-8x7b": (32, 4096, 32, 8, 128, 14336, 32000, 32768, False),
}
# parameter counts as the checkpoints hold them (Hugging Face safetensors totals)
PUBLISHED_PARAMS = {
    "llama-2-7b": 6_738_415_616, "llama-3-8b": 8_030_261_248, "llama-3.1-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096, "qwen3-14b": 14_768_307_200, "llama-2-70b": 68_976_648_192,
    "llama-3-70b": 70_553_706_496, "llama-3-70b-tp4": 70_553_706_496, "llama-3.1-70b": 70_553_706_496,
    "codellama-34b": 33_743_970_304, "qwen3-32b": 32_762_123_264, "qwen3-30b-a3b": 30_532_122_624,
    "mixtral-8x7b": 46_702_792_704, "bloom-176b": 176_247_271_424,
}


def test_every_model_preset_has_its_config_row():
    assert set(CONFIGS) == set(MODELS)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_model_presets_are_their_config_json(name):
    m = MODELS[name]
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.ffn, m.vocab, m.max_model_len,
            m.tied_embeddings) == CONFIGS[name]


@pytest.mark.parametrize("name", sorted(set(MODELS) - {"bloom-176b"}))
def test_preset_params_are_their_shape_with_norms_exactly(name):
    """Every RMSNorm decoder's count is its matrices, embeddings and norms to the parameter: a preset whose count
    is another checkpoint's (Granite-3.3's larger vocab) or whose shape misses a part (Qwen3's q/k norms) fails."""
    m = MODELS[name]
    assert m.params == m.shape_params + m.norm_params
    if name in PUBLISHED_PARAMS:
        assert m.params == PUBLISHED_PARAMS[name]


def test_bloom_params_are_its_shape_with_biases_and_layernorms():
    """BLOOM: biases on every linear layer (QKV 3h, output h, MLP 4h + h) and LayerNorms with a bias (two a
    layer, one after the embedding, one at the end): 13h a layer and 4h more (Le Scao et al., "BLOOM: A
    176B-Parameter Open-Access Multilingual Language Model", 2022, §3.2 Model Architecture)."""
    m = MODELS["bloom-176b"]
    assert m.shape_params + 13 * m.hidden * m.layers + 4 * m.hidden == m.params == PUBLISHED_PARAMS["bloom-176b"]


def test_granite_is_3_1s_vocab_not_3_3s():
    g = MODELS["granite-3.1-8b"]
    assert g.params == 8_170_848_256 and 8_170_864_640 - g.params == 4 * g.hidden   # 3.3: vocab 49159


def test_qwen3_presets_carry_their_q_k_norms():
    assert all(MODELS[n].qk_norm for n in ("qwen3-14b", "qwen3-32b", "qwen3-30b-a3b"))


# KV bytes a token, whole model, bf16: 2 (K and V) x layers x kv_heads x head_dim x 2 bytes
@pytest.mark.parametrize("name, kib", [("llama-2-7b", 512), ("llama-3-8b", 128), ("mistral-7b", 128),
                                       ("qwen3-14b", 160), ("granite-3.1-8b", 160), ("llama-2-70b", 320),
                                       ("codellama-34b", 192), ("qwen3-32b", 256), ("qwen3-30b-a3b", 96),
                                       ("mixtral-8x7b", 128), ("bloom-176b", 3920)])
def test_kv_bytes_a_token(name, kib):
    m = MODELS[name]
    assert m.kv_bytes_per_token == 2 * m.layers * m.kv_heads * m.head_dim * 2 == kib * 1024


def test_moe_parameters_a_token_are_the_published_ones():
    # Mistral AI, "Mixtral of experts": 12.9B a token; Qwen3-30B-A3B card: 3.3B activated
    assert MODELS["mixtral-8x7b"].active_params / 1e9 == pytest.approx(12.9, abs=0.05)
    assert MODELS["qwen3-30b-a3b"].active_params / 1e9 == pytest.approx(3.3, abs=0.06)
    # the FLOPs a token are twice the matrices it runs through (embedding lookup and LM head apart)
    q = MODELS["qwen3-30b-a3b"]
    assert q.linear_flops_per_token == 2 * (q.active_params - 2 * q.vocab * q.hidden)


# Hugging Face safetensors totals of shipped hub ids whose checkpoints hold only the text decoder
HUB_PARAMS = {
    "meta-llama/Llama-3.3-70B-Instruct": 70_553_706_496, "meta-llama/Llama-3.2-3B-Instruct": 3_212_749_824,
    "meta-llama/Llama-3.2-1B-Instruct": 1_235_814_400, "Qwen/Qwen3-8B": 8_190_735_360, "Qwen/Qwen3-4B": 4_022_468_096,
    "Qwen/Qwen3-235B-A22B": 235_093_634_560, "Qwen/Qwen3-30B-A3B": 30_532_122_624,
    "Qwen/Qwen2.5-7B-Instruct": 7_615_616_512, "Qwen/Qwen2.5-14B-Instruct": 14_770_033_664,
    "Qwen/Qwen2.5-32B-Instruct": 32_763_876_352, "Qwen/Qwen2.5-72B-Instruct": 72_706_203_648,
    "mistralai/Mistral-Small-24B-Instruct-2501": 23_572_403_200,
    "mistralai/Mixtral-8x22B-Instruct-v0.1": 140_630_071_296,
}


@pytest.mark.parametrize("hub_id", sorted(HUB_PARAMS))
def test_hub_ids_give_the_checkpoints_parameter_counts(hub_id):
    assert model(hub_id).params == HUB_PARAMS[hub_id]


def test_hub_derived_quantities_match_the_model_cards():
    # gpt-oss-120b & gpt-oss-20b model card (OpenAI, 2025), its parameter table: active parameters count the
    # unembedding, not the embedding
    for hub_id, total, active in (("openai/gpt-oss-20b", 20.91, 3.61), ("openai/gpt-oss-120b", 116.83, 5.13)):
        m = model(hub_id)
        assert m.params / 1e9 == pytest.approx(total, abs=0.05)          # expert biases and sinks not counted
        assert (m.active_params - m.vocab * m.hidden) / 1e9 == pytest.approx(active, abs=0.01)
    v3 = model("deepseek-ai/DeepSeek-V3")   # DeepSeek-V3 technical report: 671B total, 37B activated
    assert v3.params / 1e9 == pytest.approx(671, abs=0.5) and v3.active_params / 1e9 == pytest.approx(37, abs=0.6)
    assert v3.kv_bytes_per_token == v3.layers * (512 + 64) * 2                       # MLA: latent + rope key
    gemma = model("google/gemma-3-1b-it")   # 999,885,952 in the checkpoint: Gemma-3's 2 extra norms a layer
    assert gemma.params + 2 * gemma.hidden * gemma.layers == 999_885_952
    assert (gemma.sliding_window, gemma.sliding_layers) == (512, 22)                # 5 of 6 layers slide


def test_the_original_qwen3_30b_a3b_id_has_its_own_context():
    """Qwen/Qwen3-30B-A3B's config.json gives 40,960 positions; only its Instruct-2507 (the preset) 262,144."""
    original, preset = model("Qwen/Qwen3-30B-A3B"), model("Qwen/Qwen3-30B-A3B-Instruct-2507")
    assert preset is MODELS["qwen3-30b-a3b"] and preset.max_model_len == 262_144
    assert original.name == "Qwen/Qwen3-30B-A3B" and original.max_model_len == 40_960
    differ = {k for k in original.__dict__ if original.__dict__[k] != preset.__dict__[k]}
    assert differ == {"name", "source", "max_model_len"}


def test_every_hub_id_and_its_config_json_give_the_same_spec(tmp_path):
    for hub_id, entry in hub_table().items():
        path = tmp_path / (hub_id.replace("/", "_") + ".json")
        path.write_text(json.dumps(entry["config"]))
        a, b = model(hub_id), model(str(path))
        assert {k: v for k, v in a.__dict__.items() if k not in ("name", "source")} == \
            {k: v for k, v in b.__dict__.items() if k not in ("name", "source")}, hub_id


def test_an_unknown_hub_id_is_one_line_saying_to_pass_its_config_json():
    with pytest.raises(ValueError) as e:
        model("someorg/NotShipped-7B")
    assert "\n" not in str(e.value) and "config.json" in str(e.value) and "someorg/NotShipped-7B" in str(e.value)

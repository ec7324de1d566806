import math
from dataclasses import replace

import pytest

from llmsched.hardware import (GPUS, MODELS, GPUSpec, ModelSpec, gpu, kv_bytes_per_token, kv_capacity_blocks,
                               kv_capacity_tokens, model)
from llmsched.hardware.gpus import GiB


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_presets_are_sane(name):
    m = MODELS[name]
    assert m.name == name and m.source
    # The published parameter count matches the shape (norms ignored) within 0.1%.
    assert m.shape_params == pytest.approx(m.params, rel=1e-3)
    assert m.kv_bytes_per_token == 2 * m.layers * m.kv_heads * m.head_dim * m.dtype_bytes
    assert m.weight_bytes_per_gpu == pytest.approx(m.params * 2 / m.tp)
    assert m.linear_flops_per_token > 0 and m.max_model_len >= 4096


def test_kv_bytes_per_token_match_model_cards():
    assert kv_bytes_per_token("llama-3-8b") == 131072
    assert kv_bytes_per_token("llama-2-7b") == 524288
    assert kv_bytes_per_token("mistral-7b") == 131072
    assert kv_bytes_per_token("qwen3-14b") == 163840
    assert kv_bytes_per_token("llama-3-70b-tp4") == 327680
    assert kv_bytes_per_token("llama-3-70b-tp4", per_gpu=True) == 327680 // 4


@pytest.mark.parametrize("name", sorted(GPUS))
def test_gpu_presets_are_sane(name):
    g = GPUS[name]
    assert g.name == name and g.source
    assert 50e12 <= g.flops <= 5e15
    # FP8 tensor cores run twice the BF16 rate (the L40S datasheet rounds its two figures differently: 362.05, 733)
    assert g.fp8_flops == 0 or g.fp8_flops == pytest.approx(2 * g.flops, rel=0.015)
    assert 250e9 <= g.mem_bw <= 10e12
    assert 16 * GiB <= g.mem_bytes <= 200 * GiB
    assert g.host_bw > 0 and g.interconnect_bw >= g.host_bw / 2 and g.sms > 0
    assert (g.interconnect == "pcie") == (g.interconnect_bw <= g.host_bw)
    for tile in (g.t_row, g.t_col, g.t_red):
        assert tile & (tile - 1) == 0  # powers of two (Bari et al. §1.1)


def test_a100_tiles_follow_seed_000():
    a100 = gpu("a100")
    assert {a100.t_row, a100.t_col} == {128, 256} and a100.t_red == 32


@pytest.mark.parametrize("gpu_name, model_name", [
    (g, m) for g in sorted(GPUS) for m in sorted(MODELS)
    if MODELS[m].weight_bytes_per_gpu < min(40 * GiB, 0.75 * GPUS[g].mem_bytes)])
def test_capacity_positive(model_name, gpu_name):
    tokens = kv_capacity_tokens(model_name, gpu_name)
    assert tokens > 0
    assert kv_capacity_blocks(model_name, gpu_name) == tokens // 16
    assert kv_capacity_blocks(model_name, gpu_name, block_size=32) == tokens // 32


def test_capacity_matches_spec_estimates():
    # Bari et al. §1.7: Mistral-7B on 48 GB ≈ 210–225k tokens; Ao et al. §6: ≈1.2e5 (Llama-2-7B), 4.6e5 (Llama-3-8B).
    assert 200_000 <= kv_capacity_tokens("mistral-7b", "rtx-6000-ada") <= 235_000
    assert 110_000 <= kv_capacity_tokens("llama-2-7b", "a100") <= 125_000
    assert 430_000 <= kv_capacity_tokens("llama-3-8b", "a100") <= 470_000


def test_capacity_grows_with_utilisation_and_shrinks_with_reserve():
    low = kv_capacity_tokens("llama-3-8b", "a100", gpu_memory_utilization=0.8)
    high = kv_capacity_tokens("llama-3-8b", "a100", gpu_memory_utilization=0.95)
    assert low < high
    assert kv_capacity_tokens("llama-3-8b", "a100", activation_reserve_bytes=0) > \
        kv_capacity_tokens("llama-3-8b", "a100", activation_reserve_bytes=8 * GiB)


def test_70b_needs_tensor_parallelism():
    with pytest.raises(ValueError, match=r"does not fit.*llama-3-70b-tp2"):
        kv_capacity_tokens("llama-3-70b", "a100")
    with pytest.raises(ValueError, match="tp4"):
        kv_capacity_tokens("llama-3-70b", "rtx-6000-ada")
    assert kv_capacity_tokens("llama-3-70b-tp4", "a100") > 100_000
    assert kv_capacity_tokens(model("llama-3-70b").with_tp(2), "a100") > 0


def test_memory_bad_input():
    with pytest.raises(ValueError, match="gpu_memory_utilization"):
        kv_capacity_tokens("llama-3-8b", "a100", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError, match="activation_reserve_bytes"):
        kv_capacity_tokens("llama-3-8b", "a100", activation_reserve_bytes=-1)
    with pytest.raises(ValueError, match="block_size"):
        kv_capacity_blocks("llama-3-8b", "a100", block_size=0)


def test_lookups():
    assert model("LLAMA-3-8B") is MODELS["llama-3-8b"]
    assert model("meta-llama/Meta-Llama-3-8B") is MODELS["llama-3-8b"]
    assert model(MODELS["qwen3-14b"]) is MODELS["qwen3-14b"]
    tp8 = model("llama-3-70b-tp8")
    assert tp8.tp == 8 and tp8.name == "llama-3-70b-tp8"
    assert model("llama-3-70b-tp4").with_tp(1).name == "llama-3-70b"
    assert gpu("A100") is GPUS["a100"] and gpu("rtx6000ada") is GPUS["rtx-6000-ada"]
    with pytest.raises(ValueError, match="valid models: .*llama-3-8b"):
        model("gpt-5")
    with pytest.raises(ValueError, match="valid GPUs: .*h100"):
        gpu("tpu-v5")


def test_tensor_parallel_shards():
    m = model("llama-3-70b")
    assert m.with_tp(4).kv_bytes_per_token_per_gpu == m.kv_bytes_per_token // 4
    # tp beyond the 8 KV heads: every GPU keeps one KV head (vLLM replicates them).
    assert m.with_tp(16).kv_heads_per_gpu == 1
    with pytest.raises(ValueError, match="tp=3"):
        m.with_tp(3)


def test_bad_specs_rejected():
    with pytest.raises(ValueError, match="kv_heads"):
        ModelSpec(name="x", layers=2, hidden=64, heads=6, kv_heads=4, head_dim=16, ffn=128, vocab=100, params=1000,
                  max_model_len=128, source="test")
    with pytest.raises(ValueError, match="layers"):
        ModelSpec(name="x", layers=0, hidden=64, heads=4, kv_heads=4, head_dim=16, ffn=128, vocab=100, params=1000,
                  max_model_len=128, source="test")
    with pytest.raises(ValueError, match="flops"):
        GPUSpec("x", flops=-1, mem_bw=1e12, mem_bytes=GiB, host_bw=1e9, interconnect_bw=1e9, sms=1, t_row=128,
                t_col=128, t_red=32, source="test")


def test_attention_flops_causal():
    m = model("llama-3-8b")
    # One token over no context attends to itself: 4·layers·q_dim FLOPs.
    assert m.attention_flops(1, 0) == 4 * m.layers * m.q_dim
    assert m.attention_flops(512, 1024) > m.attention_flops(512, 0) > 0
    assert math.isclose(m.attention_flops(2, 0), 4 * m.layers * m.q_dim * 3)


def test_a_measured_allreduce_bus_bandwidth_replaces_the_link_rate_times_comm_eff(tmp_path):
    from llmsched.batchtime.roofline import RooflineBatchTime
    from llmsched.hardware.gpus import gpu_from_file
    pro = gpu("rtx-pro-6000")
    assert pro.collective_bw(0.7) == pro.allreduce_busbw == 22.2e9       # measured: comm_eff does not apply
    assert gpu("h100").collective_bw(0.7) == 900e9 / 2 * 0.7            # none measured: datasheet x comm_eff
    m = model("qwen3-32b").with_tp(2)
    bt = RooflineBatchTime(m, pro, step_overhead=0.0)
    per_token = bt.decode_time(65, 0) - bt.decode_time(64, 0)
    unmeasured = RooflineBatchTime(m, replace(pro, allreduce_busbw=0.0), step_overhead=0.0)
    # two ring all-reduces a layer, each 2(tp-1)/tp of a token's hidden state per token
    extra = 2 * m.layers * m.hidden * 2 * (1 / 22.2e9 - 1 / (128e9 / 2 * 0.7))
    assert per_token - (unmeasured.decode_time(65, 0) - unmeasured.decode_time(64, 0)) == pytest.approx(extra, rel=1e-6)
    spec = tmp_path / "card.toml"
    spec.write_text("flops = 503.8e12\nmem_bw = 1792e9\nmem_gib = 96\nhost_bw = 128e9\nsms = 188\n"
                    "allreduce_busbw = 20e9\n")
    assert gpu_from_file(spec).collective_bw(0.7) == 20e9

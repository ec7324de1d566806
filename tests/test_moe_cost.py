"""The roofline's terms for mixture-of-experts, MLA and sliding-window models (llmsched/batchtime/architecture.py):
expert FLOPs follow tokens × experts a token, expert weights follow the distinct experts touched, expert
parallelism over data-parallel ranks pays its collectives over the GPUs' link, and a config.json model runs
exactly as its preset twin."""
from dataclasses import replace
from pathlib import Path

import pytest

from llmsched.batchtime import Batch, make_batch_time_model
from llmsched.batchtime.roofline import RooflineBatchTime
from llmsched.experiment import RunConfig, run
from llmsched.hardware import MODELS, gpu, model

DATA = Path(__file__).parent / "data"


def bt(spec, gpu="h200", **params):
    return RooflineBatchTime(spec, gpu, step_overhead=0.0, **params)


def test_dense_models_have_no_architecture_terms():
    assert bt("llama-3-8b").architecture is None
    assert bt("qwen3-32b").architecture is None


def test_expert_flops_follow_tokens_times_experts_per_token():
    q = MODELS["qwen3-30b-a3b"]
    k8, k4 = bt(q).architecture, bt(replace(q, experts_per_token=4)).architecture
    # many tokens: every expert is touched, so the experts' time grows with the FLOPs of T · k
    slope8 = k8.experts(16384) - k8.experts(8192)
    slope4 = k4.experts(16384) - k4.experts(8192)
    assert slope8 == pytest.approx(2 * slope4, rel=0.15)
    assert k8.experts(16384) == pytest.approx(2 * k8.experts(8192), rel=0.1)


def test_expert_weights_follow_the_distinct_experts():
    q = MODELS["qwen3-30b-a3b"]
    terms = bt(q, sharpness=float("inf")).architecture
    one_expert = q.moe_layers * q.expert_params * q.weight_dtype_bytes
    bw = bt(q).gpu.mem_bw * bt(q).mem_eff
    # memory-bound at few tokens: the step reads the weights of E(1-(1-k/E)^T) experts, not k and not E
    for a, b in ((1, 2), (2, 8), (8, 32)):
        more_weights = (q.expected_active_experts(b) - q.expected_active_experts(a)) * one_expert / bw
        assert more_weights < terms.experts(b) - terms.experts(a) < more_weights * 1.1
    assert q.expected_active_experts(1) == pytest.approx(8) and q.expected_active_experts(32) < 128


def test_a_moe_step_costs_less_than_its_dense_equivalent_and_more_than_its_active_part():
    q = MODELS["qwen3-30b-a3b"]
    step = bt(q).decode_time(64, 1024)
    assert step < bt(replace(q, experts=0, experts_per_token=0, expert_ffn=0, moe_layers=0,
                             ffn=q.experts * q.expert_ffn)).decode_time(64, 1024)
    assert step > bt(replace(q, experts=0, experts_per_token=0, expert_ffn=0, moe_layers=0,
                             ffn=q.experts_per_token * q.expert_ffn)).decode_time(64, 1024)


def test_expert_parallelism_over_data_parallel_ranks_pays_its_collectives():
    q = MODELS["qwen3-30b-a3b"]
    single = bt(q, "rtx-pro-6000").architecture
    dp2 = bt(q.with_parallel(dp=2, expert_parallel=True), "rtx-pro-6000").architecture
    a2a = bt(q.with_parallel(dp=2, expert_parallel=True), "rtx-pro-6000", moe_all2all="dispatch_combine").architecture
    nvl = bt(q.with_parallel(dp=2, expert_parallel=True), "h100").architecture
    for tokens in (64, 2048):
        assert dp2.experts(tokens) > 0 and a2a.experts(tokens) > 0
    # the collectives: two per MoE layer over the dp ranks, ring steps (dp-1) each, at the bus bandwidth NCCL
    # was measured to reach among these cards over PCIe
    gather = dp2.experts(2048) - dp2.experts(1024) - (single.experts(4096) - single.experts(2048)) / 2
    link = gpu("rtx-pro-6000").allreduce_busbw
    assert link == 22.2e9
    assert gather == pytest.approx(q.moe_layers * 2 * 1024 * q.hidden * 2 / link, rel=0.2)
    h100_over_pcie = replace(gpu("h100"), name="h100-over-pcie", interconnect_bw=128e9, interconnect="pcie")
    pcie = bt(q.with_parallel(dp=2, expert_parallel=True), h100_over_pcie).architecture
    assert nvl.experts(2048) < pcie.experts(2048)      # the same card, its collectives over PCIe instead of NVLink
    with pytest.raises(ValueError, match="moe_all2all must be one of"):
        bt(q, moe_all2all="nccl")


def test_mla_decode_reads_the_latent_on_every_gpu():
    v3 = model(DATA / "configs" / "deepseek-v3")
    one, eight = bt(v3.with_tp(8)), bt(v3.with_tp(8))
    assert one.decode_sum_only
    extra = eight.decode_time(1, 8192) - eight.decode_time(1, 4096)
    latent = v3.layers * 576 * 2 * 4096 / (eight.gpu.mem_bw * eight.decode_attn_eff)
    flops = v3.layers * 2 * 16 * (2 * 512 + 64) * 4096 / (eight.gpu.flops * eight.attn_compute_eff)
    assert extra == pytest.approx(max(latent, flops), rel=1e-6)


def test_sliding_windows_cap_the_attended_context():
    mistral = replace(MODELS["mistral-7b"], sliding_window=4096, sliding_layers=32)
    windowed, full = bt(mistral), bt(MODELS["mistral-7b"])
    assert not windowed.decode_sum_only and full.decode_sum_only
    assert windowed.step_time(Batch([], [], [16000])) == pytest.approx(windowed.step_time(Batch([], [], [4096])))
    assert full.step_time(Batch([], [], [16000])) > full.step_time(Batch([], [], [4096]))
    assert windowed.prefill_time(2048, 14000) < full.prefill_time(2048, 14000)
    assert windowed.prefill_time(1024) == pytest.approx(full.prefill_time(1024))


def test_fp8_weights_stream_one_byte_and_use_fp8_tensor_cores():
    spec = MODELS["llama-3.1-8b"]
    bf16, fp8 = bt(spec), bt(replace(spec, weight_dtype_bytes=1))
    assert fp8.decode_time(1, 512) < 0.65 * bf16.decode_time(1, 512)
    assert fp8.prefill_time(8192) < 0.75 * bf16.prefill_time(8192)
    a100 = bt(replace(spec, weight_dtype_bytes=1), "a100")       # no FP8 tensor cores: BF16 rate
    assert a100.prefill_time(8192) > 0.9 * bt(spec, "a100").prefill_time(8192)


@pytest.mark.parametrize("preset, path", [("qwen3-30b-a3b", "gpu_runs/h200-qwen3-30b-a3b"),
                                          ("llama-3.1-8b", "gpu_runs/h200-llama-3.1-8b")])
def test_a_config_json_model_runs_exactly_as_its_preset(preset, path):
    common = dict(gpu="rtx-pro-6000", scheduler="vllm-chunked", rate=8.0, num_requests=120, max_num_seqs=128,
                  max_num_batched_tokens=2048)
    a = run(RunConfig(model=preset, **common))
    b = run(RunConfig(model=str(DATA / path), **common))
    assert len(a.steps) == len(b.steps) > 0
    assert list(a.steps.columns()["duration"]) == list(b.steps.columns()["duration"])
    assert list(a.requests.column("finish")) == list(b.requests.column("finish"))


def test_registry_accepts_the_new_parameter():
    m = make_batch_time_model("roofline", "qwen3-30b-a3b-dp2-ep", "rtx-pro-6000", moe_all2all="dispatch_combine")
    assert m.describe()["moe_all2all"] == "dispatch_combine"


def test_the_kernel_count_is_the_calibrated_layers_operators():
    from llmsched.batchtime.architecture import DENSE_LAYER_KERNELS
    from llmsched.batchtime.profiled import LAYER_OPS
    assert DENSE_LAYER_KERNELS == len(LAYER_OPS)


def test_the_throughput_bound_refuses_what_its_decomposition_does_not_cover():
    from llmsched.theory.throughput_bound import busy_time_form
    with pytest.raises(ValueError, match="qwen3-30b-a3b: the bound's decomposition covers dense decoders"):
        busy_time_form(bt("qwen3-30b-a3b"))
    busy_time_form(bt("qwen3-32b"))

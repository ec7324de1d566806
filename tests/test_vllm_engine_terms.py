"""vLLM v1's engine terms: CUDA-graph padding, host work and its overlap, KV sizing, DP balancers, lockstep."""
import json
from pathlib import Path

import numpy as np
import pytest

from llmsched.batchtime import Batch, make_batch_time_model
from llmsched.batchtime.vllm_v1 import VLLMV1BatchTime, cudagraph_capture_sizes
from llmsched.experiment import build_replicas, run
from llmsched.run_config import RunConfig
from llmsched.hardware.gpus import GiB
from llmsched.hardware.vllm_memory import (activation_peak, default_utilization, parse_release,
                                           uses_runner_v2, vllm_kv_budget)
from llmsched.hardware.models import model
from llmsched.request import Request
from llmsched.routing.registry import make_router

RUNS = Path(__file__).parent / "data" / "gpu_runs"


def meta(run: str) -> dict:
    return json.loads((RUNS / run / "meta.json").read_text())


def test_capture_sizes_are_the_ones_vllm_captured_on_the_h200_and_h100():
    for run in ("h200-llama-3.1-8b", "h200-qwen3-32b", "h200-qwen3-30b-a3b", "h100-llama-3.1-8b",
                "h100-llama-3.1-8b-mooncake", "h100-qwen3-30b-a3b-warm"):
        m = meta(run)
        sizes = cudagraph_capture_sizes(m["engine_kwargs"]["max_num_seqs"], m["engine_kwargs"]["max_num_batched_tokens"])
        assert list(sizes) == m["engine_defaults_seen"]["cudagraph_capture_sizes"]


def test_capture_sizes_follow_vllms_rule():
    assert cudagraph_capture_sizes(256, 8192) == tuple([1, 2, 4, *range(8, 256, 8), *range(256, 513, 16)])
    assert cudagraph_capture_sizes(4, 8192) == (1, 2, 4, 8)  # 2 x max_num_seqs
    assert cudagraph_capture_sizes(256, 100)[-1] == 100  # max_num_batched_tokens caps and is captured
    assert cudagraph_capture_sizes(512, 8192, max_capture=1024)[-1] == 1024


def test_padding_runs_the_captured_size():
    inner = make_batch_time_model("roofline", "llama-3.1-8b", "h200", step_overhead=0.0)
    bt = VLLMV1BatchTime(inner, capture_sizes=cudagraph_capture_sizes(128, 2048), cpu_per_seq=0.0)
    assert bt.padding(3) == 1 and bt.padding(9) == 7 and bt.padding(256) == 0 and bt.padding(300) == 0
    ctx = [700] * 9
    assert bt.step_time(Batch([], [], ctx)) == inner.step_time(Batch([], [], ctx + [1] * 7))
    # eager above the largest graph: the GPU model's own time
    big = Batch([1000], [0], [500] * 20)
    assert bt.step_time(big) == inner.step_time(big)
    # padding makes a step longer, never shorter, and steps between two sizes cost the same GPU work
    assert bt.decode_time(9, 700) > inner.decode_time(9, 700)


def test_sum_paths_are_the_same_floats_as_step_time():
    bt = make_batch_time_model("vllm-v1", "llama-3.1-8b", "h200", max_num_seqs=128, max_num_batched_tokens=2048)
    assert bt.decode_sum_only
    for n in (1, 3, 17, 128, 200, 300):
        ctx = [100 + 7 * i for i in range(n)]
        assert bt.decode_sum_time(n, sum(ctx)) == bt.step_time(Batch([], [], ctx))
        assert bt.sum_step_time([37], [5], n, sum(ctx)) == bt.step_time(Batch([37], [5], ctx))
    assert bt.sum_step_time([37], [5], 0, 0) == bt.step_time(Batch([37], [5], []))


def test_host_work_overlaps_with_async_scheduling_and_adds_without():
    inner = make_batch_time_model("roofline", "llama-3.1-8b", "h200", step_overhead=0.0)
    batch = Batch([], [], [1000] * 64)
    gpu = inner.step_time(batch)
    fast_gpu = VLLMV1BatchTime(inner, cpu_step=gpu / 2, cpu_per_seq=0.0)
    assert fast_gpu.step_time(batch) == gpu  # hidden under the GPU's work
    slow_host = VLLMV1BatchTime(inner, cpu_step=2 * gpu, cpu_per_seq=0.0)
    assert slow_host.step_time(batch) == pytest.approx(2 * gpu)  # the host is the bottleneck
    sync = VLLMV1BatchTime(inner, cpu_step=gpu / 2, cpu_per_seq=0.0, async_scheduling=False)
    assert sync.step_time(batch) == pytest.approx(1.5 * gpu)


def test_vllm_v1_replaces_the_rooflines_default_host_overhead():
    plain = make_batch_time_model("roofline", "llama-3.1-8b", "h200")
    bt = make_batch_time_model("vllm-v1", "llama-3.1-8b", "h200", max_num_seqs=128, max_num_batched_tokens=2048)
    assert bt.describe()["gpu_model"]["step_overhead"] == 0.0
    assert bt.decode_time(8, 1000) == pytest.approx(plain.decode_time(8, 1000) - plain.step_overhead, rel=1e-9)


def test_bad_engine_parameters_are_refused():
    with pytest.raises(ValueError, match="gpu_model 'vllm-v1'"):
        make_batch_time_model("vllm-v1", "llama-3.1-8b", "h200", gpu_model="vllm-v1")
    with pytest.raises(ValueError, match="cpu_per_seq"):
        make_batch_time_model("vllm-v1", "llama-3.1-8b", "h200", cpu_per_seq=-1.0)


@pytest.mark.parametrize("run", ["h200-llama-3.1-8b", "h200-qwen3-32b"])
def test_kv_budget_from_vllms_own_figures_is_vllms_cache(run):
    """With the memory vLLM reported, the formula gives the KV cache vLLM allocated, to 0.05 GiB (the MoE run is
    0.3 GiB off: see hardware/vllm_memory.py)."""
    m = meta(run)
    mem = m["memory_gib"]
    total = 150109880320  # torch's total memory of this H200 (h200-step-grid.json)
    requested = total * m["engine_defaults_seen"]["gpu_memory_utilization"]
    kv = requested / GiB - mem["weights"] - mem["non_torch"] - mem["peak_activation"]
    assert kv == pytest.approx(mem["kv_cache_available"], abs=0.05)


def test_activation_peak_estimate_against_vllms_warm_starts():
    """Model Runner V2 (vLLM 0.26's for dense models): the forward's peak, which the in-place sampler's logits stay
    under. Llama-3.1-8B at 2,048 tokens and 128 sequences (0.24 GiB on the H100 started with a warm compile cache)
    and at 8,192 and 1,024 (0.88 GiB, the vllm serve capture), each within 0.05 GiB."""
    for run in ("h100-llama-3.1-8b", "h200-llama-3.1-8b-serve-sharegpt-8"):
        m = meta(run)
        kwargs, peak = m["engine_kwargs"], m["memory_gib"]["peak_activation"]
        est = activation_peak(model("llama-3.1-8b"), kwargs["max_num_batched_tokens"], kwargs["max_num_seqs"]) / GiB
        assert est == pytest.approx(peak, abs=0.05)
    # V1's sampler warm-up (fp32 top-k/top-p, twice) is what grows with the rows
    v1 = activation_peak(model("llama-3.1-8b"), 8192, 1024, runner_v2=False)
    assert v1 > 3 * activation_peak(model("llama-3.1-8b"), 8192, 1024)


def test_kv_budget_versions_runners_and_defaults():
    """Graphs come out of the KV cache from v0.21 (V1 runner), not for dense models on V2 from v0.25.1 until
    v0.29.0 (vllm#49224, vllm#53306), and for every model from then."""
    assert default_utilization("0.19.0") == 0.9 and default_utilization("0.26.0") == 0.92
    assert parse_release("0.25.1") == (0, 25, 1) and parse_release("v0.26") == (0, 26, 0)
    dense, moe = model("llama-3.1-8b"), model("qwen3-30b-a3b")
    assert [uses_runner_v2(dense, v) for v in ("0.23.0", "0.25.0", "0.25.1", "0.26.0", "0.29.0", None)] == \
        [False, False, True, True, True, True]
    assert [uses_runner_v2(moe, v) for v in ("0.26.0", "0.28.1", "0.29.0")] == [False, False, True]

    def budget(spec, version):
        return vllm_kv_budget(spec, "h200", max_num_batched_tokens=2048, max_num_seqs=128,
                              gpu_memory_utilization=0.9, vllm_version=version, capture_sizes=35)

    old, v1, v2, latest = (budget(dense, v) for v in ("0.19.0", "0.23.0", "0.26.0", None))
    assert old.kv_bytes - v1.kv_bytes == v1.cuda_graphs > 0  # graphs subtracted from v0.21 on (V1)
    assert v2.kv_bytes - latest.kv_bytes == latest.cuda_graphs  # V2 subtracts them from v0.29 on
    assert v2.kv_bytes > v1.kv_bytes and "not subtracted" in v2.sources["cuda_graphs"]
    assert "not subtracted" not in budget(moe, "0.26.0").sources["cuda_graphs"]
    assert latest.blocks == latest.tokens // 16 and latest.tokens == latest.kv_bytes // dense.kv_bytes_per_token


def test_a_model_that_does_not_fit_is_a_one_line_error():
    cfg = RunConfig(model="llama-3-70b", gpu="h200", batch_time="vllm-v1", num_requests=5, rate=1.0)
    with pytest.raises(ValueError, match="leaves no KV cache on h200.*raise the tensor parallelism"):
        build_replicas(cfg)


def test_vllm_v1_runs_size_the_kv_cache_as_vllm():
    cfg = RunConfig(model="llama-3.1-8b", gpu="h200", batch_time="vllm-v1", max_num_seqs=128,
                    max_num_batched_tokens=2048, gpu_memory_utilization=0.92)
    rep = build_replicas(cfg)[0]
    budget = vllm_kv_budget("llama-3.1-8b", "h200", max_num_batched_tokens=2048, max_num_seqs=128,
                            gpu_memory_utilization=0.92, capture_sizes=35)
    assert rep.config.num_blocks == budget.blocks


# --- DP ------------------------------------------------------------------------------------------------------
class Rank:
    """The part of a replica the DP balancers read."""

    def __init__(self, waiting, running, kv=0.0):
        self.view = type("V", (), {"waiting": [None] * waiting, "num_running": running, "swapped": [],
                                   "kv_utilisation": kv})()


def test_vllm_019_balancer_scans_from_engine_zero():
    router = make_router("vllm-dp-0.19")
    ranks = [Rank(0, 3), Rank(0, 3)]
    picks = [router.route(Request(i, 0.0, 5, 5), ranks, None) for i in range(4)]
    assert picks == [0, 1, 0, 1]  # 4·waiting + running, ties to engine 0, local waiting raised at once


def test_latest_balancer_weighs_waiting_by_kv_pressure_and_counts_in_flight():
    router = make_router("vllm-dp-latest")
    ranks = [Rank(2, 10, kv=0.9), Rank(0, 13)]
    router.begin(ranks)
    # rank 0: max(0, 12) + 2·6·0.4 = 16.8; rank 1: 13
    assert router.route(Request(0, 0.0, 5, 5), ranks, None) == 1
    calm = make_router("vllm-dp-latest")
    calm.begin(ranks)
    ranks[0].view.kv_utilisation = 0.4  # no penalty below 50%: 12 < 13
    assert calm.route(Request(0, 0.0, 5, 5), ranks, None) == 0


def test_dp_ranks_of_a_moe_run_step_in_lockstep():
    from llmsched.experiment import build_source
    from llmsched.routing.registry import make_router
    from llmsched.sim.simulator import simulate
    cfg = RunConfig(model="qwen3-30b-a3b", gpu="h200", batch_time="vllm-v1", scheduler="vllm-chunked", dp=2,
                    expert_parallel=True, max_num_seqs=128, max_num_batched_tokens=2048, rate=8.0,
                    num_requests=60, check_invariants=True)
    result = run(cfg)
    cols = result.steps.arrays()
    by_start: dict = {}
    for replica, start, duration in zip(cols["replica"], cols["start"], cols["duration"]):
        by_start.setdefault(float(start), set()).add(float(duration))
    assert all(len(d) == 1 for d in by_start.values())  # ranks stepping together end together
    assert set(cols["replica"].tolist()) == {0, 1}
    assert len(result.requests.column("ttft")) == 60
    # the same ranks, each stepping on its own
    free = simulate(build_source(cfg), build_replicas(cfg), make_router("vllm-dp-latest"), seed=cfg.seed)
    assert len(free.steps) > 0
    tpot = lambda res: float(np.median(res.requests.column("tpot")))
    assert tpot(result) > tpot(free)  # waiting for the slower rank costs decode time


def test_expert_parallel_needs_a_moe_model():
    with pytest.raises(ValueError, match="expert parallelism needs a mixture-of-experts model"):
        build_replicas(RunConfig(model="llama-3.1-8b", gpu="h200", dp=2, expert_parallel=True))


# --- async scheduling's admission ------------------------------------------------------------------------------
def _one_replica_run(async_scheduling: bool, arrivals: list[tuple[float, int, int]]):
    from llmsched.engine.replica import Replica, ReplicaConfig
    from llmsched.metrics.steps import StepLog
    from llmsched.schedulers.registry import create_scheduler
    from llmsched.sim.simulator import simulate
    from llmsched.workload.workload import OpenLoop
    bt = make_batch_time_model("vllm-v1", "llama-3.1-8b", "h200", max_num_seqs=128, max_num_batched_tokens=2048,
                               async_scheduling=async_scheduling)
    rep = Replica(0, create_scheduler("vllm-chunked"), bt,
                  ReplicaConfig(num_blocks=4096, block_size=16, max_num_seqs=128, max_num_batched_tokens=2048,
                                max_model_len=8192, check_invariants=True), StepLog())
    reqs = [Request(i, t, p, o) for i, (t, p, o) in enumerate(arrivals)]
    result = simulate(OpenLoop(reqs), [rep])
    return reqs, result


def test_async_scheduling_queues_an_arrival_at_the_step_end_and_schedules_it_a_step_later():
    arrivals = [(0.0, 100, 50), (0.0101, 100, 5)]

    def step_ends(result):
        steps = result.steps.arrays()
        ends = steps["start"] + steps["duration"]
        return ends, int(np.flatnonzero((steps["start"] <= 0.0101) & (ends > 0.0101))[0])

    sync, sync_result = _one_replica_run(False, arrivals)
    late, result = _one_replica_run(True, arrivals)
    ends, during = step_ends(result)
    assert late[1].arrival == float(ends[during])  # queued (vLLM's queued_ts) when the step in flight ended
    assert late[1].first_scheduled == float(ends[during + 1])  # and scheduled in the step after the next
    ends, during = step_ends(sync_result)
    assert sync[1].arrival == 0.0101 and sync[1].first_scheduled == float(ends[during])  # sync: the next step
    assert late[0].first_scheduled == sync[0].first_scheduled == 0.0  # an idle engine takes an arrival at once
    assert all(r.num_generated == r.output_len for r in late)


def test_async_admission_holds_no_request_past_the_end_of_a_run():
    arrivals = [(0.001 * i, 300 + i, 20) for i in range(40)]
    reqs, result = _one_replica_run(True, arrivals)
    assert len(result.requests.column("id")) == 40 and all(r.num_generated == r.output_len for r in reqs)

"""Client timeouts wherever a request can be: a disaggregated request in its prefill, in the proxy's hop, received
or in transfer at a decode instance, decoding; an autoscaled fleet's; a MoE model's DP ranks in lockstep; a
request whose KV a tier below the GPU is still loading."""
import collections

import numpy as np
import pytest

from llmsched.experiment import run
from llmsched.request import Status
from llmsched.run_config import RunConfig

SMALL = dict(model="llama-3-8b", gpu="a100", num_requests=300, seed=3, check_invariants=True)
FLEETS = {
    "1P1D": dict(disaggregate="1P1D", rate=12.0),
    "2P1D over PCIe, vllm-chunked": dict(disaggregate="2P1D", kv_link="pcie", scheduler="vllm-chunked", rate=20.0),
    "1P2D layer-wise, llm-d's decider": dict(disaggregate="1P2D", kv_connector="layerwise", pd_decider="llm-d",
                                              rate=20.0),
    "autoscaled": dict(autoscaler="hpa", min_replicas=1, max_replicas=3, cold_start=5.0, rate=12.0),
    "MoE DP ranks in lockstep": dict(model="qwen3-30b-a3b", gpu="h100", dp=2, expert_parallel=True, rate=15.0),
}


@pytest.mark.parametrize("fleet", FLEETS)
def test_a_fleets_client_timeout_aborts_requests_wherever_they_are(fleet):
    cfg = {**SMALL, **FLEETS[fleet]}
    free = run(RunConfig(**cfg))
    result = run(RunConfig(**cfg, client_timeout=2.0))  # check_invariants: every block freed, counted once
    log = result.requests
    status = log.column("status")
    aborted = status == int(Status.ABORTED)
    assert len(status) == 300 and len(set(log.column("id").tolist())) == 300  # each request recorded once
    assert aborted.any() and (status == int(Status.FINISHED)).any()
    assert ((status == int(Status.FINISHED)) | aborted | (status == int(Status.REJECTED))).all()
    sent, finish = log.column("arrival"), log.column("finish")
    assert (finish[aborted] >= sent[aborted] + 2.0).all()  # when the engine heard it, after the timeout
    assert all("client timeout" in log.reasons[i] for i in log.column("id")[aborted])
    assert result.end_time < free.end_time  # the fleet stops working on them


@pytest.mark.parametrize("fleet", ["1P1D", "autoscaled", "MoE DP ranks in lockstep"])
def test_a_timeout_that_never_fires_changes_nothing(fleet):
    """The aborts wait in a queue of their own: a request's abort after it left keeps neither the run nor the
    fleet's actions going, and a pending one changes no fold of the decode steps' results."""
    cfg = {**SMALL, **FLEETS[fleet], "check_invariants": False}
    free, timed = run(RunConfig(**cfg)), run(RunConfig(**cfg, client_timeout=1e4))
    for name in ("status", "replica", "first_token", "finish"):
        np.testing.assert_array_equal(free.requests.column(name), timed.requests.column(name))
    assert free.end_time == timed.end_time and len(free.steps) == len(timed.steps)
    if free.fleet is not None and "cost" in free.fleet:
        assert free.fleet["cost"] == timed.fleet["cost"]


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_a_request_aborted_while_its_kv_loads_from_a_tier_frees_its_blocks_when_the_load_lands():
    """vLLM frees an aborted request's blocks once a load it waits on has landed (``finish_requests``'s
    delayed free of a WAITING_FOR_REMOTE_KVS request); until 2026-11-30 such an abort crashed the run."""
    result = run(RunConfig(trace="../shared/data/traces/mooncake/conversation_trace.jsonl", num_requests=800,
                           time_scale=0.2, kv_offload="cpu:50GiB", client_timeout=1.0, num_blocks=3000,
                           scheduler="vllm-chunked", check_invariants=True))
    counts = collections.Counter(result.requests.column("status").tolist())
    assert counts[int(Status.ABORTED)] > 300 and sum(counts.values()) == 800


def test_a_least_outstanding_router_forgets_a_request_aborted_during_its_transfer():
    """A request aborted while its KV crosses the link leaves its client (and its router's count) at once, but stays
    on the decode replica, holding its blocks, until the transfer lands (``Replica.num_serving``). Until 2026-11-30
    the router's check counted it still there and stopped the run ("count of replica 0 out of date": conservation
    fuzz seed 46,229)."""
    result = run(RunConfig(**{**SMALL, "num_requests": 120}, disaggregate="1P2D", router="least-outstanding",
                           kv_link="bw=1GB/s,latency=1ms", client_timeout=8.0, rate=4.0))
    status = result.requests.column("status")
    aborted = status == int(Status.ABORTED)
    started, landed = result.requests.column("transfer_start"), result.requests.column("transfer_end")
    assert (aborted & ~np.isnan(started) & np.isnan(landed)).any()  # aborted in transfer: the case
    assert len(status) == 120 and (aborted | (status == int(Status.FINISHED))).all()
    assert (status == int(Status.FINISHED)).sum() > 20

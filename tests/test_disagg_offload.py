"""KV tiers below the GPU in a fleet: a disaggregated fleet's prefill pool keeps them (vLLM chaining its KV-transfer
connector with an offloading one), each pool may set its own, and a disaggregated request's cached tokens are its
prefill's: what the fleet did not compute."""
from __future__ import annotations

import json

import numpy as np
import pytest

from llmsched.experiment import run
from llmsched.metrics.summary import summarize
from llmsched.plan.candidates import build_candidates, parse_ratios
from llmsched.request import Status
from llmsched.run_config import RunConfig

# 40 system prompts of 2,000 tokens, each asked 10 questions, on a prefill instance whose GPU holds a tenth of them
SHARED = dict(model="llama-3-8b", gpu="a100", workload="shared-prefix", num_requests=400, rate=6.0, seed=1,
              scheduler="vllm-chunked",
              workload_params={"num_groups": 40, "num_prompts_per_group": 10, "system_prompt_len": 2000,
                               "question_len": 200, "output_len": 50},
              disaggregate="1P1D", prefill_pool={"num_blocks": 1500})


def prefill_skipped(result, prefill_replicas=(0,)) -> int:
    """Prompt tokens of the finished requests the prefill pool did not compute."""
    steps = result.steps
    computed = steps.column("prefill_tokens")[np.isin(steps.column("replica"), prefill_replicas)].sum()
    return int(result.requests.column("prompt_len").sum() - computed)


def test_a_disaggregated_requests_cached_tokens_are_what_its_prefill_did_not_compute():
    """Before 2026-11-30 every disaggregated request reported the decode instance's count (0: its prompt came
    over the link), so a disaggregated run's prefix-cache hit rate read 0 whatever its prefill pool found. The
    run's KV tiers are its prefill pool's, and bring back the system prompts its GPU evicted."""
    bare, tiered = run(RunConfig(**SHARED)), run(RunConfig(**SHARED, kv_offload="cpu:20GiB"))
    for result in (bare, tiered):
        log = result.requests
        assert (log.column("status") == int(Status.FINISHED)).all()
        assert log.column("cached_tokens").sum() == prefill_skipped(result) > 0
    log = tiered.requests
    assert (log.column("cached_tokens_gpu") + log.column("cached_tokens_cpu") == log.column("cached_tokens")).all()
    assert prefill_skipped(tiered) > 2 * prefill_skipped(bare)
    assert np.median(log.column("ttft")) < np.median(bare.requests.column("ttft"))
    pools = tiered.meta["fleet"]["pools"]
    assert pools["prefill"]["kv_offload"]["tiers"][0]["medium"] == "cpu" and "kv_offload" not in pools["decode"]
    offload = summarize(tiered)["kv_offload"]
    assert offload["tiers"][0]["cached_tokens"] == int(log.column("cached_tokens_cpu").sum()) > 0
    assert offload["loads"] > 0


def test_a_prefill_pools_tiers_keep_every_block_accounted():
    result = run(RunConfig(**{**SHARED, "num_requests": 150}, kv_offload="cpu:20GiB", check_invariants=True))
    assert (result.requests.column("status") == int(Status.FINISHED)).all()
    assert result.requests.column("cached_tokens_cpu").sum() > 0


def test_a_pool_sets_its_own_tiers_and_the_log_splits_by_the_longest_list(tmp_path):
    """Two colocated pools behind one router, one with a host-memory tier, one with host memory and disk:
    requests.csv splits every request's cached tokens by cpu and disk (none found on disk by the first pool)."""
    fleet = tmp_path / "tiers.toml"
    fleet.write_text('[pools.host]\nreplicas = 1\nkv_offload = "cpu:8GiB"\n\n'
                     '[pools.disk]\nreplicas = 1\nkv_offload = "cpu:4GiB,disk:50GiB"\n')
    cfg = {k: v for k, v in SHARED.items() if k not in ("disaggregate", "prefill_pool")}
    result = run(RunConfig(**cfg, fleet=str(fleet), num_blocks=1500))
    log = result.requests
    split = log.column("cached_tokens_gpu") + log.column("cached_tokens_cpu") + log.column("cached_tokens_disk")
    assert (split == log.column("cached_tokens")).all()
    on_host = log.column("replica") == 0
    assert log.column("cached_tokens_disk")[on_host].sum() == 0 and log.column("cached_tokens_cpu").sum() > 0
    assert [t["medium"] for t in result.meta["fleet"]["pools"]["disk"]["kv_offload"]["tiers"]] == ["cpu", "disk"]


def test_pools_whose_tiers_do_not_line_up_are_refused(tmp_path):
    fleet = tmp_path / "tiers.toml"
    fleet.write_text('[pools.a]\nreplicas = 1\nkv_offload = "cpu:8GiB,disk:50GiB"\n\n'
                     '[pools.b]\nreplicas = 1\nkv_offload = "cpu:8GiB,remote:1TB"\n')
    cfg = {k: v for k, v in SHARED.items() if k not in ("disaggregate", "prefill_pool")}
    with pytest.raises(ValueError, match="pool 'b' keeps KV tiers cpu, remote and pool 'a' cpu, disk"):
        run(RunConfig(**cfg, fleet=str(fleet)))


def test_a_disaggregated_plan_prices_host_memory_on_its_prefill_replicas_only():
    cands = build_candidates(["a100"], [1], ["sarathi"], ["round-robin"], None, offloads=["cpu:256GiB"],
                             ratios=parse_ratios("2:1"))
    pd = next(c for c in cands if c.pd is not None)
    assert pd.usd_per_hour({"a100": 2.0}.get, 1, host_cost=lambda c: 0.5) == pytest.approx(2 * (2.0 + 0.5) + 2.0)
    cfg = pd.config(RunConfig(workload="shared-prefix", num_requests=20), 2.0, 1)
    result = run(cfg)
    assert "kv_offload" in result.meta["fleet"]["pools"]["prefill"]
    assert "kv_offload" not in result.meta["fleet"]["pools"]["decode"]
    assert json.dumps(result.meta["config"]["kv_offload"])  # the run's own field, given to its prefill pool


def test_a_decode_pool_keeps_tiers_of_its_own_beside_the_prompts_it_is_sent():
    """A decode pool's own tiers (vLLM's MultiConnector of NIXL and an offloading connector on the decode
    instance): the follow-up turns the decider serves there whole find their conversations' KV in host memory,
    while the prompts a prefill instance sent wait beside the loads, each kind checked as its own (Replica.landed)
    after every step."""
    cfg = dict(model="llama-3-8b", gpu="a100", workload="azure-conv", concurrency=12, turns=4, think_time=1.0,
               rate=None, num_requests=240, scheduler="vllm-chunked", disaggregate="1P1D", pd_decider="llm-d",
               pd_decider_params={"non_cached_tokens": 4096}, check_invariants=True,
               decode_pool={"num_blocks": 600, "kv_offload": "cpu:8GiB"})
    tiered = run(RunConfig(**cfg))
    bare = run(RunConfig(**{**cfg, "decode_pool": {"num_blocks": 600}}))
    for result in (tiered, bare):
        status = result.requests.column("status")
        assert ((status == int(Status.FINISHED)) | (status == int(Status.REJECTED))).all()
    reqs = tiered.requests
    local = reqs.column("prefill_replica") < 0
    assert local.sum() > 50 and (~local).sum() > 20  # both kinds on the decode instance
    assert reqs.column("cached_tokens_cpu")[local].sum() > 0
    assert "kv_offload" in tiered.meta["fleet"]["pools"]["decode"]

    def decode_computed(result) -> int:  # the prompt tokens the decode instance (replica 1) computed
        steps = result.steps
        return int(steps.column("prefill_tokens")[steps.column("replica") == 1].sum())

    assert decode_computed(tiered) < decode_computed(bare)

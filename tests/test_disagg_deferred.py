"""Deferred prefill (Mohanty et al.) on a disaggregated fleet's decode pool (Scheduler.serves_transferred_kv). Its
steps are vLLM v0's, with their swap-in rules: no admission while a request is swapped out. On a decode instance the
prompts a prefill instance sent wait holding the blocks a swapped request needs; with nothing running to free any,
they now run first, as the ``vllm`` policy's do. Before, the decode-pool fuzz (``scripts/decode_pool_fuzz.py
deferred-prefill``) found two such stalls in 583 disaggregated seeds."""
from __future__ import annotations

import pytest

import test_fuzz_conservation as fuzz
from llmsched.experiment import RunConfig, build_source
from llmsched.fleet_setup import simulate_fleet_config
from llmsched.request import Status


@pytest.mark.parametrize("seed", [21, 1263])
def test_the_fuzz_seeds_that_stalled_with_deferred_prefill_on_every_decode_pool_run(seed, monkeypatch):
    """Seed 21: a decode instance idle with 2 sent prompts waiting, 4 requests swapped out and none running (16 of 28
    blocks free, too few to swap one in); seed 1,263 the same with 1 and 2."""
    monkeypatch.setattr(fuzz, "decode_schedulers", lambda: ["deferred-prefill"])
    kind, message = fuzz.outcome(seed)
    assert kind == "ok", message


def test_a_deferred_prefill_decode_pool_serves_every_request():
    """A whole 1P1D run, deferred prefill on both pools (K = 4) and a decode instance short of KV that swaps: every
    request finishes, each decoded where it was sent."""
    cfg = RunConfig(scheduler="deferred-prefill", scheduler_params={"K": 4}, disaggregate="1P1D", num_requests=200,
                    rate=20.0, preemption_mode="swap", decode_pool={"num_blocks": 600}, seed=3)
    result, _ = simulate_fleet_config(cfg, build_source(cfg))
    cols = result.requests.cols
    assert set(cols["status"]) == {int(Status.FINISHED)} and len(cols["status"]) == 200
    assert set(cols["prefill_replica"]) == {0} and set(cols["replica"]) == {1}

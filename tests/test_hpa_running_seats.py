"""HPA on vllm:num_requests_running: its default target is Knative's 70 % of what a replica can run at once, and
with vLLM's 1,024 sequences on a large card the KV cache, not the sequence cap, says what that is."""
from __future__ import annotations

import pytest

from llmsched.experiment import RunConfig, build_source
from llmsched.fleet.autoscaler import ScalingContext
from llmsched.fleet.autoscalers import make_autoscaler
from llmsched.fleet.fleet import Fleet
from llmsched.fleet.hpa import RUNNING_SHARE
from llmsched.fleet.pool import Pool
from llmsched.fleet.replica_sizing import seats
from llmsched.fleet_setup import build_fleet, pool_configs
from llmsched.metrics.steps import StepLog

H200 = {"latency_boundary": "engine", "gpu": "h200", "model": "qwen3-32b", "workload": "azure-conv"}


def hpa_on_running(context: ScalingContext):
    cfg = RunConfig(rate=2.0, num_requests=20, **H200)
    fleet = Fleet((Pool("main", 2),))
    scaler = make_autoscaler("hpa", "main", 1, 8, {"metric": "running"}, context)
    state = build_fleet(cfg, fleet, build_source(cfg), StepLog(), pool_configs(cfg, fleet), [scaler])
    state.begin(lambda t, action: None)  # the fleet loop's schedule: nothing runs here
    return scaler


def test_the_running_target_is_70_percent_of_the_requests_the_kv_cache_holds():
    scaler = hpa_on_running(ScalingContext(isl=1_000, osl=250))
    rep = scaler.state.replicas[0]
    assert rep.config.max_num_seqs == 1024  # vLLM's default on an H200
    held = rep.config.num_blocks * rep.config.block_size // 1_125  # a running request's mean context
    assert held < 1024
    assert seats(rep, 1_000, 250) == held
    assert scaler.target() == pytest.approx(RUNNING_SHARE * held)


def test_without_known_lengths_the_target_is_70_percent_of_the_sequence_cap():
    scaler = hpa_on_running(ScalingContext())
    assert scaler.target() == pytest.approx(RUNNING_SHARE * 1024)


def test_a_given_target_wins():
    cfg = RunConfig(rate=2.0, num_requests=20, **H200)
    fleet = Fleet((Pool("main", 2),))
    scaler = make_autoscaler("hpa", "main", 1, 8, {"metric": "running", "target": 40}, ScalingContext(isl=1_000))
    build_fleet(cfg, fleet, build_source(cfg), StepLog(), pool_configs(cfg, fleet), [scaler])
    assert scaler.target() == 40  # read before the fleet starts: a given target needs no replica

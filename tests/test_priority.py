"""priority: with one class it decides as vllm-chunked; with classes the urgent go first and preempt, by recompute or
swap as the run says, and max_preemptions bounds the work thrown away (no request is preempted for ever)."""
from collections import Counter

import pytest

from llmsched.experiment import RunConfig, build_replicas, build_source, run
from llmsched.metrics.summary import summarize
from llmsched.request import Status
from llmsched.routing.registry import make_router
from llmsched.sim.simulator import simulate
from run_files import written_files

CLASSES = "high:rate=1.5:priority=0,low:rate=4:priority=1"


@pytest.mark.parametrize("setting", [dict(num_blocks=600), dict(num_blocks=600, preemption_mode="swap",
                                                                 swap_space_gb=0.05)])
def test_with_one_class_it_decides_as_vllm_chunked(setting, tmp_path):
    files = {}
    for scheduler in ("vllm-chunked", "priority"):
        result = run(RunConfig(scheduler=scheduler, rate=3, num_requests=200, fast_forward=False, **setting))
        files[scheduler] = written_files(result, summarize(result), tmp_path / scheduler)
    assert files["priority"]["requests.csv"] == files["vllm-chunked"]["requests.csv"]
    assert files["priority"]["steps.csv"] == files["vllm-chunked"]["steps.csv"]


def watched(cfg: RunConfig):
    """Run ``cfg``, noting each priority preemption's victim and the KV it held."""
    replicas = build_replicas(cfg)
    policy = replicas[0].scheduler
    victims = []
    inner = policy.schedule

    def schedule(view):
        plan = inner(view)
        victims.extend((r, computed) for r, computed, reason in policy.ledger.pending if reason == "priority")
        return plan

    policy.schedule = schedule
    result = simulate(build_source(cfg), replicas, make_router(cfg.router), seed=cfg.seed)
    return policy, victims, result


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_max_preemptions_bounds_the_work_thrown_away_and_every_request_finishes(limit):
    cfg = RunConfig(scheduler="priority", tenants=CLASSES, num_requests=300, num_blocks=900, max_num_seqs=32,
                    scheduler_params={"max_preemptions": limit}, seed=2, check_invariants=True)
    policy, victims, result = watched(cfg)
    status = result.requests.column("status")
    assert (status == int(Status.FINISHED)).all()  # no livelock: every request ran to its end
    times = Counter(r.id for r, _ in victims)
    assert max(times.values(), default=0) <= limit
    thrown = Counter()
    for r, computed in victims:
        thrown[r.id] += computed
        assert r.priority == 1  # only the less urgent class gives way
    for r, _ in victims:
        assert thrown[r.id] <= limit * r.max_kv_tokens
    figures = summarize(result)["policy"]["preemptions"]["by_group"]
    assert figures.get("high", {}).get("priority_preemptions", 0) == 0
    assert figures.get("low", {}).get("priority_preemptions", 0) == len(victims)
    assert figures.get("low", {}).get("thrown_away_tokens", 0) >= sum(thrown.values())
    if limit:
        assert victims  # the workload does make the urgent class wait for KV or seats


@pytest.mark.parametrize("limit", [1, 1000])
def test_without_a_bound_a_request_is_preempted_again_and_again(limit):
    """Eight seats, the urgent class arriving about as fast as they free: a less urgent request that gets a seat
    loses it to the next urgent arrival, again and again unless the bound exempts it."""
    cfg = RunConfig(scheduler="priority", tenants="high:rate=1.5:priority=0,low:rate=1:priority=1", num_requests=200,
                    max_num_seqs=8, scheduler_params={"max_preemptions": limit}, seed=2)
    _, victims, result = watched(cfg)
    most = max(Counter(r.id for r, _ in victims).values())
    assert most > 2 if limit > 2 else most <= limit
    assert (result.requests.column("status") == int(Status.FINISHED)).all()


def test_swap_mode_moves_the_victims_kv_instead_of_throwing_it_away():
    cfg = RunConfig(scheduler="priority", tenants=CLASSES, num_requests=300, num_blocks=900, max_num_seqs=32,
                    preemption_mode="swap", swap_space_gb=4.0, seed=2)
    summary = summarize(run(cfg))
    low = summary["policy"]["preemptions"]["by_group"]["low"]
    assert low["priority_preemptions"] > 0 and low["swapped_tokens"] > 0
    assert summary["counts"]["finished"] == 300


def test_the_urgent_class_waits_less_than_under_fcfs():
    ttft = {}
    for scheduler in ("vllm-chunked", "priority"):
        s = summarize(run(RunConfig(scheduler=scheduler, tenants="high:rate=0.5:priority=0,low:rate=4:priority=1",
                                    num_requests=400, seed=1)))
        ttft[scheduler] = s["tenants"]["high"]["latency"]["ttft"]["p99"]
    assert ttft["priority"] < ttft["vllm-chunked"] / 10


def test_tier_priorities_make_the_classes_too():
    s = summarize(run(RunConfig(scheduler="priority", rate=4.5, tiers="high:priority=0:share=0.1,low:priority=1",
                                num_requests=400, seed=1)))
    assert s["tiers"]["high"]["offered"] > 20
    high = s["policy"]["preemptions"]["by_priority"]
    assert set(high) <= {"1"}  # only the low tier (class 1) was preempted

"""Routers that keep state instead of reading every replica at each arrival must pick what reading would.

least-outstanding keeps an index (counts from what it routes and what the simulator reports leaving): at every
arrival it must pick exactly what a scan of ``num_outstanding`` picks. least-load keeps each replica's load until
the replica's ``version`` moves: every kept load must equal the load computed now."""
import numpy as np
import pytest

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.metrics.steps import StepLog
from llmsched.request import Request
from llmsched.routing.base import Router
from llmsched.routing.least_loaded import LeastLoad, LeastOutstanding
from llmsched.schedulers.registry import create_scheduler
from llmsched.sim.simulator import simulate
from llmsched.workload.lengths.distributions import Uniform
from llmsched.workload.workload import ClosedLoop

from conftest import AffineStepTime, ListSource, make_requests


class ScanningCheck(LeastOutstanding):
    """The indexed router, checked at every arrival against the scan it replaces (ties to the lowest index)."""

    def __init__(self):
        super().__init__()
        self.routed = 0

    def route(self, req, replicas, rng):
        scan = min(range(len(replicas)), key=lambda i: replicas[i].num_outstanding)
        got = super().route(req, replicas, rng)
        assert got == scan, (req.id, got, scan, [r.num_outstanding for r in replicas])
        self.routed += 1
        return got


def replicas(n, scheduler="sarathi", num_blocks=400, **cfg):
    steps = StepLog()
    config = ReplicaConfig(num_blocks=num_blocks, max_num_seqs=16, check_invariants=True, **cfg)
    return [Replica(i, create_scheduler(scheduler), AffineStepTime(), config, steps) for i in range(n)]


@pytest.mark.parametrize("scheduler", ["sarathi", "vllm", "orca", "fcfs"])
@pytest.mark.parametrize("n", [1, 3, 8])
def test_the_index_picks_what_a_scan_picks(scheduler, n):
    # tight KV (preemptions) and some requests too long for the cache (rejected at arrival)
    reqs = make_requests(300, rate=6.0 * n, prompt=(10, 1500), output=(1, 400), seed=n)
    reqs += [Request(300 + k, reqs[40 * k].arrival, 9000, 5) for k in range(5)]
    router = ScanningCheck()
    simulate(ListSource(sorted(reqs, key=lambda r: r.arrival)), replicas(n, scheduler), router)
    assert router.routed == len(reqs)


def test_the_index_holds_in_a_closed_loop_with_swapping():
    router = ScanningCheck()
    source = ClosedLoop(24, Uniform(20, 1200, 1, 300), 200, seed=3)
    simulate(source, replicas(4, preemption_mode="swap"), router)
    assert router.routed == 200


def test_route_before_begin_is_a_clear_error():
    reps = replicas(2)
    with pytest.raises(RuntimeError, match="call begin"):
        LeastOutstanding().route(Request(0, 0.0, 10, 2), reps, np.random.default_rng(0))


def test_every_router_is_told_what_leaves():
    seen = []

    class Counting(Router):
        name = "counting"

        def route(self, req, replicas, rng):
            return req.id % len(replicas)

        def left(self, index, count):
            seen.append((index, count))

    reqs = make_requests(120, rate=10.0)
    reqs.append(Request(120, reqs[-1].arrival + 0.1, 9000, 5))  # rejected at arrival: leaves at once
    simulate(ListSource(reqs), replicas(3), Counting())
    per = np.zeros(3, int)
    for i, c in seen:
        per[i] += c
    assert list(per) == [sum(1 for r in reqs if r.id % 3 == i) for i in range(3)]


class LoadCheck(LeastLoad):
    """The least-load router with kept loads, checked at every arrival against every replica's load now."""

    def __init__(self):
        super().__init__()
        self.routed = self.reused = 0

    def route(self, req, replicas, rng):
        before = list(self.versions)
        got = super().route(req, replicas, rng)
        fresh = [rep.scheduler.load(rep.view) for rep in replicas]
        assert self.loads == fresh, (req.id, self.loads, fresh)
        assert got == min(range(len(replicas)), key=fresh.__getitem__)
        self.routed += 1
        self.reused += sum(1 for i, rep in enumerate(replicas) if before[i] == rep.version)
        return got


@pytest.mark.parametrize("scheduler", ["sarathi", "vllm-chunked", "vllm", "orca", "fcfs", "rad", "slai",
                                       "fairbatching"])
def test_kept_loads_equal_the_loads_now(scheduler):
    reqs = make_requests(240, rate=30.0, prompt=(10, 1500), output=(1, 400), seed=4)
    reqs += [Request(240 + k, reqs[40 * k].arrival, 9000, 5) for k in range(5)]
    router = LoadCheck()
    simulate(ListSource(sorted(reqs, key=lambda r: r.arrival)), replicas(6, scheduler), router)
    assert router.routed == len(reqs)
    kept = create_scheduler(scheduler).load_from_state
    assert (router.reused > 0) == kept  # loads reused where the policy allows it, never otherwise


def test_a_new_load_is_computed_at_every_arrival_unless_declared():
    sarathi = type(create_scheduler("sarathi"))
    assert sarathi.load_from_state
    assert not type("ClockLoad", (sarathi,), {"load": lambda self, view: view.now}).load_from_state
    assert type("StateLoad", (sarathi,), {"load": lambda self, view: 1.0, "load_from_state": True}).load_from_state
    assert not create_scheduler("fairbatching").load_from_state  # minus its PAB, which reads the clock


def test_a_router_with_route_alone_still_runs():
    class Bare:
        def route(self, req, replicas, rng):
            return req.id % len(replicas)

    reqs = make_requests(60, rate=10.0)
    result = simulate(ListSource(reqs), replicas(2), Bare())
    assert len(result.requests) == 60


def test_replicas_out_of_order_are_a_clear_error():
    reps = replicas(2)
    with pytest.raises(ValueError, match=r"replicas\[0\] has index 1.*indexed 0..n-1"):
        simulate(ListSource(make_requests(5)), reps[::-1], LeastOutstanding())


def test_least_outstanding_keeps_its_counts_when_a_fleet_member_joins_or_leaves():
    """In a fleet a request may be sent to a busy replica and held for its step in flight (vLLM v1's async
    admission): the router counts it, the replica's ``num_outstanding`` does not yet. A replica joining or draining
    must not make the router forget those held requests on the replicas that stay."""
    reps = replicas(3)
    router = LeastOutstanding()
    router.begin(reps)
    rng = np.random.default_rng(0)
    picks = [router.route(None, reps, rng) for _ in range(5)]  # none added: all held
    assert picks == [0, 1, 2, 0, 1] and router.counts == [2, 2, 1]
    router.leaving(reps[1:], 0)  # replica 0 drains
    assert router.counts == [2, 1]
    new = replicas(4)[3]
    router.joined([*reps[1:], new], 2)
    assert router.counts == [2, 1, 0]
    assert router.route(None, [*reps[1:], new], rng) == 2

"""Replicas that join and leave a fleet while it runs: a scale-up serves only after its start-up phases, a scale-down
drains without losing a request, billing is the lifecycle's arithmetic, and every router keeps working while the
replicas it routes over change."""
from __future__ import annotations

import math

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_source
from llmsched.fleet.fleet import Fleet, ScaleEvent
from llmsched.fleet.lifecycle import DRAINING, GONE, LOADING, PROVISIONING, SERVING, WARM, Life, PhaseTimes, timeline
from llmsched.fleet.pool import Pool
from llmsched.fleet_setup import simulate_fleet_config
from llmsched.metrics.summary import summarize
from llmsched.request import Status
from llmsched.routing.registry import router_classes
from llmsched.routing.prefix_hash import PrefixHash

AT_ROUTING = {"latency_boundary": "engine", "batch_time": "roofline"}
PHASES = PhaseTimes(provisioning=5.0, loading=10.0, warm=2.0)  # joins 17 s after it is asked for


def run_fleet(fleet: Fleet, **fields):
    """Engine-side stamps of an engine that admits at once: a request's arrival is when it was routed, which the
    lifecycle checks read (the client's send comes earlier; vLLM v1's async admission queues it later)."""
    cfg = RunConfig(**{"rate": 6.0, "num_requests": 500, **AT_ROUTING, **fields})
    result, state = simulate_fleet_config(cfg, build_source(cfg), horizon=cfg.horizon, fleet=fleet)
    return result, state


def entered(life: Life) -> dict[str, float]:
    return dict(life.entered)


def up_and_down(**fields):
    fleet = Fleet((Pool("main", 1, phases=PHASES),),
                  scale=(ScaleEvent(10.0, "main", 3), ScaleEvent(60.0, "main", 1)))
    return run_fleet(fleet, **fields)


def test_a_scale_up_serves_only_after_its_start_up_phases():
    result, state = up_and_down()
    log = result.requests
    replica, arrival = log.column("replica"), log.column("arrival")
    for k in (1, 2):
        when = entered(state.lives[k])
        assert when == {PROVISIONING: 10.0, LOADING: 15.0, WARM: 25.0, SERVING: 27.0, DRAINING: 60.0,
                        GONE: when[GONE]}
        mine = replica == k
        assert mine.sum() > 0
        assert arrival[mine].min() >= 27.0  # routed only once serving
        assert arrival[mine].max() <= 60.0  # and never after it began draining
    early = (arrival >= 10.0) & (arrival < 27.0)
    assert early.sum() > 0 and set(replica[early]) == {0}  # asked for at 10 s, still starting until 27 s


def test_a_scale_down_drains_without_losing_a_request():
    result, state = up_and_down()
    log = result.requests
    status, replica, finish = log.column("status"), log.column("replica"), log.column("finish")
    assert len(log) == 500 and set(status) == {int(Status.FINISHED)}
    for k in (1, 2):
        gone = entered(state.lives[k])[GONE]
        mine = replica == k
        assert gone == pytest.approx(finish[mine].max())  # gone when its last request finished
        assert gone > 60.0  # it held requests when it began draining
        assert state.replicas[k].num_outstanding == 0
    assert state.lives[0].state == SERVING and not state.draining
    counts = summarize(result)["fleet"]["pools"]["main"]
    assert counts["finished"] == 500 and counts["replicas_made"] == 3 and counts["replicas_max"] == 3


def test_billing_is_the_lifecycle_arithmetic():
    result, state = up_and_down(tp=2)  # two GPUs a replica
    end = result.end_time
    gone = [entered(state.lives[k])[GONE] for k in (1, 2)]
    pool = result.fleet["pools"]["main"]
    assert pool["gpus_per_replica"] == 2
    assert pool["billed_replica_s"] == pytest.approx(end + sum(g - 10.0 for g in gone))  # from provisioning
    assert pool["billed_gpu_s"] == pytest.approx(2 * pool["billed_replica_s"])
    assert pool["serving_replica_s"] == pytest.approx(end + sum(g - 27.0 for g in gone))  # serving and draining
    busy = sum(rep.busy_time for rep in state.replicas)
    assert pool["busy_s"] == pytest.approx(busy) and busy <= pool["serving_replica_s"]
    assert pool["utilisation"] == pytest.approx(busy / pool["serving_replica_s"])
    rows = pool["timeline"]
    assert [(r["t"], r["provisioning"], r["loading"], r["warm"], r["serving"], r["draining"]) for r in rows[:6]] == [
        (0.0, 0, 0, 0, 1, 0), (10.0, 2, 0, 0, 1, 0), (15.0, 0, 2, 0, 1, 0), (25.0, 0, 0, 2, 1, 0),
        (27.0, 0, 0, 0, 3, 0), (60.0, 0, 0, 0, 1, 2)]
    assert rows[-1]["serving"] == 1 and rows[-1]["draining"] == 0


def test_a_replica_given_up_while_starting_is_gone_at_once_and_billed_its_start():
    fleet = Fleet((Pool("main", 1, phases=PHASES),),
                  scale=(ScaleEvent(10.0, "main", 2), ScaleEvent(12.0, "main", 1)))
    result, state = run_fleet(fleet, num_requests=200)
    life = state.lives[1]
    assert life.entered == [(PROVISIONING, 10.0), (GONE, 12.0)]
    assert state.replicas[1].num_steps == 0 and 1 not in set(result.requests.column("replica"))
    assert result.fleet["pools"]["main"]["billed_replica_s"] == pytest.approx(result.end_time + 2.0)


def test_scale_down_gives_up_starting_replicas_first_then_the_newest_serving():
    fleet = Fleet((Pool("main", 2, phases=PHASES),),
                  scale=(ScaleEvent(1.0, "main", 3), ScaleEvent(30.0, "main", 4), ScaleEvent(31.0, "main", 1)))
    _, state = run_fleet(fleet, num_requests=300)
    # at 31 s: replicas 0, 1 (from the start) and 2 (joined at 18 s) serve, 3 is provisioning since 30 s
    assert state.lives[3].entered == [(PROVISIONING, 30.0), (GONE, 31.0)]
    assert entered(state.lives[2])[DRAINING] == 31.0 and entered(state.lives[1])[DRAINING] == 31.0
    assert DRAINING not in entered(state.lives[0])


def test_a_pool_scaled_to_zero_rejects_with_a_reason_and_serves_again_once_back():
    fleet = Fleet((Pool("main", 1, phases=PhaseTimes(provisioning=3.0)),),
                  scale=(ScaleEvent(20.0, "main", 0), ScaleEvent(40.0, "main", 1)))
    result, state = run_fleet(fleet, rate=4.0, num_requests=250)
    log = result.requests
    status, arrival = log.column("status"), log.column("arrival")
    rejected = status == int(Status.REJECTED)
    assert len(log) == 250
    assert rejected.any() and arrival[rejected].min() >= 20.0 and arrival[rejected].max() < 43.0
    assert all("no replica of the fleet's 'serve' pools was serving" in log.reasons[i]
               for i in log.column("id")[rejected].tolist())
    assert set(log.column("replica")[rejected]) == {-1}
    assert (status[arrival >= 43.0] == int(Status.FINISHED)).all()
    assert result.fleet["unrouted"] == int(rejected.sum())
    counts = summarize(result)["counts"]
    assert counts["finished"] + counts["rejected"] == 250


def test_a_horizon_bills_up_to_the_horizon_and_leaves_requests_unfinished():
    fleet = Fleet((Pool("main", 1, phases=PHASES),), scale=(ScaleEvent(10.0, "main", 2),))
    result, state = run_fleet(fleet, rate=8.0, num_requests=400, horizon=20.0)
    assert result.end_time == 20.0
    assert state.lives[1].state == LOADING  # still loading when the run stopped
    assert result.fleet["pools"]["main"]["billed_replica_s"] == pytest.approx(20.0 + 10.0)
    status = result.requests.column("status")
    assert (status == int(Status.UNFINISHED)).any()


@pytest.mark.parametrize("router", sorted(router_classes()))
def test_every_router_routes_over_replicas_that_join_and_leave(router):
    fleet = Fleet((Pool("main", 2, fields={"router": router}, phases=PhaseTimes(provisioning=2.0)),),
                  scale=(ScaleEvent(3.0, "main", 4), ScaleEvent(8.0, "main", 1), ScaleEvent(12.0, "main", 3)))
    result, state = run_fleet(fleet, rate=15.0, num_requests=240, check_invariants=True)
    log = result.requests
    replica, arrival = log.column("replica"), log.column("arrival")
    assert len(log) == 240 and set(log.column("status")) == {int(Status.FINISHED)}
    assert len(state.replicas) == 6
    for k, life in enumerate(state.lives):  # every request went to a replica serving when it arrived
        when = entered(life)
        mine = arrival[replica == k]
        if len(mine):
            assert mine.min() >= when[SERVING]
            assert mine.max() <= when.get(DRAINING, math.inf)
    assert len(set(replica)) >= 4


def test_prefix_hash_keeps_each_key_where_it_was_when_another_replica_leaves():
    class Rep:
        def __init__(self, index):
            self.index = index

    router = PrefixHash(vnodes=16)
    reps = [Rep(i) for i in range(4)]
    router.begin(reps)
    before = dict(zip(router.points, (reps[i].index for i in router.owners)))
    router.leaving(reps[:1] + reps[2:], 1)
    after = dict(zip(router.points, ([*reps[:1], *reps[2:]][i].index for i in router.owners)))
    assert set(after) == {p for p, owner in before.items() if owner != 1}
    assert all(after[p] == before[p] for p in after)


def test_timeline_counts_each_state():
    a, b = Life(0, "p", SERVING, 0.0), Life(1, "p", PROVISIONING, 1.0)
    b.enter(SERVING, 3.0)
    a.enter(DRAINING, 3.0)
    a.enter(GONE, 5.0)
    rows = timeline([a, b], 10.0)
    assert [(r["t"], r["provisioning"], r["serving"], r["draining"]) for r in rows] == [
        (0.0, 0, 1, 0), (1.0, 1, 1, 0), (3.0, 0, 1, 1), (5.0, 0, 1, 0)]
    assert a.billed(10.0) == 5.0 and b.billed(10.0) == 9.0 and b.seconds_in((SERVING,), 10.0) == 7.0
    with pytest.raises(ValueError, match="replica 0: gone at t=5 cannot become serving"):
        a.enter(SERVING, 6.0)
    assert np.isclose(PhaseTimes(1, 2, 3).cold_start, 6.0)


def test_an_engine_with_async_scheduling_drains_what_it_held():
    """vLLM v1's async scheduling holds an arrival until the step in flight ends (batchtime/vllm_v1.py): a replica
    given up while it holds one still serves it, and is gone only after."""
    result, state = up_and_down(batch_time="vllm-v1", scheduler="vllm-chunked", rate=9.0)
    assert state.replicas[0].batch_time.async_admission
    log = result.requests
    assert len(log) == 500 and set(log.column("status")) == {int(Status.FINISHED)}
    replica, finish = log.column("replica"), log.column("finish")
    for k in (1, 2):
        gone = entered(state.lives[k])[GONE]
        assert gone == pytest.approx(finish[replica == k].max()) and gone > 60.0


class Member:
    """A replica as a router reads it: its fleet index, and for vLLM's balancer a view of its queues."""

    def __init__(self, index, waiting=0, running=0):
        self.index = index
        self.num_outstanding = waiting + running
        self.view = type("View", (), {"waiting": [None] * waiting, "num_running": running, "swapped": [],
                                      "kv_utilisation": 0.0})()


def test_round_robin_keeps_its_turn_while_replicas_join_and_leave():
    from llmsched.request import Request
    from llmsched.routing.registry import make_router
    rr = make_router("round-robin")
    members = [Member(i) for i in range(4)]
    req = Request(0, 0.0, 5, 5)
    assert [members[rr.route(req, members, None)].index for _ in range(2)] == [0, 1]  # replica 2 is next
    members.pop(1)
    rr.leaving(members, 1)  # one before the next leaves: replica 2 is still next
    assert members[rr.route(req, members, None)].index == 2
    members.pop(2)
    rr.leaving(members, 2)  # the next one (replica 3) leaves: its successor, replica 0, is next
    members.append(Member(4))
    rr.joined(members, 2)
    assert [members[rr.route(req, members, None)].index for _ in range(4)] == [0, 2, 4, 0]


def test_vllm_balancer_keeps_the_in_flight_counts_of_the_replicas_that_stay():
    from llmsched.request import Request
    from llmsched.routing.registry import make_router
    router = make_router("vllm-dp-latest")
    members = [Member(0), Member(1), Member(2)]
    router.begin(members)
    for i in range(6):
        router.route(Request(i, 0.0, 5, 5), members, None)
    assert router.inflight == [2, 2, 2]
    router.left(2, 2)
    members.pop(0)
    router.leaving(members, 0)
    assert router.inflight == [2, 0]
    members.append(Member(3))
    router.joined(members, 2)
    assert router.inflight == [2, 0, 0]
    picks = [members[router.route(Request(10 + i, 1.0, 5, 5), members, None)].index for i in range(2)]
    assert sorted(picks) == [2, 3]  # replica 1 still has two in flight: the idle ones first


class QueueScaler:
    """A controller of our own for the test (not a cited autoscaler): every second, one more replica while more
    than 8 requests wait in the pool, up to 4."""

    def __init__(self, pool: str):
        self.pool = pool

    def start(self, fleet, schedule):
        self.fleet, self.schedule = fleet, schedule
        schedule(1.0, self.tick)

    def tick(self, now):
        pool = self.fleet.pools[self.pool]
        waiting = sum(len(rep.waiting) for rep in pool.replicas)
        if waiting > 8 and len(pool.active()) < 4:
            self.fleet.scale(self.pool, len(pool.active()) + 1, now)
        self.schedule(now + 1.0, self.tick)


def test_a_controller_scales_the_fleet_through_the_same_entry_point():
    fleet = Fleet((Pool("main", 1, phases=PhaseTimes(provisioning=2.0, loading=3.0)),))
    cfg = RunConfig(rate=12.0, num_requests=400, **AT_ROUTING)
    result, state = simulate_fleet_config(cfg, build_source(cfg), fleet=fleet, controllers=[QueueScaler("main")])
    log = result.requests
    assert len(log) == 400 and set(log.column("status")) == {int(Status.FINISHED)}
    assert len(state.replicas) == 4 and result.fleet["scale_events"] == 3
    joins = [entered(life)[SERVING] for life in state.lives[1:]]
    asked = [entered(life)[PROVISIONING] for life in state.lives[1:]]
    assert all(j == a + 5.0 for j, a in zip(joins, asked)) and asked == sorted(asked)
    assert result.end_time < 400 / 12 + 60  # its ticks do not keep the run going after the last request


def test_the_timeline_counts_a_replica_given_up_in_the_instant_it_warmed_as_gone():
    """A replica that enters warm and is given up at the same t ends gone in the timeline (its states in the order
    it entered them, not by name: 'gone' sorts before 'warm')."""
    life = Life(0, "a", PROVISIONING, 0.0)
    life.enter(LOADING, 1.0)
    life.enter(WARM, 7.0)
    life.enter(GONE, 7.0)
    rows = timeline([life, Life(1, "a", SERVING, 0.0)], 20.0)
    assert rows[-1] == {"t": 7.0, PROVISIONING: 0, LOADING: 0, WARM: 0, SERVING: 1, DRAINING: 0}

"""WAIT / Nested WAIT / FCFS behaviour and the replica's seed-003 eviction option."""
import pytest

from llmsched.batchtime.linear import LinearBatchTime
from llmsched.engine.errors import PlanError
from llmsched.engine.plan import BatchPlan
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.reproduce.wait_runs.paper_model import run_model
from llmsched.request import Request, Status
from llmsched.schedulers.base import Scheduler
from llmsched.schedulers.registry import create_scheduler
from llmsched.schedulers.wait.fluid_model import fluid, parse_types
from llmsched.schedulers.wait.synthetic_workloads import WAIT_WORKLOADS, Mixture

BT = LinearBatchTime.from_wait(0.01, 0.001)


def replica(scheduler, memory, **kw):
    cfg = ReplicaConfig(num_blocks=memory, block_size=1, max_model_len=1 << 20, check_invariants=True, **kw)
    return Replica(0, scheduler, BT, cfg)


class Scripted(Scheduler):
    name = "scripted"

    def __init__(self):
        self.plan = BatchPlan()

    def schedule(self, view):
        return self.plan


def test_overflow_error_is_the_default():
    s = Scripted()
    rep = replica(s, 10)
    a, b = Request(0, 0, 6, 2), Request(1, 0, 6, 2)
    rep.add(a, 0), rep.add(b, 0)
    s.plan = BatchPlan(prefills=[(a, 6), (b, 6)])
    with pytest.raises(PlanError, match="KV cache capacity"):
        rep.start_step(0)


@pytest.mark.parametrize("mode", ["evict-newest", "evict-newest-recompute"])
def test_evict_newest_on_overflow(mode):
    """Example 2's step: 3 running decodes hold 2 each (6 of 8); a new prompt (2) and their growth (3) need 5."""
    s = Scripted()
    rep = replica(s, 8, overflow=mode)
    old = [Request(i, 0, 1, 4) for i in range(3)]
    for r in old:
        rep.add(r, 0)
    s.plan = BatchPlan(prefills=[(r, 1) for r in old])
    rep.end_step(rep.start_step(0))
    s.plan = BatchPlan(decodes=list(old))
    rep.end_step(rep.start_step(1))  # each holds 2 now, 2 generated
    new = Request(9, 1, 2, 2)
    rep.add(new, 1)
    s.plan = BatchPlan(prefills=[(new, 2)], decodes=list(old))
    rep.start_step(2)
    assert rep.num_evictions == 1 and old[2].status is Status.WAITING  # the newest admission went
    assert [r for r, _ in rep.plan.prefills] == [new] and rep.plan.decodes == old[:2]
    if mode == "evict-newest":  # restarted from scratch, queued as a new arrival
        assert old[2].num_generated == 0 and len(old[2].token_times) == 0 and rep.waiting[-1] is old[2]
    else:  # keeps its tokens and re-prefills them, first in line
        assert old[2].num_generated == 2 and rep.waiting[0] is old[2]
    rep.end_step(3)
    rep.check()


def toy(d0=0.01, d1=0.001):
    lam = 4 / (d0 + 12 * d1)
    return lam, Mixture([(1, 1, 2)])  # l = l' = 1: output 2 in the engine


def test_example_2_fcfs_evicts_and_loses_throughput_wait_does_not():
    lam, lengths = toy()
    thp_star = fluid(parse_types(f"{lam}:1:1"), 0.01, 0.001).throughput
    fcfs = run_model("fcfs", lengths, lam, 12, d0=0.01, d1=0.001, duration=20, fit=False)
    wait = run_model("wait", lengths, lam, 12, d0=0.01, d1=0.001, duration=20, types=f"{lam}:1:1",
                     thresholds="4", max_wait=0)
    assert fcfs["evictions"] > 0 and wait["evictions"] == 0
    assert fcfs["throughput"] < 0.88 * thp_star  # at least the paper's 12% loss
    assert wait["throughput"] > 0.97 * thp_star
    assert wait["finished"] >= wait["offered"] - 7  # at the end: < n waiting, and the cohort they would join


class Spy:
    """Wraps a scheduler and records every plan with the replica state it saw."""

    def __init__(self, inner):
        self.inner, self.plans = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def schedule(self, view):
        plan = self.inner.schedule(view)
        self.plans.append((len(view.waiting), [r.num_generated for r in view.running],
                           [r for r, _ in plan.prefills], [r.num_generated for r in plan.decodes]))
        return plan


def test_wait_starts_a_type_only_at_threshold_and_moves_cohorts_in_lockstep():
    from llmsched.sim.simulator import simulate
    from llmsched.workload.workload import OpenLoop
    sched = Spy(create_scheduler("wait", types="1:5:3", thresholds="3", max_wait=5))
    rep = replica(sched, 1000, oracle=True)
    reqs = [Request(i, 0.1 * i, 5, 4) for i in range(9)]
    simulate(OpenLoop(reqs), [rep])
    assert all(r.status is Status.FINISHED for r in reqs)
    for waiting, stages, admitted, decodes in sched.plans:
        if admitted:
            assert len(admitted) == 3 and waiting >= 3  # never below threshold (arrivals come within max_wait)
        progress = sorted(decodes)
        for k in set(progress):  # each stage holds a whole cohort
            assert progress.count(k) == 3


def test_nested_wait_pauses_a_segment_below_threshold_and_every_later_one():
    sched = create_scheduler("nested-wait", types="1:4:2,1:4:5", thresholds="2,2", max_wait=0)
    s = Scripted()
    rep = replica(s, 1000)
    reqs = [Request(i, 0, 4, 6) for i in range(3)]  # all long: they survive segment 1 (stages 0..2)
    for r in reqs:
        rep.add(r, 0)
    for plan in ([(r, 4) for r in reqs[:2]], None, None):
        s.plan = BatchPlan(prefills=plan) if plan else BatchPlan(decodes=reqs[:2])
        rep.end_step(rep.start_step(rep.now))
    # reqs 0,1 wait at segment 2's boundary (stage 3); req 2 alone in segment 1's queue (< n_1 = 2)
    assert [r.num_generated for r in reqs] == [3, 3, 0]
    plan = sched.schedule(rep.view)
    assert not plan.has_work  # segment 1 below threshold pauses segment 2 too, although 2 wait there
    rep.add(Request(5, rep.now, 4, 2), rep.now)
    plan = sched.schedule(rep.view)
    assert {r.id for r, _ in plan.prefills} == {2, 5} and set(plan.decodes) == set(reqs[:2])


def test_nested_wait_never_reads_output_length():
    import inspect
    import llmsched.schedulers.wait.nested_wait as m
    assert "output_len" not in inspect.getsource(m).replace("oracle_output_len", "")


def test_no_eviction_under_wait_when_memory_meets_the_bound():
    wl = WAIT_WORKLOADS["wait-low"]()
    d0, d1 = 0.01, 1e-5
    types = ",".join(f"{t.rate}:{t.prompt}:{t.decode}" for t in wl.types)
    from llmsched.schedulers.wait.fluid_model import wait_thresholds
    n = wait_thresholds(list(wl.types), d0, d1, 10_000)
    bound = sum(nj * t.memory for nj, t in zip(n, wl.types))
    r = run_model("wait", wl.lengths, wl.rate, bound, d0=d0, d1=d1, duration=30, types=types,
                  thresholds=",".join(map(str, n)), max_wait=0.5)
    assert r["evictions"] == 0 and r["finished"] == r["offered"]


def test_nested_wait_runs_under_compare_defaults():
    from llmsched.experiment import RunConfig, run
    from llmsched.metrics.summary import summarize
    s = summarize(run(RunConfig(scheduler="nested-wait", workload="sharegpt", rate=2.8, num_requests=200)))
    assert s["counts"]["finished"] == 200


def test_wait_needs_the_oracle():
    from llmsched.experiment import RunConfig, run
    with pytest.raises(ValueError, match="oracle"):
        run(RunConfig(scheduler="wait", num_requests=10))


def test_bad_parameters_are_clear_errors():
    with pytest.raises(ValueError, match="RATE:PROMPT:DECODE"):
        create_scheduler("wait", types="1:2").schedule(replica(create_scheduler("fcfs"), 10, oracle=True).view)
    with pytest.raises(ValueError, match="rule"):
        create_scheduler("nested-wait", rule="magic")

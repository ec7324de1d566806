"""The mechanism: plan validation, token accounting, preemption, rejection."""
from dataclasses import dataclass, field

import pytest

from llmsched.engine.errors import PlanError
from llmsched.engine.plan import BatchPlan
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.request import Request, Status
from llmsched.schedulers.base import Scheduler

from conftest import AffineStepTime


@dataclass
class Scripted(Scheduler):
    """Returns the plans a test hands it, one per step."""

    name = "scripted"
    plans: list = field(default_factory=list)

    def schedule(self, view):
        return self.plans.pop(0)(view) if self.plans else BatchPlan()


def replica(plans, **cfg):
    cfg = {"num_blocks": 100, "block_size": 16, "max_num_seqs": 4, "max_num_batched_tokens": 512,
           "max_model_len": 2048, "check_invariants": True, **cfg}
    return Replica(0, Scripted(plans), AffineStepTime(), ReplicaConfig(**cfg))


def step(rep, t):
    d = rep.start_step(t)
    assert d is not None and d > 0
    rep.end_step(t + d)
    return t + d


def test_first_token_at_end_of_last_chunk_and_one_token_per_decode():
    r = Request(0, 0.0, 100, 3)
    rep = replica([lambda v: BatchPlan(prefills=[(r, 60)]),
                   lambda v: BatchPlan(prefills=[(r, 40)]),
                   lambda v: BatchPlan(decodes=[r]),
                   lambda v: BatchPlan(decodes=[r])])
    rep.add(r, 0.0)
    t1 = step(rep, 0.0)
    assert r.num_generated == 0 and r.num_computed == 60 and r.first_token != r.first_token
    t2 = step(rep, t1)
    assert r.first_token == t2 and r.num_generated == 1 and r.num_blocks == 7
    t3 = step(rep, t2)
    assert r.num_generated == 2 and list(r.token_times) == [t2, t3]
    t4 = step(rep, t3)
    assert r.status is Status.FINISHED and r.finish == t4 and r.num_blocks == 0
    assert rep.kv.free == rep.kv.total and rep.completed == [r]
    assert r.num_computed == r.max_kv_tokens == 102


@pytest.mark.parametrize("make_plan, limit", [
    (lambda rs: BatchPlan(decodes=[rs[0]]), "decodes must be running"),
    (lambda rs: BatchPlan(prefills=[(rs[0], 101)]), "between 1 and the request's remaining"),
    (lambda rs: BatchPlan(prefills=[(rs[0], 0)]), "between 1 and the request's remaining"),
    (lambda rs: BatchPlan(prefills=[(rs[0], 10), (rs[0], 10)]), "once per plan"),
    (lambda rs: BatchPlan(prefills=[(r, 100) for r in rs[:6]]), "max_num_batched_tokens"),
    (lambda rs: BatchPlan(prefills=[(r, 10) for r in rs[:5]]), "max_num_seqs"),
    (lambda rs: BatchPlan(preempt=[rs[0]], prefills=[(rs[1], 10)]), "only running requests can be preempted"),
    (lambda rs: BatchPlan(wait_until=-1.0), "wait_until must lie in the future"),
])
def test_invalid_plans_are_rejected_naming_scheduler_and_limit(make_plan, limit):
    rs = [Request(i, 0.0, 100, 5) for i in range(6)]
    rep = replica([lambda v: make_plan(rs)])
    for r in rs:
        rep.add(r, 0.0)
    with pytest.raises(PlanError, match=limit) as e:
        rep.start_step(0.0)
    assert "scheduler 'scripted'" in str(e.value)


def test_plan_needing_more_kv_than_free_is_rejected():
    rs = [Request(i, 0.0, 400, 5) for i in range(3)]
    rep = replica([lambda v: BatchPlan(prefills=[(r, 400) for r in rs])], num_blocks=60,
                  max_num_batched_tokens=2048)
    for r in rs:
        rep.add(r, 0.0)
    with pytest.raises(PlanError, match="KV cache capacity"):
        rep.start_step(0.0)


def test_request_that_can_never_fit_is_rejected_with_reason():
    big = Request(0, 0.0, 1000, 700)
    rep = replica([], num_blocks=100)  # 1600 tokens of KV
    assert rep.add(big, 0.0) is False
    assert big.status is Status.REJECTED and "can never be served" in big.reject_reason
    long = Request(1, 0.0, 2000, 100)
    assert rep.add(long, 0.0) is False and "max_model_len" in long.reject_reason


def test_recompute_preemption_frees_blocks_and_restarts_progress():
    a, b = Request(0, 0.0, 30, 10), Request(1, 0.0, 30, 10)
    rep = replica([lambda v: BatchPlan(prefills=[(a, 30), (b, 30)]),
                   lambda v: BatchPlan(decodes=[a], preempt=[b]),
                   lambda v: BatchPlan(decodes=[a], prefills=[(b, 31)])])
    rep.add(a, 0.0)
    rep.add(b, 0.0)
    t = step(rep, 0.0)
    t = step(rep, t)
    assert b.status is Status.WAITING and b.num_computed == 0 and b.num_blocks == 0 and b.preemptions == 1
    assert rep.waiting[0] is b and b.num_generated == 1
    step(rep, t)  # recompute prompt + generated token, which samples token 2
    assert b.num_generated == 2 and b.num_computed == 31 and b.status is Status.RUNNING


def test_swap_preemption_keeps_progress_and_charges_transfer():
    a, b = Request(0, 0.0, 30, 10), Request(1, 0.0, 30, 10)
    rep = replica([lambda v: BatchPlan(prefills=[(a, 30), (b, 30)]),
                   lambda v: BatchPlan(decodes=[a], preempt=[b]),
                   lambda v: BatchPlan(decodes=[a, b])],
                  preemption_mode="swap", swap_blocks=10, swap_seconds_per_block=0.5)
    rep.add(a, 0.0)
    rep.add(b, 0.0)
    t = step(rep, 0.0)
    t = step(rep, t)
    assert b.status is Status.SWAPPED and b.num_computed == 30 and rep.kv.swap_free == 8
    d = rep.start_step(t)
    assert d >= 2 * 0.5  # two blocks swapped back in
    rep.end_step(t + d)
    assert b.status is Status.RUNNING and b.num_generated == 2 and rep.kv.swap_free == 10


def test_swap_without_host_space_falls_back_to_recompute_and_counts_it():
    a, b = Request(0, 0.0, 30, 10), Request(1, 0.0, 30, 10)
    rep = replica([lambda v: BatchPlan(prefills=[(a, 30), (b, 30)]),
                   lambda v: BatchPlan(decodes=[a], preempt=[b])], preemption_mode="swap", swap_blocks=1)
    rep.add(a, 0.0)
    rep.add(b, 0.0)
    step(rep, step(rep, 0.0))
    assert b.status is Status.WAITING and rep.swap_fallbacks == 1


def test_bad_replica_config_is_a_clear_error():
    with pytest.raises(ValueError, match="max_num_seqs"):
        ReplicaConfig(num_blocks=10, max_num_seqs=0)
    with pytest.raises(ValueError, match="preemption_mode"):
        ReplicaConfig(num_blocks=10, preemption_mode="drop")

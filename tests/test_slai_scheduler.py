"""SLAI's rules (Bari et al. §6, spec §2.7) on small hand-built scenarios driven through a real replica."""

import pytest

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.metrics.steps import StepLog
from llmsched.request import SLO, Request, Status, Tier
from llmsched.schedulers import create_scheduler, scheduler_names

from conftest import AffineStepTime, make_requests, run_sim

PAID, MID, FREE = Tier("paid", SLO(tbt=0.1)), Tier("mid", SLO(tbt=0.3)), Tier("free", SLO(tbt=0.5))


def replica(num_blocks=200, name="slai", **params):
    sched = create_scheduler(name, **params)
    return Replica(0, sched, AffineStepTime(), ReplicaConfig(num_blocks=num_blocks, check_invariants=True),
                   StepLog())


def step(rep, t):
    d = rep.start_step(t)
    rep.end_step(t + d)
    return t + d


def three_decoders(token_budget=512, **params):
    """Paid, free and mid-tier requests, all prefilled in one step: decode phase from time e."""
    rep = replica(**params)
    reqs = [Request(0, 0.0, 16, 50, PAID), Request(1, 0.0, 16, 50, FREE), Request(2, 0.0, 16, 50, MID)]
    for r in reqs:
        rep.add(r, 0.0)
    e = step(rep, 0.0)
    assert all(r.is_decode for r in reqs)
    rep.scheduler.token_budget = token_budget
    return rep, reqs, e


def test_last_schedulable_time_is_fixed_at_the_token():
    rep, reqs, e = three_decoders(dynamic=False, offset=2.0)
    t_bar = rep.view.mean_step_time
    for r, tbt in zip(reqs, (0.1, 0.5, 0.3)):
        assert rep.scheduler.deadline(r, rep.view) == pytest.approx(e + tbt - 2.0 * t_bar)
    rep.clock.tick(e + 5.0)  # more steps would change t̄; C stays what it was when the token appeared
    assert rep.scheduler.deadline(reqs[0], rep.view) == pytest.approx(e + 0.1 - 2.0 * t_bar)


def test_critical_decodes_go_first_in_order_of_c_within_the_budget():
    rep, reqs, e = three_decoders(dynamic=False, offset=0.0, token_budget=2)
    rep.add(Request(3, e, 100, 5, FREE), e)
    rep.clock.tick(e + 1.0)  # every decode is past its C
    plan = rep.scheduler.schedule(rep.view)
    assert [r.id for r in plan.decodes] == [0, 2]  # paid (C = e+0.1), then mid (e+0.3); the budget is 2
    assert not plan.prefills


def test_non_critical_decodes_are_deferred_only_when_prefills_use_the_budget():
    rep, reqs, e = three_decoders(dynamic=False, offset=0.0, token_budget=64)
    rep.clock.tick(e)  # nothing critical yet (every C lies ahead)
    plan = rep.scheduler.schedule(rep.view)
    assert sorted(r.id for r in plan.decodes) == [0, 1, 2]  # no prefill work: every decode runs
    rep.add(Request(3, e, 62, 5, FREE), e)
    plan = rep.scheduler.schedule(rep.view)
    assert plan.prefills == [(rep.waiting[0], 62)]
    assert [r.id for r in plan.decodes] == [0, 2]  # two tokens of budget left: smallest C first
    rep.waiting[0].prompt_len = 200  # a long prompt takes the whole budget: every decode waits
    plan = rep.scheduler.schedule(rep.view)
    assert plan.prefills[0][1] == 64 and not plan.decodes


def test_critical_decodes_run_even_when_a_prompt_waits():
    rep, reqs, e = three_decoders(dynamic=False, offset=0.0, token_budget=64)
    rep.add(Request(3, e, 500, 5, FREE), e)
    rep.clock.tick(e + 0.2)  # paid (C = e+0.1) is critical, the others are not
    plan = rep.scheduler.schedule(rep.view)
    assert [r.id for r in plan.decodes] == [0] and plan.prefills[0][1] == 63


def test_decode_limit_beta_and_active_cap_alpha():
    rep, reqs, e = three_decoders(dynamic=False, offset=0.0, max_decodes=2, max_active=3)
    rep.add(Request(3, e, 10, 5, FREE), e)
    rep.clock.tick(e + 1.0)
    plan = rep.scheduler.schedule(rep.view)
    assert len(plan.decodes) == 2
    assert not plan.prefills  # three requests are active: α = 3 admits no fourth


def test_dynamic_offset_switches_at_the_kv_threshold():
    for blocks, expected in ((25, 10.0), (26, 5.0)):  # 24 of 25 blocks used = 96%; 24/26 = 92%
        rep = replica(num_blocks=blocks, watermark=0.0)
        r = Request(0, 0.0, 384, 2, FREE)
        rep.add(r, 0.0)
        e = step(rep, 0.0)
        assert rep.scheduler.current_offset(rep.view) == expected
        assert rep.scheduler.deadline(r, rep.view) == pytest.approx(e + 0.5 - expected * rep.view.mean_step_time)


def test_kv_use_counts_whole_prompt_reservations():
    rep = replica(num_blocks=100, token_budget=32, watermark=0.0)
    rep.add(Request(0, 0.0, 320, 5, FREE), 0.0)
    step(rep, 0.0)  # 32 of 320 prompt tokens done: 2 blocks held, 20 reserved
    assert rep.view.kv_utilisation == pytest.approx(0.02)
    assert rep.scheduler.kv_use(rep.view) == pytest.approx(0.20)


def test_a_decode_short_of_kv_preempts_the_paused_prefill_first():
    rep = replica(num_blocks=5, token_budget=32, order="fcfs", watermark=0.0, dynamic=False, offset=1e6)
    d, p = Request(0, 0.0, 16, 10, FREE), Request(1, 0.0, 64, 5, FREE)
    rep.add(d, 0.0)
    rep.add(p, 0.0)
    e = step(rep, 0.0)  # d prefilled (1 block), p paused at 16/64 (1 block held, 3 reserved)
    assert d.is_decode and not p.is_decode and p.status is Status.RUNNING
    plan = rep.scheduler.schedule(rep.view)  # d is critical and needs its 2nd block: none is unreserved
    assert plan.preempt == [p] and plan.decodes == [d] and not plan.prefills
    step(rep, e)
    assert p.status is Status.WAITING and p.num_computed == 0


def test_without_a_paused_prefill_the_decode_preempts_itself():
    rep = replica(num_blocks=2, watermark=0.0, dynamic=False, offset=1e6)
    a, b = Request(0, 0.0, 16, 10, PAID), Request(1, 0.0, 16, 10, FREE)
    rep.add(a, 0.0)
    rep.add(b, 0.0)
    step(rep, 0.0)
    plan = rep.scheduler.schedule(rep.view)  # a (smaller C) has no block and no prefill to take one from
    assert plan.preempt == [a] and plan.decodes == [b]


@pytest.mark.parametrize("order,first", [("fcfs", 0), ("spf", 1), ("spf-priority", 2)])
def test_new_prompt_order(order, first):
    rep = replica(order=order, token_budget=8)
    for r in (Request(0, 0.0, 300, 5, FREE), Request(1, 0.1, 40, 5, FREE), Request(2, 0.2, 200, 5, PAID)):
        rep.add(r, r.arrival)
    plan = rep.scheduler.schedule(rep.view)
    assert plan.prefills[0][0].id == first


def test_variants_are_registered_with_the_papers_settings():
    assert {"slai", "slai-fcfs", "slai-spf-fixed", "slai-priority", "sarathi-spf"} <= set(scheduler_names())
    s = create_scheduler("slai")
    assert (s.token_budget, s.max_active, s.max_decodes, s.order, s.dynamic) == (512, 128, 128, "spf", True)
    assert (s.offset_low, s.offset_high, s.kv_threshold) == (5.0, 10.0, 0.96)
    f = create_scheduler("slai-fcfs")
    assert (f.order, f.dynamic, f.offset) == ("fcfs", False, 10.0)
    with pytest.raises(ValueError, match="order must be"):
        create_scheduler("slai", order="lifo")


@pytest.mark.parametrize("name", ["slai", "slai-fcfs", "slai-priority"])
def test_every_request_finishes_under_memory_pressure(name):
    reqs = make_requests(250, rate=10.0, tier=FREE)
    for r in reqs[::7]:
        r.tier = r.slo = PAID
        r.slo = PAID.slo
    result, reps = run_sim(name, reqs, num_blocks=400, max_num_seqs=64)
    assert all(r.status is Status.FINISHED and r.num_generated == r.output_len for r in reqs)
    assert reps[0].num_preemptions > 0 and reps[0].kv.free == reps[0].kv.total
    assert not reps[0].scheduler._deadline and not reps[0].scheduler._paused  # no state left behind

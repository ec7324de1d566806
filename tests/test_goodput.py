"""goodput's levers on hand-built scenarios driven through a real replica, and whole runs that must conserve
requests and keep every decode in every step."""
import pytest

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.engine.view import ReplicaView
from llmsched.metrics.steps import StepLog
from llmsched.request import SLO, Request, Status, Tier
from llmsched.schedulers import create_scheduler
from llmsched.schedulers.goodput import Goodput

from conftest import AffineStepTime, make_requests, run_sim


def replica(num_blocks=400, **params):
    return Replica(0, create_scheduler("goodput", **params), AffineStepTime(),
                   ReplicaConfig(num_blocks=num_blocks, check_invariants=True), StepLog())


def step(rep, t):
    d = rep.start_step(t)
    rep.end_step(t + d)
    return t + d


def decoding(rep, n, t=0.0, prompt=16, output=400):
    reqs = [Request(i, t, prompt, output) for i in range(n)]
    for r in reqs:
        rep.add(r, t)
    t = step(rep, t)
    assert all(r.is_decode for r in reqs)
    return reqs, t


def test_every_decode_runs_in_every_step_of_a_loaded_run():
    seen = []
    original = Goodput.schedule

    def checked(self, view):
        plan = original(self, view)
        if not plan.preempt:
            decoding_now = {r.id for r in view.running if r.is_decode}
            seen.append(len(decoding_now))
            assert {r.id for r in plan.decodes} == decoding_now  # TBT is a constraint: no decode deferred
        return plan

    Goodput.schedule = checked
    reqs = make_requests(300, rate=12.0)
    try:
        run_sim("goodput", reqs)
    finally:
        Goodput.schedule = original
    assert max(seen) > 10
    assert all(r.status is Status.FINISHED for r in reqs)


def test_the_step_lasts_at_most_the_fill_of_the_tightest_decode_slack():
    # 10 ms + 50 us/token: a 100 ms TBT target and step_fill 0.8 leave 80 ms, i.e. about 1,400 tokens of prompt
    rep = replica(tbt_target=0.1, step_fill=0.8, online=False, token_budget=8192)
    reqs, t = decoding(rep, 4)
    rep.add(Request(10, t, 5000, 5), t)
    plan = rep.scheduler.schedule(rep.view)
    chunk = sum(n for _, n in plan.prefills)
    predicted = rep.scheduler.predictor(rep.view)
    seconds = predicted.predict(4 + chunk, sum(r.num_computed + 1 for r in reqs) + chunk)
    assert 0.07 < seconds <= 0.08 + 1e-9 and 1000 < chunk < 1600
    # a tighter target in the request's own SLO shrinks the step
    rep2 = replica(tbt_target=0.1, step_fill=0.8, online=False, token_budget=8192)
    for i in range(4):
        rep2.add(Request(i, 0.0, 16, 400, Tier("paid", SLO(tbt=0.04))), 0.0)
    t2 = step(rep2, 0.0)
    rep2.add(Request(10, t2, 5000, 5), t2)
    assert sum(n for _, n in rep2.scheduler.schedule(rep2.view).prefills) < chunk / 2


def test_prompts_are_never_starved_by_a_spent_or_infeasible_time_budget():
    from llmsched.schedulers.goodput import MIN_CHUNK
    rep = replica(tbt_target=0.1, step_fill=0.9, online=False, token_budget=300)
    reqs, t = decoding(rep, 10)
    rep.clock.tick(t + 0.088)  # the decodes' slack is nearly spent: the budget leaves no time for a prompt
    rep.add(Request(20, rep.now, 5000, 5), rep.now)
    assert rep.scheduler.schedule(rep.view).prefills[0][1] == MIN_CHUNK
    slow = replica(tbt_target=0.011, step_fill=0.9, online=False, token_budget=300)
    reqs, t = decoding(slow, 10)  # 10 ms + 10 decodes: more than 90% of an 11 ms target, whatever is added
    slow.add(Request(20, t, 5000, 5), t)
    assert slow.scheduler.schedule(slow.view).prefills[0][1] == 300 - 10  # the fixed budget


def test_without_decodes_only_the_token_budget_caps_the_step_and_a_fixed_budget_ablation_caps_it_too():
    rep = replica(token_budget=8192)
    rep.add(Request(0, 0.0, 6000, 5), 0.0)
    assert rep.scheduler.schedule(rep.view).prefills[0][1] == 6000  # no decode: no TBT at stake
    fixed = replica(time_budget=False, token_budget=512)
    fixed.add(Request(0, 0.0, 6000, 5), 0.0)
    assert fixed.scheduler.schedule(fixed.view).prefills[0][1] == 512


def test_shortest_uncached_first_but_a_request_past_its_ttft_goes_behind_those_that_can_still_meet():
    rep = replica(ttft_target=1.0)
    late = Request(0, 0.0, 50, 5)        # shortest, but arrived 2 s ago: its TTFT is lost
    long = Request(1, 1.9, 900, 5)
    short = Request(2, 1.95, 300, 5)
    for r in (late, long, short):
        rep.add(r, r.arrival)
    rep.clock.tick(2.0)
    order = [r.id for _, r in rep.scheduler._ordered(rep.view, [], rep.view.waiting, 2.0, 5e-5)]
    assert order == [2, 1, 0]
    spf = replica(ttft_target=1.0, order="spf")
    for r in (Request(0, 0.0, 50, 5), Request(1, 1.9, 900, 5), Request(2, 1.95, 300, 5)):
        spf.add(r, r.arrival)
    assert [r.id for _, r in spf.scheduler._ordered(spf.view, [], spf.view.waiting, 2.0, 5e-5)] == [0, 2, 1]


def test_cached_prompt_tokens_cost_nothing_in_the_order_where_the_view_reports_them():
    class CachingView(ReplicaView):  # the prefix cache's view adds this; the order must read it
        __slots__ = ()

        def cached_tokens(self, req):
            return 800 if req.id == 1 else 0

    rep = replica()
    for r in (Request(0, 0.0, 300, 5), Request(1, 0.0, 900, 5)):
        rep.add(r, 0.0)
    view = CachingView(rep)
    assert [r.id for _, r in rep.scheduler._ordered(view, [], view.waiting, 0.0, 5e-5)] == [1, 0]
    assert [r.id for _, r in rep.scheduler._ordered(rep.view, [], rep.view.waiting, 0.0, 5e-5)] == [0, 1]


def test_admission_keeps_held_and_promised_kv_under_the_threshold():
    rep = replica(num_blocks=100, kv_admit=0.5)
    reqs, t = decoding(rep, 1, prompt=16 * 30)       # 30 blocks held, its next decode takes a 31st
    for i, n in enumerate((16 * 10, 16 * 15, 16 * 5)):  # 10 fits (41 <= 50), 15 does not, 5 does (46)
        rep.add(Request(10 + i, t, n, 5), t)
    plan = rep.scheduler.schedule(rep.view)
    assert [r.id for r, _ in plan.prefills] == [12, 10]  # shortest first, the one that would cross 50% waits
    idle = replica(num_blocks=100, kv_admit=0.5)
    idle.add(Request(0, 0.0, 16 * 80, 5), 0.0)           # alone on an idle replica: admitted, never stalled
    assert idle.scheduler.schedule(idle.view).prefills


def test_with_every_seat_taken_only_a_prompt_already_seated_advances():
    rep = Replica(0, create_scheduler("goodput", token_budget=64, online=False), AffineStepTime(),
                  ReplicaConfig(num_blocks=400, max_num_seqs=2, check_invariants=True), StepLog())
    short, long = Request(0, 0.0, 16, 400), Request(1, 0.0, 16 * 20, 5)
    for r in (short, long):
        rep.add(r, 0.0)
    t = step(rep, 0.0)                                  # short prefilled whole, long a first chunk of 48
    assert short.is_decode and 0 < long.num_computed < long.prompt_len
    for i in range(5):                                  # shorter than long's rest: first in the order, no seat
        rep.add(Request(10 + i, t, 16, 5), t)
    plan = rep.scheduler.schedule(rep.view)
    assert [(r.id, n) for r, n in plan.prefills] == [(1, 63)] and plan.decodes == [short]


@pytest.mark.parametrize("evict, victim", [("cheapest", 1), ("newest", 0)])  # admitted shortest first: b, c, a
def test_a_decode_short_of_kv_evicts_the_cheapest_to_recompute(evict, victim):
    rep = replica(num_blocks=8, evict=evict, kv_admit=1.0)
    a, b, c = Request(0, 0.0, 48, 50), Request(1, 0.0, 16, 50), Request(2, 0.0, 32, 50)
    for r in (a, b, c):
        rep.add(r, 0.0)
    step(rep, 0.0)  # 3 + 1 + 2 = 6 blocks held, 2 free; every decode crosses into a new block next
    assert rep.view.free_blocks == 2 and all(r.is_decode for r in (a, b, c))
    plan = rep.scheduler.schedule(rep.view)
    assert [r.id for r in plan.preempt][0] == victim
    assert not plan.prefills


@pytest.mark.parametrize("params", [{}, {"order": "fcfs", "evict": "newest"}, {"kv_admit": 0.6},
                                    {"time_budget": False}, {"tpot_target": 0.05, "tbt_target": None},
                                    {"defer_tokens": 256}])
def test_runs_conserve_requests_under_kv_pressure(params):
    reqs = make_requests(200, rate=20.0, prompt=(10, 1200))
    _, reps = run_sim("goodput", reqs, num_blocks=300, params=params)
    assert all(r.status is Status.FINISHED for r in reqs)
    assert reps[0].view.free_blocks == reps[0].view.total_blocks


@pytest.mark.parametrize("params, message", [
    ({"step_fill": 0}, "step_fill must be in (0, 1]"),
    ({"kv_admit": 1.5}, "kv_admit must be in (0, 1]"),
    ({"order": "lifo"}, "order must be one of slo-spf, spf, fcfs"),
    ({"evict": "oldest"}, "evict must be one of cheapest, newest"),
    ({"tbt_target": None}, "give tbt_target or tpot_target"),
    ({"ttft_target": -1}, "ttft_target must be a positive number"),
])
def test_bad_parameters_are_refused_naming_them(params, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        create_scheduler("goodput", **params)


def test_the_predictor_is_corrected_online_by_observed_steps():
    rep = replica(online=True)
    sched = rep.scheduler
    reqs, t = decoding(rep, 8)
    for _ in range(30):
        t = step(rep, t)
    # the linear fit to the affine model is near exact: the correction stays near 1
    assert 0.9 < sched._ratio[0] < 1.1
    plan = rep.scheduler.schedule(rep.view)
    sched._pending = 0.01
    sched.on_step_end(rep.view, plan, 0.02)  # a step twice as long as predicted moves the ratio up fast
    assert sched._ratio[0] > 1.2

"""FairBatching: envelope, Algorithm 1, time budget, PAB, admission, routers, SLO checks."""
from array import array
from types import SimpleNamespace

import numpy as np
import pytest

from llmsched.batchtime.linear import LinearBatchTime
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.metrics.requests import RequestLog
from llmsched.metrics.steps import StepLog
from llmsched.metrics.tpot_attainment import attainment, slo_met, tpot_values
from llmsched.request import SLO, Request, Status, Tier
from llmsched.routing.registry import make_router
from llmsched.schedulers import create_scheduler
from llmsched.schedulers.fairbatching.envelope import request_slo, slack, token_deadline
from llmsched.schedulers.fairbatching.formation import Task, budget_and_groups, form_batch
from llmsched.schedulers.fairbatching.pab import compute_pab, pab_from_slacks
from llmsched.schedulers.fairbatching.predictor import StepPredictor
from llmsched.sim.simulator import simulate

from conftest import ListSource, make_requests, run_sim

TIER = Tier("slo", SLO(ttft=0.5, tpot=0.05))


def req(id=0, arrival=1.0, prompt=100, generated=0, computed=0, tier=TIER):
    r = Request(id, arrival, prompt, 50, tier)
    r.num_generated, r.num_computed = generated, computed
    return r


def test_deadlines_and_slack_by_hand():
    assert token_deadline(1.0, 0.5, 0.05, 0) == 1.5
    assert token_deadline(1.0, 0.5, 0.05, 4) == pytest.approx(1.7)
    prefill = req(generated=0)
    assert slack(prefill, 1.2, 0.5, 0.05) == pytest.approx(0.3)   # remaining TTFT margin
    decode = req(generated=3, computed=102)
    assert slack(decode, 1.6, 0.5, 0.05) == pytest.approx(0.05)   # token 3 due at 1.65
    assert slack(decode, 1.7, 0.5, 0.05) == pytest.approx(-0.05)  # behind its envelope


def test_request_slo_defaults_and_tbt_stand_in():
    assert request_slo(req(tier=Tier("t", SLO(tbt=0.1))), 0.5, 0.05) == (0.5, 0.1)
    assert request_slo(req(tier=Tier("t", SLO())), 0.7, 0.03) == (0.7, 0.03)
    assert request_slo(req(), 9, 9) == (0.5, 0.05)


def task(id, slack, decode, q=1, k=0, tpot=0.05):
    return Task(id, slack, float(id), id, decode, q, k, tpot)


def test_algorithm1_groups_and_order():
    tasks = [task(0, 0.30, True), task(1, 0.02, True), task(2, 0.40, False, q=200), task(3, 0.10, False, q=100),
             task(4, 0.09, True), task(5, 0.20, True)]
    b0, tau, urgent, prefills, others = budget_and_groups(tasks)
    assert b0 == 0.05 and tau == 0.05          # max(min decode slack 0.02, min TPOT 0.05)
    assert [t.id for t in urgent] == [1, 4]    # slack < B0 + TPOT = 0.1, by slack
    assert [t.id for t in prefills] == [3, 2]  # by slack (earliest TTFT deadline first)
    assert [t.id for t in others] == [5, 0]
    b0_all, *_ = budget_and_groups([task(0, 0.3, True), task(1, 0.2, False)], "all")
    assert b0_all == 0.2
    only_prefills, *_ = budget_and_groups([task(1, 0.4, False, q=9)])
    assert only_prefills == 0.4                 # no decode: min over all (Alg. 1 literally)


def test_formation_fills_in_group_order_chunks_and_keeps_scanning():
    b, c = 1e-4, 0.0
    ordered = [task(1, 0.0, True), task(3, 0.1, False, q=300), task(2, 0.2, False, q=5000), task(5, 0.3, True)]
    batch = form_batch(ordered, time_budget=0.05, token_budget=8192, b=b, c=c)
    got = [(t.id, n) for t, n in batch]
    # decode 1 (1 token), prefill 3 whole (300), prefill 2 chunked to the 199 tokens left, nothing for 5
    assert got == [(1, 1), (3, 300), (2, 199)]
    # the scan does not stop at a task that does not fit: a later decode still gets in
    batch = form_batch([task(2, 0.1, False, q=5000), task(5, 0.3, True)], 0.05, 8192, b, c,
                       accept=lambda t, n: n == 1)
    assert [(t.id, n) for t, n in batch] == [(5, 1)]
    # token cap binds before time
    batch = form_batch([task(2, 0.1, False, q=5000)], 10.0, 256, b, c)
    assert [(t.id, n) for t, n in batch] == [(2, 256)]


def test_exact_chunk_charges_its_own_context():
    b, c = 1e-4, 1e-5
    t = task(7, 0.1, False, q=10000, k=1000)
    literal = form_batch([t], 0.2, 8192, b, c, "literal")[0][1]
    exact = form_batch([t], 0.2, 8192, b, c, "exact")[0][1]
    assert literal == int((0.2 - c * 11000) / b + 1e-9)
    assert exact == int((0.2 - c * 1000) / (b + c) + 1e-9)


class Recorder:
    """Wraps a FairBatching instance: records B0 and the predicted time of every plan."""

    def __init__(self, sched):
        self.sched = sched
        self.records = []

    def __getattr__(self, name):
        return getattr(self.sched, name)

    def schedule(self, view):
        tasks = self.sched.tasks(view)
        b0 = budget_and_groups(tasks)[0] if tasks else None
        plan = self.sched.schedule(view)
        self.records.append((b0, plan))
        return plan


def test_time_budget_respected_by_the_predictor():
    truth = LinearBatchTime.from_fairbatching(0.01, 5e-5, 2e-8)
    sched = Recorder(create_scheduler("fairbatching", a=0.01, b=5e-5, c=2e-8))
    rep = Replica(0, sched, truth, ReplicaConfig(num_blocks=4000, check_invariants=True), StepLog())
    reqs = make_requests(300, rate=12.0, prompt=(50, 3000), output=(2, 200), tier=TIER)
    result = simulate(ListSource(reqs), [rep])
    durations = np.frombuffer(result.steps.duration)
    b0s = [b0 for b0, plan in sched.records if plan.has_work]
    assert len(b0s) == len(durations) > 100
    over = [(d, b0) for d, b0 in zip(durations, b0s) if d > b0 + 1e-9]
    # only the progress guard (one task alone) may exceed B0; with B0 >= 50 ms and this truth it never has to
    assert not over
    assert max(durations) > 0.2  # prefills did use the banked decode slack, well beyond the 50 ms TPOT floor
    assert all(r.status is Status.FINISHED for r in reqs)


def test_pab_closed_form_by_hand():
    # Appendix A: TTFT 0.5, TPOT 0.05, a 10 ms, b 0.1 ms, c 1 µs; a decode with slack 0.1 and context 1000,
    # a queued prefill of 500 tokens with slack 0.45.
    n_batches = (0.5 - 0.1) / 0.05 + 1                         # 9 steps
    r_tasks = 8 * (1e-4 + 1e-6 * 1000) + 1 * (1e-4 + 1e-6 * 500)
    expected = (0.5 - n_batches * 0.01 - r_tasks) / (1e-4 + 1e-6) - 500
    assert expected == pytest.approx(3466.3366, rel=1e-6)
    got = pab_from_slacks([0.1, 0.45], [1000, 500], 500, 0.5, 0.05, 0.01, 1e-4, 1e-6)
    assert got == pytest.approx(expected)
    decode = req(0, arrival=0.0, prompt=990, generated=10, computed=999)   # slack 0.5+0.5-0.9 = 0.1
    prefill = req(1, arrival=0.45, prompt=500)                             # slack 0.45+0.5-0.9 = 0.05
    got = compute_pab([decode, prefill], 0.9, 0.5, 0.05, 0.01, 1e-4, 1e-6)
    want = pab_from_slacks([0.1, 0.05], [1000, 500], 500, 0.5, 0.05, 0.01, 1e-4, 1e-6)
    assert got == pytest.approx(want)
    assert compute_pab([], 0.0, 0.5, 0.05, 0.01, 1e-4, 1e-6) == pytest.approx(0.49 / 1.01e-4)


def test_pab_admission_never_admits_beyond_pab():
    sched = create_scheduler("fairbatching-pab", a=0.01, b=5e-5, c=2e-8)
    seen = []
    original = sched.on_arrival

    def spy(r, view):
        seen.append((r, sched.pab(view)))
        return original(r, view)

    sched.on_arrival = spy
    truth = LinearBatchTime.from_fairbatching(0.01, 5e-5, 2e-8)
    rep = Replica(0, sched, truth, ReplicaConfig(num_blocks=4000, check_invariants=True), StepLog())
    reqs = make_requests(400, rate=40.0, prompt=(500, 4000), output=(2, 100), tier=TIER)
    result = simulate(ListSource(reqs), [rep])
    admitted = [(r, p) for r, p in seen if r.status is not Status.REJECTED]
    rejected = [(r, p) for r, p in seen if r.status is Status.REJECTED]
    assert admitted and rejected
    assert all(r.prompt_len <= p for r, p in admitted)
    assert all(r.prompt_len > p and "PAB" in r.reject_reason for r, p in rejected)
    assert result.requests.column("status").tolist().count(int(Status.REJECTED)) == len(rejected)


def fake_replicas(budgets):
    return [SimpleNamespace(index=k, scheduler=SimpleNamespace(pab=lambda view, now, b=b: b), view=None)
            for k, b in enumerate(budgets)]


@pytest.mark.parametrize("name, prompt, want", [
    ("pab", 300, 1), ("pab-first-fit", 300, 0), ("pab-best-fit", 300, 2),
    ("pab", 5000, 1), ("pab-first-fit", 5000, 1), ("pab-best-fit", 5000, 1)])
def test_pab_router_selection(name, prompt, want):
    reps = fake_replicas([400, 1000, 350])
    assert make_router(name).route(Request(0, 0.0, prompt, 5), reps, None) == want


def test_pab_router_decrements_its_view_until_the_next_report():
    reps = fake_replicas([1000, 900])
    router = make_router("pab-delayed")  # reports refreshed every 0.1 s
    picks = [router.route(Request(i, 0.01 * i, 300, 5), reps, None) for i in range(4)]
    assert picks == [0, 1, 0, 1]  # 1000 -> 700 < 900 -> 600 < 700 -> 400 < 600
    assert router.budget == [400, 300]
    assert router.route(Request(9, 0.2, 300, 5), reps, None) == 0  # fresh report: 1000 vs 900 again
    fresh = make_router("pab")  # delay 0: every arrival sees the engines' own numbers
    assert [fresh.route(Request(i, 0.01 * i, 300, 5), reps, None) for i in range(3)] == [0, 0, 0]


def test_vllm_dp_router_scores_waiting_four_times_running():
    def rep(w, r):
        return SimpleNamespace(view=SimpleNamespace(waiting=[0] * w, running=[0] * r, num_running=r, swapped=[]))
    reps = [rep(1, 0), rep(0, 3), rep(0, 5)]      # scores 4, 3, 5
    router = make_router("vllm-dp")
    assert router.route(Request(0, 0.0, 10, 5), reps, None) == 1
    assert router.counts[1] == [1, 3]             # optimistic increment: now 7
    assert router.route(Request(1, 0.01, 10, 5), reps, None) == 0  # 4 < 5 < 7 (counts not republished yet)


def logged(arrival, token_times, ttft_slo=0.5, tpot_slo=0.05):
    r = Request(0, arrival, 10, len(token_times), Tier("t", SLO(ttft=ttft_slo, tpot=tpot_slo)))
    r.token_times = array("d", token_times)
    r.first_token, r.last_token, r.finish = token_times[0], token_times[-1], token_times[-1]
    r.num_generated = len(token_times)
    r.status = Status.FINISHED
    return r


def test_envelope_cumulative_and_mean_tpot_checks():
    log = RequestLog()
    # first token early (0.1 s), then slow tokens: behind the cumulative TPOT, within the envelope
    log.record(logged(0.0, [0.1, 0.2, 0.3, 0.4]))
    # early tokens then a long gap: fine for the mean, not for the envelope (token 2 after 0.5+0.1)
    log.record(logged(0.0, [0.4, 0.41, 0.7, 0.71]))
    # TTFT missed
    log.record(logged(0.0, [0.6, 0.61]))
    v = tpot_values(log)
    assert v["envelope"][0] == pytest.approx(max((0.2 - 0.5) / 1, (0.3 - 0.5) / 2, (0.4 - 0.5) / 3))
    assert v["cumulative"][0] == pytest.approx(0.1)
    assert v["envelope"][1] == pytest.approx(max(-0.09, 0.1, 0.21 / 3))
    assert v["mean"][1] == pytest.approx(0.31 / 3)
    assert slo_met(log, check="envelope").tolist() == [True, False, False]
    assert slo_met(log, check="cumulative").tolist() == [False, False, False]
    assert slo_met(log, check="mean").tolist() == [False, False, False]
    att = attainment(log)
    assert att["envelope"] == pytest.approx(1 / 3) and att["ttft"] == pytest.approx(2 / 3)


def test_predictor_refits_online_from_observed_steps():
    p = StepPredictor(0.02, 1e-3, 0.0, online=True, window=500, every=100)
    rng = np.random.default_rng(0)
    for _ in range(300):
        tokens, context = int(rng.integers(1, 4000)), int(rng.integers(100, 200000))
        p.observe(tokens, context, 0.01 + 5e-5 * tokens + 2e-8 * context)
    assert p.refits == 3
    assert (p.a, p.b, p.c) == pytest.approx((0.01, 5e-5, 2e-8), rel=1e-6)
    off = StepPredictor(0.02, 1e-3)
    off.observe(10, 10, 1.0)
    assert off.refits == 0 and off.a == 0.02


def test_fairbatching_finishes_everything_with_kv_pressure():
    reqs = make_requests(200, rate=20.0, tier=TIER)
    result, reps = run_sim("fairbatching", reqs, num_blocks=300)
    assert all(r.status is Status.FINISHED and r.num_generated == r.output_len for r in reqs)
    assert sum(r.preemptions for r in reqs) > 0


@pytest.mark.parametrize("name", ["fairbatching-fb", "fairbatching-tb"])
def test_ablation_variants_keep_their_token_budget(name):
    reqs = make_requests(150, rate=10.0, tier=TIER)
    result, _ = run_sim(name, reqs, params={"fixed_token_budget": 256})
    tokens = np.frombuffer(result.steps.prefill_tokens, dtype=np.int64) + \
        np.frombuffer(result.steps.num_decodes, dtype=np.int64)
    if name == "fairbatching-fb":
        assert tokens.max() <= 256
    assert all(r.status is Status.FINISHED for r in reqs)


def test_bad_parameters_are_clear_errors():
    with pytest.raises(ValueError, match="capacity must be one of"):
        create_scheduler("fairbatching", capacity="tokens")
    with pytest.raises(ValueError, match="give all of a, b, c"):
        create_scheduler("fairbatching", a=0.01)
    with pytest.raises(ValueError, match="ttft_slo"):
        create_scheduler("fairbatching", ttft_slo=0)



def test_decodes_only_step_plans_as_the_general_path():
    """The all-running-decodes shortcut returns the general path's plan (time, token and KV limits, tied slacks,
    two tiers), or defers to it; budget_and_groups' sort gives (slack, arrival, id) order."""
    from llmsched.schedulers.fairbatching.formation import in_order
    rng = np.random.default_rng(7)
    tiers = [TIER, Tier("loose", SLO(ttft=2.0, tpot=0.1))]
    shortcuts = 0
    for trial in range(300):
        reqs = []
        for i in range(int(rng.integers(1, 40))):
            r = req(id=i, arrival=float(rng.integers(0, 3)), prompt=int(rng.integers(1, 80)),
                    generated=int(rng.integers(1, 60)), tier=tiers[int(rng.integers(0, 2))])
            r.num_computed = r.prompt_len + r.num_generated - 1 - int(trial % 7 == 0 and i == 0)
            r.num_blocks = -(-r.num_computed // 16) - int(rng.integers(0, 3) == 0 and trial % 3 == 0)
            r.status = Status.RUNNING
            reqs.append(r)
        view = SimpleNamespace(now=float(rng.uniform(0, 5)), running=reqs, waiting=[], swapped=[], block_size=16,
                               free_blocks=int(rng.integers(0, 12)), max_num_seqs=64,
                               max_num_batched_tokens=int(rng.integers(1, 64)), batch_time=None,
                               preempt_frees=lambda r: r.num_blocks)  # no prefix cache: a preemption frees all
        capacity = ("time", "token", "fixed")[trial % 3]
        fb = create_scheduler("fairbatching", a=1e-3, b=float(rng.choice([1e-4, 1e-3])), c=1e-6, capacity=capacity)
        general = fb._any_step(view)
        shortcut = fb._decodes_only(view)
        if shortcut is not None:
            shortcuts += 1
            assert shortcut.decodes == general.decodes and not general.prefills and not general.preempt
        tasks = fb.tasks(view)
        in_order(tasks)
        assert [(t.slack, t.arrival, t.id) for t in tasks] == sorted((t.slack, t.arrival, t.id) for t in tasks)
    assert shortcuts > 100


def test_a_recomputation_that_cannot_fit_beside_loaded_prompts_gives_them_the_seat():
    """A decode instance with one seat (max_num_seqs=1) whose cache is mostly held by two prompts a prefill instance
    sent (loaded, waiting for their last token), and two requests preempted by recomputation, older and so more
    urgent, each needing more blocks than the loaded prompts leave. The most urgent recomputes until it finds no
    block; the progress guard then preempted it for the other recomputation, which stalled the same way, for ever
    (a livelock: found by the conservation fuzz, FB-TB in a disaggregated fleet's decode pool). vLLM 0.32 admits
    its KV-holding waiting queue first: a loaded prompt takes the seat, finishes and frees the cache, and every
    request finishes."""
    from llmsched.engine import remote_kv

    truth = LinearBatchTime.from_fairbatching(0.01, 5e-5, 2e-8)
    sched = create_scheduler("fairbatching-tb", a=0.01, b=5e-5, c=2e-8)
    # 16-token blocks: each loaded 560-token prompt holds 35 and ends at 37; a recomputation of 230 + 107 tokens
    # needs 22, and 88 - 70 = 18 are left beside the loaded prompts
    config = ReplicaConfig(num_blocks=88, max_num_seqs=1, max_num_batched_tokens=5, check_invariants=True)
    rep = Replica(0, sched, truth, config, StepLog())
    now = 10.0
    preempted = [Request(i, 0.0, 230, 200, TIER) for i in (0, 1)]
    for r in preempted:
        assert rep.add(r, now)
        r.num_generated = 107  # recomputation preemption: its tokens kept, no KV
    loaded = [Request(i, now, 560, 20, TIER) for i in (2, 3)]
    for r in loaded:
        assert rep.receive(r, now)
    remote_kv.reserve(rep)
    assert rep.take_reserved() == loaded
    for r in loaded:
        rep.loaded(r, now)
    assert rep.kv.free == 18
    steps = 0
    while rep.num_outstanding and steps < 3000:
        duration = rep.start_step(now)
        assert duration is not None, "idle with work"
        now += duration
        rep.end_step(now)
        steps += 1
    finished = rep.take_completed()
    assert sorted(r.id for r in finished) == [0, 1, 2, 3], (steps, [(r.id, r.num_generated) for r in finished])
    assert all(r.status is Status.FINISHED and r.num_generated == r.output_len for r in finished)
    assert rep.kv.free == 88

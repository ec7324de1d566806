"""priority on a disaggregated fleet's decode pool (Scheduler.serves_transferred_kv): the prompts a prefill instance
sent wait at the front of their class holding their blocks and need no new block to run, so they go on when a more
urgent request that holds none cannot be admitted (vLLM 0.32 drains its KV-holding waiting queue first). Before,
admissions stopped at that head for every class, and a decode instance with nothing running waited for ever with the
blocks its head needed held by the prompts behind it (the conservation fuzz found it as soon as priority could run a
decode pool)."""
from __future__ import annotations

from conftest import AffineStepTime

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import RunConfig, build_source
from llmsched.fleet_setup import simulate_fleet_config
from llmsched.request import Request, Status, Tier
from llmsched.schedulers.registry import create_scheduler

URGENT, LATER = Tier("urgent", priority=0), Tier("later", priority=1)


def drive(rep: Replica, t: float = 0.0) -> list[Request]:
    """Steps ``rep`` until it holds nothing (a sent prompt's transfer takes no time; an idle replica is woken when its
    policy asked, as WAIT's ``max_wait`` asks); the requests in the order they took their first step."""
    started = []
    while rep.num_outstanding:
        d = rep.start_step(t)
        reserved = rep.take_reserved()
        for r in reserved:
            rep.loaded(r, t)
        if d is None:
            if not reserved:
                assert rep.wake_at is not None, f"idle with work left: {len(rep.waiting)} waiting, {rep.kv.free} free"
                t = rep.wake_at
            continue
        started += [r for r, _ in rep.clock.plan.prefills if r not in started]
        t += d
        rep.end_step(t)
        rep.take_completed()
    return started


def test_sent_prompts_of_a_later_class_pass_an_urgent_request_that_does_not_fit():
    """Two prompts of the later class arrive from a prefill instance (4 blocks each of the 12); an urgent request
    that holds no KV needs 7 blocks at once (vLLM's full-prompt gate), more than the 4 left, and nothing runs that
    it could preempt. The sent prompts run first, finish, and their blocks admit it."""
    cfg = ReplicaConfig(num_blocks=12, block_size=16, max_num_batched_tokens=256, check_invariants=True)
    rep = Replica(0, create_scheduler("priority"), AffineStepTime(), cfg)
    sent = [Request(i, 0.0, 64, 3, tier=LATER) for i in range(2)]
    for r in sent:
        rep.receive(r, 0.0)
    assert rep.start_step(0.0) is None  # the scheduling point reserves their blocks; nothing to run yet
    for r in rep.take_reserved():
        rep.loaded(r, 0.0)
    assert rep.kv.free == 4
    urgent = Request(2, 0.0, 100, 2, tier=URGENT)
    rep.add(urgent, 0.0)
    order = drive(rep)
    assert order == [*sent, urgent]
    assert all(r.status is Status.FINISHED for r in (*sent, urgent)) and rep.kv.free == 12


def test_a_priority_decode_pool_serves_every_request_of_two_classes():
    """A whole 1P1D run with priority on both pools, two priority classes and a decode instance short of KV: every
    request finishes, each decoded where it was sent."""
    cfg = RunConfig(scheduler="priority", disaggregate="1P1D", num_requests=200, rate=20.0,
                    tiers="gold:ttft=1:priority=0:share=0.3,bronze:ttft=5:priority=1",
                    decode_pool={"num_blocks": 600}, seed=3)
    result, _ = simulate_fleet_config(cfg, build_source(cfg))
    cols = result.requests.cols
    assert set(cols["status"]) == {int(Status.FINISHED)} and len(cols["status"]) == 200
    assert set(cols["prefill_replica"]) == {0} and set(cols["replica"]) == {1}

"""vtc and wfq on a disaggregated fleet's decode pool (Scheduler.serves_transferred_kv). Two rules keep such an
instance live: the prompts a prefill instance sent, which hold their blocks and need no new one, go on when another
tenant's head that holds none does not fit (vLLM 0.32 drains its KV-holding waiting queue first); and while blocks are
held outside the running set a prompt is admitted in chunks only when its whole prompt fits (vLLM's full-prompt gate).
Without the first a decode instance stalled with nothing running; without the second a recompute admitted with a
chunk that fit preempted itself at its next chunk every step (conservation-fuzz seeds 3,222 and 2,381, run by
scripts/decode_pool_fuzz.py). A third rule, nothing admitted in a plan after a KV preemption while such blocks are
held, ended a livelock of two requests sharing a prefix (seed 24,067)."""
from __future__ import annotations

import pytest
from conftest import AffineStepTime

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import RunConfig, build_source
from llmsched.fleet_setup import simulate_fleet_config
from llmsched.request import Request, Status, Tenant
from llmsched.schedulers.registry import create_scheduler
import test_fuzz_conservation as fuzz
from test_disagg_priority import drive

A, B = Tenant("a", weight=1000), Tenant("b")  # a's weight puts its turn first under wfq too


def replica(scheduler: str, num_blocks: int, budget: int) -> Replica:
    cfg = ReplicaConfig(num_blocks=num_blocks, block_size=16, max_num_batched_tokens=budget, check_invariants=True)
    return Replica(0, create_scheduler(scheduler, token_budget=budget), AffineStepTime(), cfg)


@pytest.mark.parametrize("scheduler", ["vtc", "wfq"])
def test_sent_prompts_of_one_tenant_pass_another_tenants_head_that_does_not_fit(scheduler):
    """Tenant b's two prompts arrive from a prefill instance (4 blocks each of the 12); tenant a's request holds no KV
    and needs 7 blocks, more than the 4 left, with nothing running to reclaim. Its turn comes first, so before,
    admissions stopped there and nothing ever ran. The sent prompts run first, finish, and their blocks admit it."""
    rep = replica(scheduler, 12, 2048)
    heads = [Request(0, 0.0, 100, 2, tenant=A), Request(3, 0.0, 100, 2, tenant=A)]
    rep.add(heads[0], 0.0)
    sent = [Request(1 + i, 0.0, 64, 3, tenant=B) for i in range(2)]
    for r in sent:
        rep.receive(r, 0.0)
    rep.add(heads[1], 0.0)
    order = drive(rep)
    assert order[:2] == sent and sorted(order[2:], key=lambda r: r.id) == heads
    assert all(r.status is Status.FINISHED for r in (*sent, *heads)) and rep.kv.free == 12


@pytest.mark.parametrize("scheduler", ["vtc", "wfq"])
def test_a_chunked_prompt_waits_for_its_whole_prompt_while_transfers_hold_blocks(scheduler):
    """A 20-block cache, 12 blocks held by two prompts still in transfer. A 200-token prompt (13 blocks) has a first
    112-token chunk that fits (7 blocks of the 8 free), and a second that would not: admitted so, it would preempt
    itself at its second chunk, every step. With the full-prompt gate it waits, never preempted, until the transfers
    land and their requests finish."""
    rep = replica(scheduler, 20, 112)
    sent = [Request(i, 0.0, 96, 2, tenant=B) for i in range(2)]
    for r in sent:
        rep.receive(r, 0.0)
    assert rep.start_step(0.0) is None  # the scheduling point reserves their blocks; their transfers start
    assert rep.take_reserved() == sent and rep.kv.free == 8
    long = Request(2, 0.0, 200, 2, tenant=A)
    rep.add(long, 0.0)
    t = 0.0
    for _ in range(5):  # the transfers have not landed: nothing may start that cannot finish its prompt
        d = rep.start_step(t)
        if d is None:
            break
        t += d
        rep.end_step(t)
    assert long.num_computed == 0 and long.status is Status.WAITING
    for r in sent:
        rep.loaded(r, t)
    order = drive(rep, t)
    assert order == [*sent, long] and long.status is Status.FINISHED and rep.kv.free == 20
    assert long.preemptions == 0


@pytest.mark.parametrize("scheduler", ["vtc", "wfq"])
def test_a_tenant_policy_decode_pool_serves_every_request(scheduler):
    """A whole 1P1D run, the fair policy on both pools, two tenants and a decode instance short of KV: every
    request finishes, each decoded where it was sent."""
    cfg = RunConfig(scheduler=scheduler, disaggregate="1P1D", num_requests=200,
                    tenants="heavy:rate=14:weight=2,light:rate=6", decode_pool={"num_blocks": 600}, seed=3)
    result, _ = simulate_fleet_config(cfg, build_source(cfg))
    cols = result.requests.cols
    assert set(cols["status"]) == {int(Status.FINISHED)} and len(cols["status"]) == 200
    assert set(cols["prefill_replica"]) == {0} and set(cols["replica"]) == {1}


@pytest.mark.parametrize("seed", [2381, 3222, 3310, 3997, 24067])
def test_the_fuzz_seeds_that_failed_with_vtc_and_wfq_on_every_decode_pool_run(seed, monkeypatch):
    """The conservation fuzz's configs that failed as vtc and wfq began to serve decode pools
    (``scripts/decode_pool_fuzz.py vtc,wfq``): livelocks (2,381 and 3,310: the full-prompt gate; 24,067: no
    admission after a KV preemption), a stall (3,222: KV holders go on) and a prefill instance's plan of preemptions
    alone (3,997). Each now runs to the end with every request accounted for."""
    monkeypatch.setattr(fuzz, "decode_schedulers", lambda: ["vtc", "wfq"])
    kind, message = fuzz.outcome(seed)
    assert kind == "ok", message

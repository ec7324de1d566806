"""Orca, FasterTransformer and InferMax's settings on a disaggregated fleet's decode pool
(Scheduler.serves_transferred_kv): policies that keep a ledger of reservations. Orca and FasterTransformer reserve
``max_model_len`` per request, a ledger that never overruns a colocated cache. On a decode instance, prompts a
prefill instance sent wait holding their blocks, and transfers take blocks as they start: both ledgers leave those
blocks out (a sent prompt brings its own into its reservation), a prompt waits for free blocks, and a decode short of
a block preempts the newest, as vLLM does. Before, the decode-pool fuzz (``scripts/decode_pool_fuzz.py``) failed 4
(orca) and 12 (fastertransformer) of 583 disaggregated seeds: plans past the free blocks, and stalls."""
from __future__ import annotations

import pytest
from conftest import AffineStepTime

from llmsched.disagg_config import check_decode_schedulers
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import RunConfig
from llmsched.fleet.deciders import Always
from llmsched.fleet.disagg import unbuilt
from llmsched.fleet.fleet import Fleet
from llmsched.fleet.pool import Pool
from llmsched.request import Request, Status
from llmsched.schedulers.registry import create_scheduler
import test_fuzz_conservation as fuzz
from test_disagg_priority import drive
from test_disagg_wait_rad import sent_beside_one_running
from tests.colocated_only import NAME

# InferMax's settings that run a decode pool (Kim et al. Table 1, with the EF and oracle variants)
INFERMAX_DECODE = ("infermax", "infermax-ft", "infermax-ft-ef", "infermax-oracle", "infermax-orca", "infermax-orca-ef",
                   "infermax-sarathi", "infermax-sarathi-ef", "infermax-sarathi-nocp", "infermax-sarathi-pc",
                   "infermax-sarathi-pc-ef", "infermax-vllm", "infermax-vllm-ef", "infermax-vllm-hy")
RANKED = ("infermax-rank-i", "infermax-rank-o", "infermax-rank-org")  # §4.6: one group ranked by arrival, I or O
NOT_STATIC = ",".join(INFERMAX_DECODE[:1] + INFERMAX_DECODE[3:])


def replica(scheduler: str, **limits) -> Replica:
    """Six blocks of 16 tokens and a 96-token ``max_model_len``: one reservation fills the cache."""
    cfg = ReplicaConfig(**{"num_blocks": 6, "block_size": 16, "max_model_len": 96, "max_num_batched_tokens": 512,
                           "check_invariants": True, "oracle": True, **limits})
    return Replica(0, create_scheduler(scheduler), AffineStepTime(), cfg)


@pytest.mark.parametrize("scheduler", ["orca", "fastertransformer"])
def test_the_reservations_leave_out_the_blocks_a_transfer_holds(scheduler):
    """Two reservations' worth of cache (12 blocks). An 80-token prompt's KV starts to arrive (5 blocks reserved at the
    scheduling point) while two 40-token prompts that hold none wait: one reservation fits beside the transfer
    (12 - 5 = 7 blocks), so one of them is admitted, where the seats alone (12 // 6 = 2) admitted both. Everything
    then finishes without a preemption."""
    rep = replica(scheduler, num_blocks=12)
    sent, a, b = Request(0, 0.0, 80, 3), Request(1, 0.0, 40, 4), Request(2, 0.0, 40, 4)
    rep.receive(sent, 0.0)
    rep.add(a, 0.0)
    rep.add(b, 0.0)
    d = rep.start_step(0.0)
    assert rep.take_reserved() == [sent] and rep.clock.plan.prefills == [(a, 40)]
    rep.end_step(d)
    rep.loaded(sent, d)
    assert drive(rep, d) == [sent, b]
    assert all(r.status is Status.FINISHED for r in (sent, a, b)) and rep.kv.free == 12
    assert all(r.preemptions == 0 for r in (sent, a, b))


def test_both_serve_a_decode_pool_and_hold_a_prefill_instances_sent_prompts():
    for name in ("orca", "fastertransformer"):
        assert create_scheduler(name).serves_transferred_kv


@pytest.mark.parametrize("scheduler,seed", [("orca", 936), ("orca", 1486), ("fastertransformer", 273),
                                            ("fastertransformer", 879), ("infermax-orca", 6), ("infermax-orca", 21),
                                            ("infermax-orca-ef", 25), ("infermax-oracle", 21), ("infermax-ft", 252),
                                            ("infermax-ft", 273), (NOT_STATIC, 11500), ("infermax-rank-i", 612)])
def test_the_fuzz_seeds_that_failed_with_these_policies_on_every_decode_pool_run(scheduler, seed, monkeypatch):
    """Orca's 936 and 1,486 planned an admission past the free blocks beside sent prompts ("plan needs 9 more blocks,
    8 free"); FasterTransformer's 273 stalled (4 waiting, none running, 24 of 183 blocks free: a sent prompt planned
    whole past the budget) and 879 decoded past the free blocks ("1 more blocks, 0 free"); InferMax reserving
    max_model_len (6, 21) or I+O-1 (21, 25) left sent prompts waiting on an idle decode instance, and the prefill
    instances that kept them for it stalled in turn; a static batch's (252, 273) waited for ever on a cohort formed
    before sent prompts landed. 11,500 (the settings but the static ones, drawn per pool) stopped in the host
    tier's store records of an InferMax prefill instance (tests/test_tier_truths.py). Rank_I's 612 livelocked: a
    recomputing request evicted at every step by one ranked ahead that could not fit even so (below)."""
    monkeypatch.setattr(fuzz, "decode_schedulers", lambda: scheduler.split(","))
    kind, message = fuzz.outcome(seed)
    assert kind == "ok", message


@pytest.mark.parametrize("scheduler,order,preempted", [
    # Orca and FasterTransformer: the first is admitted alone beside the transfer; at its 49th token none is free, it
    # is preempted, and the sent prompt computes its last token only (before, both planned its 48 tokens whole, and
    # FasterTransformer's decode overran the cache)
    ("orca", ["first", "sent"], (1, 0)),
    ("fastertransformer", ["first", "sent"], (1, 0)),
    # InferMax reserving the prompt: admitted beside the transfer; at the sent prompt's 4th block none is free, and
    # the tail of the running order is evicted: the first (KV held, longest first) or the sent prompt (arrival)
    ("infermax", ["first", "sent"], (1, 0)),
    ("infermax-sarathi", ["first", "sent"], (0, 1)),
    # reserving max_model_len (6 blocks) or I+O-1 (59 tokens, 4 blocks): no more than 3 fit beside the transfer
    ("infermax-orca", ["sent", "first"], (0, 0)),
    ("infermax-orca-ef", ["sent", "first"], (0, 0)),
    ("infermax-vllm-ef", ["sent", "first"], (0, 0)),
    ("infermax-ft", ["sent", "first"], (0, 0)),  # a static batch formed again once the sent prompt leads the queue
])
def test_a_sent_prompt_beside_a_transfer(scheduler, order, preempted):
    """A 40-token prompt is added while a 48-token prompt's KV arrives (3 of the 6 blocks reserved at that
    scheduling point). InferMax's M (Kim et al. Algorithm 1) leaves out the blocks held outside the running set, and
    a sent prompt brings its own in; beside such blocks the step also tracks the free blocks, so a chunk or decode
    they cannot hold evicts (the tail, then itself), and a sent prompt on an idle replica is admitted whatever it
    reserves. Before, the settings reserving max_model_len or I+O-1 stalled with sent prompts waiting (the
    decode-pool fuzz: 9 to 46 of 193 seeds each)."""
    first, sent, started = sent_beside_one_running(replica(scheduler, preemption_mode="recompute"))
    assert [{first.id: "first", sent.id: "sent"}[r.id] for r in started] == order
    assert (first.preemptions, sent.preemptions) == preempted


def test_every_infermax_setting_runs_a_decode_pool_and_a_policy_that_cannot_is_named():
    """Every setting of InferMax runs a decode pool, the single ranked group (Rank_*) and a sorted waiting queue
    included; a policy of a user's own that plans no request holding KV is refused, the pool and setting named."""
    for name in (*INFERMAX_DECODE, *RANKED):
        assert create_scheduler(name).serves_transferred_kv, name
    assert create_scheduler("infermax", waiting_order="input").serves_transferred_kv
    fleet = Fleet((Pool("p", 1, role="prefill"), Pool("d", 1, role="decode")), paths=Always(unbuilt()),
                  source="fleet.toml")
    configs = {"p": RunConfig(), "d": RunConfig(scheduler=NAME, scheduler_params={"fit": False})}
    with pytest.raises(ValueError, match=f"decode pool 'd': scheduler '{NAME}' with fit=False plans"):
        check_decode_schedulers(fleet, configs)
    check_decode_schedulers(fleet, {**configs, "d": RunConfig(scheduler="infermax-rank-i")})
    check_decode_schedulers(fleet, {**configs, "d": RunConfig(scheduler="infermax",
                                                                scheduler_params={"waiting_order": "input"})})


def test_the_ranked_group_evicts_nobody_when_the_eviction_cannot_make_room():
    """Eight blocks of 16 tokens, 16-token chunks, Rank_org. A 20-token prompt (A) decodes and a 48-token prompt's
    KV (S) is on its way (3 blocks reserved), when a 96-token prompt (B) ranked first (by arrival, then id) arrives:
    its first chunk has a free block, but its 6-block reservation exceeds the 5 blocks M has beside S's even with A
    evicted. Before, B evicted A all the same (Kim et al.'s Algorithm 1, step 4: victims, then itself), and did so
    at every step while the blocks stayed held: the decode-pool fuzz's seed 612 livelocked so under Rank_I. Now A
    decodes on; once S is admitted, its blocks are M's, and B evicts as the paper does."""
    cfg = ReplicaConfig(num_blocks=8, block_size=16, max_model_len=128, max_num_batched_tokens=16, max_num_seqs=4,
                        preemption_mode="recompute", check_invariants=True)
    rep = Replica(0, create_scheduler("infermax-rank-org"), AffineStepTime(), cfg)
    a = Request(1, 0.0, 20, 6)
    rep.add(a, 0.0)
    t = 0.0
    while not a.num_generated:
        t = rep.start_step(t) + t
        rep.end_step(t)
    sent = Request(2, 1.0, 48, 3)
    rep.receive(sent, t)
    b = Request(0, 0.0, 96, 2)
    rep.add(b, t)
    d = rep.start_step(t)  # (S's blocks are reserved as the step is planned)
    assert rep.transferring == [sent]
    plan = rep.clock.plan
    assert (plan.decodes, plan.prefills, plan.preempt) == ([a], [], [])
    for r in rep.take_reserved():
        rep.loaded(r, t)
    rep.end_step(t + d)
    drive(rep, t + d)
    assert {r.status for r in (a, b, sent)} == {Status.FINISHED} and rep.kv.free == 8


@pytest.mark.parametrize("order", ["input", "output"])
def test_a_sorted_waiting_queue_puts_the_requests_holding_kv_first(order):
    """Five blocks of 16 tokens, nothing running: a sent 48-token prompt (3 blocks) waits beside a new 40-token
    prompt sorted ahead of it (shorter input, or output). The new one's 3 blocks are not free, and in the waiting
    group a candidate that does not fit stops it (Kim et al. Algorithm 1): before, the replica idled for ever. Now
    the sent prompt goes first, as at the queue's front, and the new one runs once it leaves."""
    cfg = ReplicaConfig(num_blocks=5, block_size=16, max_model_len=80, max_num_batched_tokens=512, oracle=True,
                        check_invariants=True)
    rep = Replica(0, create_scheduler("infermax-oracle", waiting_order=order, reserve="prompt"), AffineStepTime(), cfg)
    sent, new = Request(1, 0.0, 48, 3), Request(0, 0.0, 40, 2)
    rep.receive(sent, 0.0)
    rep.add(new, 0.0)
    assert drive(rep) == [sent, new]
    assert sent.status is Status.FINISHED and new.status is Status.FINISHED and rep.kv.free == 5

"""WAIT, Nested WAIT (Ao et al.) and RAD (Bari et al.) on a disaggregated fleet's decode pool
(Scheduler.serves_transferred_kv). A prompt a prefill instance sent waits holding its blocks; when the one running
request then finds no block, it is preempted alone so that the sent prompt can run (vLLM preempts a decode it cannot
allocate for, itself when it is the only one, and then drains its KV-holding queue). Before, each policy dropped that
preemption and the decode instance idled for ever: the decode-pool fuzz (``scripts/decode_pool_fuzz.py``) failed 7
(rad), 5 (wait) and 13 (nested-wait) of 583 disaggregated seeds. A policy's rejection of such a request also leaked
its blocks on a replica without a prefix cache (``Replica.reject``)."""
from __future__ import annotations

import pytest
from conftest import AffineStepTime

from llmsched.engine.livelock import FRUITLESS_PREEMPTIONS, Livelock, note_preemption
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.request import Request, Status
from llmsched.schedulers.registry import create_scheduler
import test_fuzz_conservation as fuzz
from test_disagg_priority import drive

POLICIES = {
    "rad": {},
    "rad-lowtbt": {},
    # (max_wait 0.1 s: a cohort alone goes on; reserve=false: the memory bound below would keep the first out)
    "wait": {"types": "1:44:3,1:44:20", "thresholds": "1,1", "reserve": False},
    "nested-wait": {"types": "1:44:3,1:44:20", "thresholds": "1,1"},
}


@pytest.mark.parametrize("scheduler", sorted(POLICIES))
def test_the_one_running_request_short_of_a_block_makes_way_for_a_sent_prompt(scheduler):
    """Six blocks of 16 tokens, one seat. A 40-token prompt is admitted (3 blocks) while a 48-token prompt's KV
    arrives from a prefill instance (3 blocks reserved at that scheduling point). At its 49th token the running
    request needs a fourth block and none is free: it is preempted, the sent prompt runs and finishes, and the first
    comes back by recompute."""
    cfg = ReplicaConfig(num_blocks=6, block_size=16, max_num_seqs=1, max_num_batched_tokens=512, oracle=True,
                        check_invariants=True)
    rep = Replica(0, create_scheduler(scheduler, **POLICIES[scheduler]), AffineStepTime(), cfg)
    first, sent, started = sent_beside_one_running(rep)
    assert started == [first, sent]
    assert first.preemptions == 1 and sent.preemptions == 0


def sent_beside_one_running(rep: Replica) -> tuple[Request, Request, list[Request]]:
    """A 40-token prompt (20 to generate) added, then a 48-token prompt's KV received (3 to generate), on ``rep``
    (six blocks of 16 tokens), driven until both finish: (first, sent, the order they took their first step)."""
    first, sent = Request(0, 0.0, 40, 20), Request(1, 0.0, 48, 3)
    rep.add(first, 0.0)
    rep.receive(sent, 0.0)
    started = drive(rep)
    assert first.status is Status.FINISHED and sent.status is Status.FINISHED and rep.kv.free == 6
    return first, sent, started


@pytest.mark.parametrize("scheduler", ["rad", "rad-lowtbt"])
def test_a_prompt_whose_next_chunk_finds_no_block_makes_way_for_a_sent_prompt(scheduler):
    """RAD never interrupts a prefill. Six blocks of 16 tokens, 16-token chunks, two seats: a 64-token prompt has run
    its first chunk when a 48-token prompt's KV arrives (3 blocks). Its fourth chunk then needs a fourth block and
    none is free; nothing decodes. Before, RAD planned nothing and the replica idled for ever (the decode-pool fuzz's
    seed 5,307, rad-lowtbt recomputing a preempted request); now the prompt is preempted, the sent prompt runs, and
    the first is prefilled again."""
    cfg = ReplicaConfig(num_blocks=6, block_size=16, max_num_seqs=2, max_num_batched_tokens=16,
                        check_invariants=True)
    rep = Replica(0, create_scheduler(scheduler), AffineStepTime(), cfg)
    first, sent = Request(0, 0.0, 64, 4), Request(1, 0.0, 48, 3)
    rep.add(first, 0.0)
    t = rep.start_step(0.0)
    rep.end_step(t)
    assert first.num_computed == 16
    rep.receive(sent, t)
    assert drive(rep, t) == [first, sent]
    assert first.status is Status.FINISHED and sent.status is Status.FINISHED and rep.kv.free == 6
    assert first.preemptions == 1 and sent.preemptions == 0


def test_wait_keeps_the_blocks_a_sent_prompt_holds_out_of_its_memory_bound():
    """The same arrivals under WAIT's memory-feasible admission (``reserve``, on by default): the KV a prefill
    instance sends is not the cohorts' to use, so the 40-token prompt (a peak of 59 tokens, 74 with a block's
    rounding) waits until the sent prompt leaves, and WAIT never preempts (Ao et al.'s guarantee). Counting the
    whole cache (96 tokens), as before, admitted it beside the transfer and it was preempted."""
    cfg = ReplicaConfig(num_blocks=6, block_size=16, max_num_seqs=1, max_num_batched_tokens=512, oracle=True,
                        check_invariants=True)
    rep = Replica(0, create_scheduler("wait", types="1:44:3,1:44:20", thresholds="1,1"), AffineStepTime(), cfg)
    first, sent = Request(0, 0.0, 40, 20), Request(1, 0.0, 48, 3)
    rep.add(first, 0.0)
    rep.receive(sent, 0.0)
    assert drive(rep) == [sent, first]
    assert first.status is Status.FINISHED and sent.status is Status.FINISHED and rep.kv.free == 6
    assert first.preemptions == 0


def test_a_rejected_request_that_waited_holding_sent_kv_gives_its_blocks_back():
    """A replica without a prefix cache: a policy's rejection of a request whose prompt KV a prefill instance sent
    frees its blocks (before, only a caching replica freed them, and the run failed its KV check)."""
    cfg = ReplicaConfig(num_blocks=6, block_size=16, check_invariants=True)
    rep = Replica(0, create_scheduler("vllm"), AffineStepTime(), cfg)
    sent = Request(0, 0.0, 48, 3)
    rep.receive(sent, 0.0)
    assert rep.start_step(0.0) is None and rep.take_reserved() == [sent]
    rep.loaded(sent, 0.0)
    assert sent.num_blocks == 3 and rep.kv.free == 3
    rep.waiting.remove(sent)
    rep.reject(sent, "refused")
    assert sent.status is Status.REJECTED and sent.num_blocks == 0 and rep.kv.free == 6
    rep.check()


@pytest.mark.parametrize("schedulers,seed", [("wait", 400), ("wait", 1880), ("nested-wait", 1263), ("rad", 85),
                                             ("rad", 398), ("wait", 881), ("wait,nested-wait", 13784),
                                             ("rad,rad-lowtbt", 5307)])
def test_the_fuzz_seeds_that_failed_with_these_policies_on_every_decode_pool_run(schedulers, seed, monkeypatch):
    """Stalls the decode-pool fuzz found (a decode instance idle with one running request short of a block and sent
    prompts holding the rest: 0 of 29, 45, 103, 48 and 899 blocks free; 13,784: WAIT with guard_memory=false planned
    prompts that did not fit beside 3 sent prompts, and the overflow rule had nothing running to evict; 5,307: a
    recompute's chunk short of a block under rad-lowtbt), and the leak of seed 881 (a WAIT decode instance rejected a
    sent prompt whose blocks stayed taken: "1 held + 24 free != 26 total")."""
    monkeypatch.setattr(fuzz, "decode_schedulers", lambda: schedulers.split(","))
    kind, message = fuzz.outcome(seed)
    assert kind == "ok", message


@pytest.mark.parametrize("scheduler", ["fastertransformer", "fcfs", "nested-wait", "orca", "vllm", "wait",
                                       "vllm-chunked"])
def test_a_sent_prompt_longer_than_the_budget_runs_its_last_token_under_a_policy_that_never_chunks(scheduler):
    """A decode instance computes a sent prompt's last token only, so a prompt longer than its token budget still
    runs. Before, the policies that never chunk rejected it as it landed (``Scheduler.unservable`` counted its whole
    length). A new 48-token prompt is still refused at arrival (as one recomputed after a preemption is)."""
    params = dict(POLICIES.get(scheduler, {}), **({"chunked_prefill": False} if scheduler == "vllm-chunked" else {}))
    cfg = ReplicaConfig(num_blocks=8, block_size=16, max_num_seqs=2, max_num_batched_tokens=16, max_model_len=64,
                        oracle=True, check_invariants=True)
    policy = create_scheduler(scheduler, **params)
    assert policy.prefill_limit(Replica(0, policy, AffineStepTime(), cfg).view) == 16
    rep = Replica(0, policy, AffineStepTime(), cfg)
    sent = Request(1, 0.0, 48, 3)
    rep.receive(sent, 0.0)
    drive(rep)
    assert sent.status is Status.FINISHED and sent.num_generated == 3 and rep.kv.free == 8
    late = Request(2, 0.0, 48, 3)
    rep.add(late, 1.0)
    assert late.status is Status.REJECTED and "48-token" in late.reject_reason


def test_a_request_preempted_without_progress_beside_kv_in_flight_is_not_a_livelock():
    """The livelock guard (engine/livelock.py) counts a request's preemptions with no token and no progress of its
    replica. Beside KV transfers still in flight the progress is to come: the conservation fuzz's seed 149,884 had
    two prompts' KV (887 of 1,080 blocks) crossing a 50 MB/s link while FairBatching swapped two prompts that could
    not both fit beside it, each preempting the other 1,000 times, and the guard stopped the run; with the guard
    waiting on the transfers, they landed and the run finished. Without a transfer the guard still fires."""
    cfg = ReplicaConfig(num_blocks=12, block_size=16, max_num_seqs=1, max_num_batched_tokens=16)
    rep = Replica(0, create_scheduler("vllm-chunked"), AffineStepTime(), cfg)
    sent, prompt = Request(1, 0.0, 128, 2), Request(0, 0.0, 96, 2)
    rep.receive(sent, 0.0)
    rep.add(prompt, 0.0)
    rep.start_step(0.0)  # the scheduling point reserves the transfer's blocks; the prompt's blocks are not free
    assert rep.transferring == [sent] and rep.take_reserved() == [sent]
    for _ in range(FRUITLESS_PREEMPTIONS + 100):
        note_preemption(rep, prompt)
    rep.loaded(sent, 0.0)
    drive(rep)
    assert sent.status is Status.FINISHED and prompt.status is Status.FINISHED and rep.kv.free == 12
    alone = Replica(0, create_scheduler("vllm-chunked"), AffineStepTime(), cfg)
    other = Request(2, 0.0, 96, 2)
    alone.add(other, 0.0)
    with pytest.raises(Livelock, match="request 2 was preempted 1000 times in a row"):
        for _ in range(FRUITLESS_PREEMPTIONS):
            note_preemption(alone, other)

"""The engine's decisions against vLLM 0.32's, step by step, on small cases no other test lists: which requests run,
how many tokens each, who is preempted, what the prefix cache finds (tests/engine_cases.py runs a case through
llmsched's replica and through vLLM's own v1 ``Scheduler`` with no model behind it).

Each hand-derived test states the rule it checks with the vLLM 0.32 function it comes from
(vllm/v1/core/sched/scheduler.py ``Scheduler.schedule``, vllm/v1/core/kv_cache_manager.py
``KVCacheManager.allocate_slots`` and ``get_computed_blocks``, vllm/v1/core/block_pool.py); the comparison tests run
the same cases through vLLM itself."""
from __future__ import annotations

import pytest

from tests.engine_cases import Arrival, Limits, Step, prompt, sim_steps, vllm_steps

A, P = Arrival, prompt


def tokens(steps: list[Step]) -> list[dict]:
    return [s.tokens for s in steps]


# --- the cases ------------------------------------------------------------------------------------------------------
CASES = {
    # KV blocks at block boundaries: a prompt of exactly one block, one of a block and a token, one short of a block
    "one-block-prompts": (Limits(20), [A(0, P(1, 16), 4), A(0, P(100, 17), 4), A(0, P(200, 15), 4)]),
    # the token budget runs out part-way through a prompt; a later arrival waits for budget
    "budget-mid-prompt": (Limits(40, max_num_batched_tokens=32),
                          [A(0, P(1, 50), 3), A(0, P(100, 40), 3), A(1, P(200, 20), 2)]),
    # max_num_seqs binds: the third and fourth wait for a seat
    "max-num-seqs": (Limits(40, max_num_seqs=2),
                     [A(0, P(1, 10), 4), A(0, P(100, 10), 4), A(0, P(200, 10), 4), A(1, P(300, 5), 2)]),
    # the cache holds two of three growing requests: the newest is preempted (recompute) and comes back first
    "preempt-newest": (Limits(6), [A(0, P(1, 15), 20), A(0, P(100, 15), 20), A(0, P(200, 15), 20)]),
    # two preempted in one step, the second newest ahead of the newest in the queue after
    "preempt-two": (Limits(5), [A(0, P(1, 16), 20), A(0, P(100, 16), 20), A(0, P(200, 15), 20)]),
    # a prompt part-way through its chunks is the newest and is preempted
    "preempt-during-prefill": (Limits(6, max_num_batched_tokens=32),
                               [A(0, P(1, 30), 10), A(0, P(100, 40), 10), A(1, P(200, 20), 5)]),
    # a preempted 64-token prompt waits until its whole sequence fits (vLLM's scheduler_reserve_full_isl)
    "full-prompt-gate": (Limits(6, max_num_batched_tokens=32), [A(0, P(1, 20), 10), A(0, P(100, 64), 3)]),
    # prefix cache: a shared prefix shorter than a block finds nothing
    "prefix-under-a-block": (Limits(40, prefix_caching=True),
                             [A(0, P(1, 10) + P(100, 20), 2), A(2, P(1, 10) + P(200, 20), 2)]),
    # a shared prefix of exactly two blocks is found whole
    "prefix-two-blocks": (Limits(40, prefix_caching=True),
                          [A(0, P(1, 32) + P(100, 20), 2), A(2, P(1, 32) + P(200, 20), 2)]),
    # a prompt of exactly two blocks seen before: one block found, its last token (and so its block) computed again
    "prefix-whole-prompt": (Limits(40, prefix_caching=True), [A(0, P(1, 32), 2), A(3, P(1, 32), 2)]),
    "prefix-whole-prompt-plus-one": (Limits(40, prefix_caching=True), [A(0, P(1, 33), 2), A(3, P(1, 33), 2)]),
    # a request preempted by recompute finds its own prompt's blocks again when readmitted
    "preempted-refinds-prefix": (Limits(6, prefix_caching=True),
                                 [A(0, P(1, 15), 20), A(0, P(100, 15), 20), A(0, P(200, 15), 20)]),
    # the LRU evicts a freed request's tail block first: a later request finds its leading blocks
    "lru-tail-first": (Limits(5, prefix_caching=True),
                       [A(0, P(1, 48), 1), A(1, P(100, 50), 1), A(3, P(1, 48) + P(700, 3), 1)]),
    # evictions over several steps, one admission a step
    "eviction-across-steps": (Limits(8, prefix_caching=True),
                              [A(0, P(1, 32), 1), A(1, P(100, 32), 1), A(2, P(200, 32), 1), A(3, P(300, 48), 1),
                               A(4, P(1, 32) + P(500, 5), 1), A(5, P(100, 32) + P(600, 5), 1),
                               A(6, P(200, 32) + P(600, 5), 1)]),
    # the queue's head waits for its whole prompt's blocks and the short request behind it waits too (FCFS)
    "head-of-line-gate": (Limits(8, max_num_batched_tokens=32),
                          [A(0, P(1, 60), 30), A(1, P(100, 80), 2), A(2, P(200, 5), 2)]),
    # a budget equal to the seat cap: decodes and chunks share four tokens a step
    "budget-equals-seqs": (Limits(60, max_num_seqs=4, max_num_batched_tokens=4),
                           [A(0, P(1, 6), 3), A(0, P(100, 5), 3), A(1, P(200, 3), 3), A(1, P(300, 9), 2),
                            A(2, P(400, 2), 2)]),
    # hits on blocks a running request holds cost no free block
    "hit-shared-with-running": (Limits(10, prefix_caching=True),
                                [A(0, P(1, 40), 6), A(2, P(1, 32) + P(900, 20), 6), A(3, P(1, 16) + P(800, 40), 3)]),
    # the holders of a shared prefix preempted; readmitted together, their shared cached blocks counted once
    "preempt-holders-of-a-shared-prefix": (Limits(7, prefix_caching=True),
                                           [A(0, P(1, 32) + P(50, 5), 30), A(1, P(1, 32) + P(900, 5), 30),
                                            A(2, P(1, 32) + P(800, 5), 30)]),
    "readmit-after-two-preemptions": (Limits(7, max_num_batched_tokens=24),
                                      [A(0, P(1, 20), 25), A(0, P(100, 20), 25), A(1, P(200, 20), 25),
                                       A(1, P(300, 20), 5)]),
}

# an admission's lookup sees the cache as the step's earlier allocations leave it (engine/cache_draft.py)
SAME_STEP_CACHE = {
    # an admission's new blocks evict (LRU) cached blocks a later admission of the same step would have found
    "same-step-eviction": (Limits(8, prefix_caching=True),
                           [A(0, P(1, 32), 1), A(1, P(100, 32), 1), A(2, P(200, 32), 1), A(3, P(300, 48), 1),
                            A(4, P(1, 32) + P(500, 5), 1), A(4, P(100, 32) + P(600, 5), 1)]),
    # a running prompt's chunk caches its full blocks when scheduled: admissions later in the same step find them
    "same-step-running-chunk": (Limits(12, prefix_caching=True, max_num_batched_tokens=40),
                                [A(0, P(1, 48) + P(100, 8), 3), A(0, P(1, 48) + P(200, 8), 3),
                                 A(1, P(1, 48) + P(300, 8), 3)]),
}


# --- rules derived by hand (no vLLM needed) ---------------------------------------------------------------------------
def test_a_preempted_long_prompt_waits_for_its_whole_sequence_instead_of_thrashing():
    """``Scheduler.schedule`` admits a waiting (or preempted) request through ``allocate_slots(...,
    full_sequence_must_fit=scheduler_reserve_full_isl)``, True by default in 0.32: the blocks of its whole known
    sequence must be free, not only its first chunk's. 6 blocks of 16, budget 32. Step 0: request 0 (20 tokens, 2
    blocks) and a 12-token chunk of request 1's 64 (its 4 blocks fit the 4 free). Steps 1-2 finish its prompt (4
    blocks, none free); step 3 its first decode needs a 5th block: it preempts itself. Its 65 tokens need 5 blocks
    and 4 are free until request 0 (2 blocks) finishes at step 9, so it waits; without the gate it was admitted on a
    31-token chunk's 2 blocks and preempted again every third step."""
    L, case = CASES["full-prompt-gate"]
    steps = sim_steps(case, L)
    assert tokens(steps) == [{0: 20, 1: 12}, {0: 1, 1: 31}, {0: 1, 1: 21}, {0: 1}, *[{0: 1}] * 6,
                             {1: 32}, {1: 32}, {1: 1}, {1: 1}]
    assert [s.preempted for s in steps] == [[]] * 3 + [[1]] + [[]] * 10
    old = sim_steps(case, L, params={"reserve_full_isl": False})  # vLLM before the gate
    assert sum(len(s.preempted) for s in old) == 3


def test_kv_blocks_are_taken_at_block_boundaries():
    """``allocate_slots`` takes ``cdiv(tokens, block_size)`` blocks: a 16-token prompt holds one and its first decode
    (token 17) takes a second; a 17-token prompt holds two. 5 blocks, three prompts of 16, 17 and 15: 1 + 2 + 1 at
    step 0; at step 1 the 16-token one needs its second block (the last free one) and the 15-token one's 16th
    token fits its block; at step 2 the 17-token one's token 18 fits, the 15-token one's 17th needs a block and none
    is free: the newest, request 2 itself, is preempted."""
    case = [A(0, P(1, 16), 4), A(0, P(100, 17), 4), A(0, P(200, 15), 4)]
    steps = sim_steps(case, Limits(5))
    assert steps[0].tokens == {0: 16, 1: 17, 2: 15}
    assert steps[1].tokens == {0: 1, 1: 1, 2: 1} and not steps[1].preempted
    assert steps[2].tokens == {0: 1, 1: 1} and steps[2].preempted == [2]


def test_prefix_hits_are_whole_blocks_and_never_the_last_token():
    """``get_computed_blocks`` looks up at most ``num_tokens - 1`` tokens and only full blocks: a 10-token shared
    prefix (under a block) finds nothing, a 32-token one finds 32, a repeated 32-token prompt finds 16 (its second
    block holds its last token), a repeated 33-token one finds 32."""
    def hit(name):
        L, case = CASES[name]
        return {i: n for s in sim_steps(case, L) for i, n in s.hits.items()}
    assert hit("prefix-under-a-block") == {}
    assert hit("prefix-two-blocks") == {1: 32}
    assert hit("prefix-whole-prompt") == {1: 16}
    assert hit("prefix-whole-prompt-plus-one") == {1: 32}


def test_two_admissions_sharing_a_free_cached_prefix_count_its_blocks_once():
    """5 blocks. Request 0 (32 shared tokens + 5) runs at step 0 and finishes; its two full blocks stay cached, free.
    At step 1 requests 1 and 2 (the same 32 + 5 of their own) arrive: in vLLM's waiting loop request 1's
    ``allocate_slots`` references the two cached blocks and takes one new block (3 of 5), then request 2 finds the
    two blocks held and needs one more block (2 free): both are admitted. Counting the shared blocks for each
    admission (3 + 3 > 5) left request 2 waiting a step."""
    case = [A(0, P(1, 32) + P(50, 5), 1), A(1, P(1, 32) + P(900, 5), 2), A(1, P(1, 32) + P(800, 5), 2)]
    step = sim_steps(case, Limits(5, prefix_caching=True))[1]
    assert step.tokens == {1: 5, 2: 5} and step.hits == {1: 32, 2: 32}


def test_an_admissions_eviction_is_seen_by_the_next_admission_of_the_step():
    """8 blocks. Requests 0-3 (2, 2, 2, 3 blocks) run one a step and finish; their full blocks stay cached, freed
    tail first (LRU: 0's second block, 0's first, 1's second, ...). Request 3's third block evicts request 0's
    second. At step 4, request 4 (0's first block + 21 tokens) finds 16 tokens and takes 2 new blocks: the LRU's
    head, request 1's two blocks. Request 5 (1's 32 tokens + 5) is looked up after that (``Scheduler.schedule``'s
    waiting loop: ``get_computed_blocks`` then ``allocate_slots`` per request) and finds nothing: it computes 37."""
    L, case = SAME_STEP_CACHE["same-step-eviction"]
    last = sim_steps(case, L)[4]
    assert last.tokens == {4: 21, 5: 37} and last.hits == {4: 16}


def test_a_running_chunk_caches_its_blocks_for_admissions_of_the_same_step():
    """Budget 40, 12 blocks. Step 0 computes 40 of request 0's 56 tokens (two full blocks cached). At step 1 its
    last 16 tokens are scheduled first: ``allocate_slots`` caches blocks up to 56 tokens (three full blocks), then
    requests 1 and 2 (same 48-token prefix) each find 48 tokens and compute their last 8."""
    L, case = SAME_STEP_CACHE["same-step-running-chunk"]
    step = sim_steps(case, L)[1]
    assert step.tokens == {0: 16, 1: 8, 2: 8} and step.hits == {1: 48, 2: 48}


# --- the same cases through vLLM 0.32's scheduler ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tests.vllm_support import require_vllm
    require_vllm()
    from llmsched.vllm.model import write_model
    return str(write_model(tmp_path_factory.mktemp("engine-truths") / "tiny"))


def test_vllm_chunked_decides_as_vllms_scheduler_step_by_step(model_dir):
    """Every case, both with vLLM's default full-prompt gate and without it (``reserve_full_isl=False`` against
    ``scheduler_reserve_full_isl=False``): the same requests, tokens, preemptions and cache hits at every step."""
    for gate in (True, False):
        for name, (L, case) in CASES.items():
            ours = sim_steps(case, L, params=None if gate else {"reserve_full_isl": False})
            theirs = vllm_steps(case, L, model_dir, full_isl=gate)
            assert [repr(s) for s in ours] == [repr(s) for s in theirs], (name, gate)


# without chunked prefill (vLLM's --no-enable-chunked-prefill: a budget of at least the context length)
WHOLE_PROMPTS = {
    # the second prompt does not fit the budget the first leaves: it and the one behind it wait a step
    "second-prompt-waits": (Limits(40, max_num_batched_tokens=64, max_model_len=64),
                            [A(0, P(1, 40), 3), A(0, P(100, 30), 3), A(0, P(200, 10), 2), A(1, P(300, 20), 2)]),
    # decodes take budget: a prompt of nearly the whole budget waits until no two decodes run beside it
    "decodes-hold-a-long-prompt": (Limits(40, max_num_batched_tokens=64, max_model_len=64),
                                   [A(0, P(1, 10), 6), A(0, P(50, 10), 6), A(1, P(100, 63), 1)]),
    # preempted by recompute under KV pressure, readmitted whole
    "preempt-and-readmit-whole": (Limits(6, max_num_batched_tokens=64, max_model_len=64),
                                  [A(0, P(1, 15), 20), A(0, P(100, 15), 20), A(0, P(200, 15), 20)]),
}


def test_vllm_chunked_without_chunked_prefill_decides_as_vllms_scheduler(model_dir):
    """``chunked_prefill=False`` against vLLM's ``enable_chunked_prefill=False``, with and without the full-prompt
    gate: every step the same, and no prompt ever split."""
    for gate in (True, False):
        for name, (L, case) in WHOLE_PROMPTS.items():
            ours = sim_steps(case, L, params={"chunked_prefill": False, "reserve_full_isl": gate})
            theirs = vllm_steps(case, L, model_dir, full_isl=gate, chunked=False)
            assert [repr(s) for s in ours] == [repr(s) for s in theirs], (name, gate)
            chunked = sim_steps(case, L, params={"reserve_full_isl": gate})
            if name != "preempt-and-readmit-whole":  # (its prompts fit together: chunking changes nothing there)
                assert [repr(s) for s in chunked] != [repr(s) for s in ours], (name, gate)


@pytest.mark.parametrize("name", sorted(SAME_STEP_CACHE))
def test_vllm_decides_the_same_step_cache_cases_as_the_tests_above_say(model_dir, name):
    """The two cases the tests above derive by hand, through vLLM itself: its decisions are theirs."""
    L, case = SAME_STEP_CACHE[name]
    steps = vllm_steps(case, L, model_dir)
    if name == "same-step-eviction":
        assert steps[4].tokens == {4: 21, 5: 37} and steps[4].hits == {4: 16}
    else:
        assert steps[1].tokens == {0: 16, 1: 8, 2: 8} and steps[1].hits == {1: 48, 2: 48}

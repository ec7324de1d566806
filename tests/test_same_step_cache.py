"""One step's admissions look up the prefix cache in vLLM 0.32's order (engine/cache_draft.py): the running loop's
allocations first, then each waiting request's ``get_computed_blocks`` and ``allocate_slots`` in turn
(vllm/v1/core/sched/scheduler.py ``Scheduler.schedule``). Hand-derived cases, then the same cases and random ones
through vLLM's own scheduler (tests/engine_cases.py), step by step."""
from __future__ import annotations

import pytest

from tests.engine_cases import Arrival, Limits, prompt, shared_prefix_case, sim_steps, vllm_steps

A, P = Arrival, prompt

CASES = {
    # three arrivals of one step share a 48-token prefix nothing caches: the first's chunk caches it as it is
    # scheduled, and the next two find it
    "shared-prefix-one-step": (Limits(20, prefix_caching=True, max_num_batched_tokens=128),
                               [A(0, P(1, 48) + P(100, 8), 2), A(0, P(1, 48) + P(200, 8), 2),
                                A(0, P(1, 48) + P(300, 8), 2)]),
    # a running decode crosses into a new block before the waiting loop and evicts the LRU's head, the second
    # block of a prefix a waiting request would have found whole
    "decode-growth-evicts": (Limits(9, prefix_caching=True, max_num_batched_tokens=128),
                             [A(0, P(1, 15), 10), A(0, P(500, 32), 1), A(0, P(800, 62), 10), A(1, P(900, 32), 1),
                              A(2, P(500, 32) + P(700, 5), 2)]),
    # an admission references cached blocks in the middle of the LRU; the next admission's new blocks pass over
    # them and evict the blocks behind, a prefix a third request shares (it finds nothing the step after)
    "claimed-not-evicted": (Limits(7, prefix_caching=True, max_num_batched_tokens=128),
                            [A(0, P(1, 48), 1), A(1, P(400, 32), 1), A(2, P(1, 32) + P(100, 20), 1),
                             A(2, P(300, 40), 1), A(2, P(400, 32) + P(600, 5), 1)]),
}


def test_admissions_of_one_step_find_the_blocks_an_earlier_admissions_chunk_caches():
    """``allocate_slots`` caches a chunk's full blocks when it schedules it (``cache_blocks`` up to the computed
    tokens plus the new ones): request 0's 56 tokens cache three blocks (48 shared tokens), and requests 1 and 2,
    looked up after it in the waiting loop, find 48 tokens each and compute their last 8. Before, each computed
    its whole prompt (56 + 56 and a 16-token chunk, the budget spent)."""
    L, case = CASES["shared-prefix-one-step"]
    first = sim_steps(case, L)[0]
    assert first.tokens == {0: 56, 1: 8, 2: 8} and first.hits == {1: 48, 2: 48}


def test_a_decodes_new_block_evicts_before_the_waiting_loop_looks_up():
    """9 blocks. Step 0: request 0 (15 tokens, 1 block), 1 (32, finishes: its 2 blocks cached, freed tail first)
    and 2 (62, 4 blocks); step 1: request 3 (32, finishes) takes the last 2 uncached blocks, cached behind 1's.
    Step 2: request 0's token 17 takes a block in the running loop: the LRU's head, request 1's second block. So
    request 4 (request 1's 32 tokens + 5) finds 16 tokens and computes 21, taking request 3's blocks; before, the
    hits were referenced before any block was taken and it found 32."""
    L, case = CASES["decode-growth-evicts"]
    step = sim_steps(case, L)[2]
    assert step.tokens == {0: 1, 2: 1, 4: 21} and step.hits == {4: 16}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tests.vllm_support import require_vllm
    require_vllm()
    from llmsched.vllm.model import write_model
    return str(write_model(tmp_path_factory.mktemp("same-step") / "tiny"))


def test_named_cases_decide_as_vllms_scheduler_step_by_step(model_dir):
    for gate in (True, False):
        for name, (L, case) in CASES.items():
            ours = sim_steps(case, L, params=None if gate else {"reserve_full_isl": False})
            theirs = vllm_steps(case, L, model_dir, full_isl=gate)
            assert [repr(s) for s in ours] == [repr(s) for s in theirs], (name, gate)


def test_random_shared_prefix_cases_decide_as_vllms_scheduler_step_by_step(model_dir):
    """40 random cases (``shared_prefix_case``): three shared prefixes, small caches, varied budgets and seat caps.
    The replica's order before this change (all hits referenced before any block was taken) decided 5 of these
    40 differently."""
    for seed in range(40):
        L, case = shared_prefix_case(seed)
        ours = sim_steps(case, L)
        theirs = vllm_steps(case, L, model_dir)
        assert [repr(s) for s in ours] == [repr(s) for s in theirs], (seed, L)


def test_the_draft_finds_what_the_cache_finds_after_the_same_allocations():
    """The draft (engine/cache_draft.py) against the cache itself, no vLLM needed. 7 blocks: request a's 3 blocks
    and then x's 2 are freed into the LRU (tail first: a2 a1 a0 x1 x0), 2 uncached blocks free. w1 references a0
    and a1 and takes the 2 uncached blocks; w2's 3 new blocks then evict a2, pass over a1 and a0 (w1 holds them)
    and evict x1 and x0: w3 (x's prompt + 5) finds nothing, w4 (a's first 32 tokens + 5) finds both, and w5
    (w1's 52 tokens + 10) finds the block w1's chunk fills. Then the same allocations are made for real."""
    from llmsched.content import Content, Space, piece_id
    from llmsched.engine.prefix_cache import PrefixCachingKVManager
    from llmsched.request import Request

    def req(i, tokens):
        return Request(i, 0.0, len(tokens), 1, content=Content.of_tokens(tokens, piece_id(Space.REPLY, i)))

    kv = PrefixCachingKVManager(7, 16)
    for r in (req(0, P(1, 48)), req(1, P(400, 32))):
        kv.allocate(r, r.prompt_len)
        r.num_computed = r.prompt_len
        kv.release(r)
    w1, w2 = req(2, P(1, 32) + P(100, 20)), req(3, P(300, 40))
    w3, w4 = req(4, P(400, 32) + P(600, 5)), req(5, P(1, 32) + P(700, 5))
    w5 = req(6, P(1, 32) + P(100, 20) + P(800, 10))
    draft = kv.draft()
    assert [len(draft.lookup(w)) for w in (w1, w3, w4, w5)] == [2, 2, 2, 2]
    draft.admit(w1, 20)
    assert [len(draft.lookup(w)) for w in (w3, w4, w5)] == [2, 2, 3]
    draft.admit(w2, 40)
    found = [len(draft.lookup(w)) for w in (w3, w4, w5)]
    assert found == [0, 2, 3]
    kv.admit(w1, kv.lookup(w1))
    kv.allocate_chunks([(w1, 20)])
    kv.allocate_chunks([(w2, 40)])
    assert [len(kv.lookup(w)) for w in (w3, w4, w5)] == found
    w1.num_computed, w2.num_computed = 52, 40  # the step ends
    kv.check([w1, w2])


def test_a_policy_that_runs_prompts_whole_keeps_finding_what_it_planned_on():
    """The conservation fuzz's seed 2229 (``vllm``, whole prompts, multi-turn chat with a prefix cache, 101
    blocks): while every policy's admissions took blocks in vLLM's order, one found fewer cached blocks at launch
    than its policy had counted, computed its planned tokens from an earlier token, and left its prompt unfinished,
    which ``vllm`` never schedules: the replica stalled. Only a policy declaring ``looks_up_in_order``
    (vllm-chunked) plans and launches in that order."""
    from tests.test_fuzz_conservation import check_seed
    assert check_seed(2229) is None

"""The KV tier store (engine/tier_store.py) against a per-chunk reference (tests/tier_reference.py) on random
operations over prompts that share prefixes: every lookup, every store's outcome, and after every operation the
chunks held in eviction order with their pins and ready flags, equal. ``LLMSCHED_TIER_SEEDS`` sets the number of
seeds (the suite runs 150; the figure in docs/kv-offload.md is 3,000)."""
import os
import random

import pytest

from llmsched.content import Content
from llmsched.engine.tier_store import TierStore
from tier_reference import ReferenceTier, chunk_names

SEEDS = int(os.environ.get("LLMSCHED_TIER_SEEDS", "150"))


def prompts(rng: random.Random, chunk_tokens: int) -> list:
    """Requests as (keys, starts, chunks) at the chunk size: a few shared system prompts and documents, pieces of
    random lengths (some cut short, some longer than a chunk), so chunks fall inside and across pieces."""
    shared = [[(rng.randrange(1 << 40), rng.randint(1, 3 * chunk_tokens)) for _ in range(rng.randint(1, 4))]
              for _ in range(3)]
    out = []
    for i in range(rng.randint(3, 8)):
        pieces = []
        for _ in range(rng.randint(1, 3)):
            pieces += shared[rng.randrange(len(shared))][:rng.randint(1, 4)]
        pieces += [(rng.randrange(1 << 40), rng.randint(1, 2 * chunk_tokens)) for _ in range(rng.randint(0, 2))]
        content = Content.of_pieces(pieces, reply=i)
        chunks = content.length // chunk_tokens
        if chunks < 1:
            continue
        keys, starts = [], []
        content.block_groups(chunk_tokens, 0, chunks, keys, starts)
        out.append((keys, starts, chunks))
    return out


def state(tier: TierStore) -> list:
    out = []
    for s in tier.segs():
        order = range(s.lo, s.hi) if s.up else range(s.hi - 1, s.lo - 1, -1)
        out += [((s.key, p), s.pins, s.ready) for p in order]
    return out


def run_seed(seed: int) -> int:
    rng = random.Random(seed)
    chunk_tokens = rng.choice((4, 16))
    reqs = prompts(rng, chunk_tokens)
    if not reqs:
        return 0
    capacity = rng.randint(1, 40)
    fast, ref = TierStore(capacity), ReferenceTier(capacity)
    pending, pins = [], []
    ops = 0
    for _ in range(rng.randint(20, 120)):
        keys, starts, chunks = rng.choice(reqs)
        op = rng.random()
        if op < 0.3:
            lo = rng.randint(0, chunks - 1)
            hi = rng.randint(lo + 1, chunks)
            partial = rng.random() < 0.5
            got, want = fast.insert(keys, starts, lo, hi, partial), ref.insert(keys, starts, lo, hi, partial)
            assert (got is None) == (want is None), f"seed {seed}: store outcome differs"
            if got is not None:
                assert sum(b - a for _, a, b in got) == len(want), f"seed {seed}: stored chunk counts differ"
                pending.append((got, want))
        elif op < 0.45 and pending:
            got, want = pending.pop(rng.randrange(len(pending)))
            fast.complete(got)
            ref.complete(want)
        elif op < 0.65:
            first = rng.randint(0, chunks - 1)
            n = fast.hits(keys, starts, first, chunks)
            assert n == ref.hits(keys, starts, first, chunks), f"seed {seed}: hits differ"
            if n and rng.random() < 0.5:
                fast.pin(keys, starts, first, first + n)
                ref.pin(keys, starts, first, first + n)
                pins.append((keys, starts, first, first + n))
        elif op < 0.75 and pins:
            keys, starts, lo, hi = pins.pop(rng.randrange(len(pins)))
            fast.pin(keys, starts, lo, hi, -1)
            ref.pin(keys, starts, lo, hi, -1)
        else:
            lo = rng.randint(0, chunks - 1)
            hi = rng.randint(lo + 1, chunks)
            fast.rerank(keys, starts, lo, hi)
            ref.rerank(keys, starts, lo, hi)
        fast.check()
        assert state(fast) == ref.order(), f"seed {seed}: held chunks or their order differ after op {ops}"
        assert fast.evicted == ref.evicted
        ops += 1
    return ops


def test_tier_store_matches_the_per_chunk_reference():
    ops = sum(run_seed(seed) for seed in range(SEEDS))
    assert ops > SEEDS * 10


def test_lookups_stop_at_a_chunk_in_flight_and_a_gap():
    keys, starts = [7], [0]
    t = TierStore(10)
    stored = t.insert(keys, starts, 0, 4)
    assert stored == [(7, 0, 4)] and t.hits(keys, starts, 0, 4) == 0  # in flight: not yet readable
    t.complete(stored)
    assert t.hits(keys, starts, 0, 10) == 4 and t.hits(keys, starts, 2, 10) == 2
    assert t.insert(keys, starts, 6, 8) == [(7, 6, 8)]
    assert t.hits(keys, starts, 0, 10) == 4  # chunks 4-5 missing


def test_a_whole_store_that_cannot_fit_changes_nothing_and_a_partial_one_stores_its_head():
    keys, starts = [1], [0]
    t = TierStore(4)
    t.complete(t.insert(keys, starts, 0, 3))
    t.pin(keys, starts, 0, 3)  # a load reads them: nothing is evictable
    other = ([2], [0])
    assert t.insert(*other, 0, 3) is None and t.used == 3
    assert t.insert(*other, 0, 3, partial=True) == [(2, 0, 1)] and t.used == 4
    t.pin(keys, starts, 0, 3, -1)
    # the oldest evictable go first: the first store's chunks in prefix order
    t.complete([(2, 0, 1)])
    assert t.insert([3], [0], 0, 2) == [(3, 0, 2)]
    assert [name for name, _, _ in state(t)] == [(1, 2), (2, 0), (3, 0), (3, 1)]


def test_rerank_makes_the_head_newest():
    keys, starts = [5], [0]
    t = TierStore(6)
    t.complete(t.insert(keys, starts, 0, 4))
    t.complete(t.insert([6], [0], 0, 2))
    t.rerank(keys, starts, 0, 4)
    assert [name for name, _, _ in state(t)] == [(6, 0), (6, 1), (5, 3), (5, 2), (5, 1), (5, 0)]


@pytest.mark.parametrize("chunk_tokens", [16, 256])
def test_chunks_follow_the_content_pieces(chunk_tokens):
    """Two prompts sharing their first 1,024 tokens (two 512-token pieces) share the chunks ending in them."""
    a = Content.of_pieces([(11, 512), (12, 512), (13, 300)], reply=1)
    b = Content.of_pieces([(11, 512), (12, 512), (14, 700)], reply=2)
    na, nb = a.length // chunk_tokens, b.length // chunk_tokens
    ka, sa, kb, sb = [], [], [], []
    a.block_groups(chunk_tokens, 0, na, ka, sa)
    b.block_groups(chunk_tokens, 0, nb, kb, sb)
    t = TierStore(1000)
    t.complete(t.insert(ka, sa, 0, na))
    assert t.hits(kb, sb, 0, nb) == 1024 // chunk_tokens
    assert chunk_names(ka, sa, 0, 1024 // chunk_tokens) == chunk_names(kb, sb, 0, 1024 // chunk_tokens)

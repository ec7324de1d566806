from hypothesis import given, settings, strategies as st
import pytest

from llmsched.engine.blocks import BlockManager
from llmsched.engine.errors import KVCapacityError
from llmsched.request import Request


def test_blocks_for_rounds_up():
    kv = BlockManager(10, block_size=16)
    assert [kv.blocks_for(t) for t in (0, 1, 16, 17, 32, 33)] == [0, 1, 1, 2, 2, 3]


def test_grow_beyond_free_raises_and_changes_nothing():
    kv = BlockManager(4, block_size=16)
    r = Request(0, 0.0, 10, 10)
    kv.grow(r, 48)
    assert (r.num_blocks, kv.free) == (3, 1)
    with pytest.raises(KVCapacityError):
        kv.grow(r, 100)
    assert (r.num_blocks, kv.free) == (3, 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["grow", "release"]), st.integers(0, 7), st.integers(1, 300)),
                max_size=200),
       st.integers(1, 64), st.integers(1, 32))
def test_random_grow_release_keeps_accounting_exact(ops, total, block_size):
    kv = BlockManager(total, block_size)
    reqs = [Request(i, 0.0, 1, 1) for i in range(8)]
    tokens = [0] * 8
    for op, i, n in ops:
        r = reqs[i]
        if op == "grow":
            want = tokens[i] + n
            if kv.extra_blocks(r, want) <= kv.free:
                kv.grow(r, want)
                tokens[i] = want
            else:
                with pytest.raises(KVCapacityError):
                    kv.grow(r, want)
        else:
            kv.release(r)
            tokens[i] = 0
        assert kv.free >= 0
        assert all(r.num_blocks == kv.blocks_for(t) for r, t in zip(reqs, tokens))
        kv.check(reqs)
    for r in reqs:
        kv.release(r)
    assert kv.free == kv.total

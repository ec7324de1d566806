"""The KV cache manager (llmsched/engine/kv_cache.py): exact counts, and the only writer of block state."""
import ast
from pathlib import Path

from hypothesis import given, settings, strategies as st
import pytest

import llmsched
from llmsched.engine.errors import KVCapacityError
from llmsched.engine.kv_cache import KVCacheManager
from llmsched.request import Request


def test_blocks_for_rounds_up():
    kv = KVCacheManager(10, block_size=16)
    assert [kv.blocks_for(t) for t in (0, 1, 16, 17, 32, 33)] == [0, 1, 1, 2, 2, 3]


def test_allocate_beyond_free_raises_and_changes_nothing():
    kv = KVCacheManager(4, block_size=16)
    r = Request(0, 0.0, 10, 10)
    kv.allocate(r, 48)
    assert (r.num_blocks, kv.free) == (3, 1)
    assert kv.can_allocate(r, 64) and not kv.can_allocate(r, 100)
    with pytest.raises(KVCapacityError):
        kv.allocate(r, 100)
    assert (r.num_blocks, kv.free) == (3, 1)


def test_swap_moves_blocks_to_host_memory_and_back():
    kv = KVCacheManager(10, block_size=16, swap_blocks=4)
    a, b = Request(0, 0.0, 48, 5), Request(1, 0.0, 80, 5)
    kv.allocate(a, 48)
    kv.allocate(b, 80)
    assert kv.free == 2
    assert kv.swap_out(a) and (kv.free, kv.swap_free, a.num_blocks) == (5, 1, 3)
    assert not kv.swap_out(b) and (kv.free, kv.swap_free, b.num_blocks) == (5, 1, 5)  # no host room: nothing moved
    assert kv.swap_in(a) == 3 and (kv.free, kv.swap_free) == (2, 4)
    kv.swap_out(a)
    kv.drop_swapped(a)
    assert (kv.swap_free, a.num_blocks) == (4, 0)


def test_bad_sizes_are_clear_errors():
    with pytest.raises(ValueError, match="swap space"):
        KVCacheManager(10, swap_blocks=-1)
    with pytest.raises(ValueError, match="at least one block"):
        KVCacheManager(0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["grow", "decode", "release", "swap"]), st.integers(0, 7),
                          st.integers(1, 300)), max_size=200),
       st.integers(1, 64), st.integers(1, 32), st.integers(0, 32))
def test_random_operations_keep_accounting_exact(ops, total, block_size, swap_blocks):
    kv = KVCacheManager(total, block_size, swap_blocks)
    reqs = [Request(i, 0.0, 1, 1) for i in range(8)]
    swapped = set()
    for op, i, n in ops:
        r = reqs[i]
        if r in swapped:  # back from host memory first, when it fits
            if r.num_blocks > kv.free:
                continue
            kv.swap_in(r)
            swapped.discard(r)
        if op == "grow":
            want = r.num_computed + n
            if kv.extra_blocks(r, want) <= kv.free:
                kv.allocate_chunks([(r, n)])
                r.num_computed = want
            else:
                with pytest.raises(KVCapacityError):
                    kv.allocate(r, want)
        elif op == "decode":
            if kv.extra_blocks(r, r.num_computed + 1) <= kv.free:
                kv.allocate_decodes([r])
                r.num_computed += 1
        elif op == "release":
            kv.release(r)
            r.num_computed = 0
        elif kv.swap_out(r):
            swapped.add(r)
        held = [r for r in reqs if r not in swapped]
        assert all(r.num_blocks == kv.blocks_for(r.num_computed) for r in reqs)
        kv.check(held, swapped)
    for r in swapped:
        kv.drop_swapped(r)
    for r in reqs:
        if r not in swapped:
            kv.release(r)
    assert (kv.free, kv.swap_free) == (kv.total, kv.swap_total)


def test_check_finds_a_leak():
    kv = KVCacheManager(8, block_size=4)
    r = Request(0, 0.0, 8, 2)
    kv.allocate(r, 8)
    r.num_computed = 8
    kv.check([r])
    kv.free += 1
    with pytest.raises(AssertionError, match="leak"):
        kv.check([r])


# Block state: the KV manager's counters and each request's num_blocks. The vLLM plug-in mirrors what vLLM's own KV
# cache manager holds into its requests (vLLM owns the blocks there, and no llmsched replica runs).
# the KV cache manager, and its prefix-caching form (the manager a replica of requests with content gets)
KV_MODULES = {"engine/kv_cache.py", "engine/prefix_cache.py", "engine/kv_windows.py"}
KV_FIELDS = {"free", "total", "swap_free", "swap_total"}
MIRRORS = {"vllm/adapter.py"}


def _writes(tree):
    """(line, target) of every assignment to block state: ``X.num_blocks`` anywhere, and the manager's counters
    on an expression naming the manager (``kv``, ``self.kv``, ``rep.kv``, ...)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            stack = list(targets)
            while stack:
                t = stack.pop()
                if isinstance(t, (ast.Tuple, ast.List)):
                    stack.extend(t.elts)
                elif isinstance(t, ast.Attribute):
                    base = ast.unparse(t.value)
                    if t.attr == "num_blocks" or (t.attr in KV_FIELDS and (base == "kv" or base.endswith(".kv"))):
                        yield node.lineno, ast.unparse(t)


def test_only_the_kv_manager_writes_block_state():
    root = Path(llmsched.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in KV_MODULES or rel in MIRRORS:
            continue
        for line, target in _writes(ast.parse(path.read_text())):
            if rel == "request.py" and target == "self.num_blocks":  # the constructor's initial 0
                continue
            found.append(f"{rel}:{line}: {target}")
    assert not found, "block state written outside the KV manager:\n" + "\n".join(found)


def test_the_write_finder_sees_the_forms_used():
    code = "r.num_blocks = 3\nkv.free -= n\nself.kv.swap_free += 1\nm.num_computed = m.num_blocks = 0\n" \
           "book.free += 1\nself.free = 2\n"
    assert [t for _, t in _writes(ast.parse(code))] == ["r.num_blocks", "kv.free", "self.kv.swap_free",
                                                        "m.num_blocks"]

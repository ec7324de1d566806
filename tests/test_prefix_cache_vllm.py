"""llmsched's prefix cache against vLLM's own KV cache manager, in process (no model run).

The same token sequences (prompts sharing system prompts, multi-turn conversations carrying earlier replies) go
through vLLM v1's ``KVCacheManager`` and through ``PrefixCachingKVManager`` by the same calls a vLLM scheduler
makes: look up a waiting request's cached prefix, allocate its prompt, append decoded tokens one by one, free it.
The cache is small, so blocks are evicted. Every admission's hit must be the same, and so must the free blocks
after every call.
"""
from __future__ import annotations

import random

import pytest

from llmsched.content import Content, Space, piece_id
from llmsched.engine.prefix_cache import PrefixCachingKVManager
from llmsched.request import Request

vllm_core = pytest.importorskip("vllm.v1.core.kv_cache_manager")

BLOCK = 16


def vllm_manager(num_blocks: int):
    import torch
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import init_none_hash
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    init_none_hash(sha256)
    spec = FullAttentionSpec(block_size=BLOCK, num_kv_heads=1, head_size=8, dtype=torch.float16)
    # vLLM keeps one block back as its null block: one more gives both managers the same usable blocks
    config = KVCacheConfig(num_blocks=num_blocks + 1, kv_cache_tensors=[],
                           kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)])
    return vllm_core.KVCacheManager(config, max_model_len=1 << 16, scheduler_block_size=BLOCK,
                                    hash_block_size=BLOCK, enable_caching=True)


def vllm_request(rid: int, tokens: list[int]):
    from vllm import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher
    from vllm.v1.request import Request as VRequest

    return VRequest(str(rid), list(tokens), SamplingParams(max_tokens=1 << 12), None,
                    block_hasher=get_request_block_hasher(BLOCK, sha256))


def conversations(seed: int, n: int) -> list[tuple[int, list[int], list[int]]]:
    """(user, prompt tokens, reply tokens) of ``n`` requests: a few system prompts, and users whose next turn
    carries their conversation so far."""
    rng = random.Random(seed)
    systems = [[rng.randrange(1000) for _ in range(rng.choice((16, 40, 64, 100)))] for _ in range(3)]
    history: dict[int, list[int]] = {}
    out = []
    for _ in range(n):
        user = rng.randrange(6)
        before = history.get(user) or list(rng.choice(systems))
        prompt = before + [rng.randrange(1000) for _ in range(rng.randrange(1, 60))]
        reply = [rng.randrange(1000) for _ in range(rng.randrange(1, 40))]
        history[user] = prompt + reply
        out.append((user, prompt, reply))
    return out


def ours_request(rid: int, prompt: list[int], reply: list[int]) -> Request:
    """A request whose content names its prompt by token ids and whose reply extends it: the reply is given as
    tokens too, so a later prompt that carries it shares its blocks exactly as in vLLM."""
    req = Request(rid, 0.0, len(prompt), len(reply) + 1, content=Content.of_tokens(prompt + reply, piece_id(
        Space.REPLY, rid)))
    return req


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("num_blocks", [24, 60, 400])
def test_same_hits_and_free_blocks_as_vllm(seed, num_blocks):
    theirs = vllm_manager(num_blocks)
    ours = PrefixCachingKVManager(num_blocks, BLOCK)
    rng = random.Random(seed + 100)
    live = []  # (user, our request, their request, reply tokens left)
    hits_ours, hits_theirs = [], []
    for rid, (user, prompt, reply) in enumerate(conversations(seed, 120)):
        # a few requests run at once, each decoding a while; a user's next turn comes after its previous one ends
        while live and (len(live) >= 3 or rng.random() < 0.4 or any(u == user for u, *_ in live)):
            mine = [i for i, (u, *_) in enumerate(live) if u == user]
            _, ro, rt, left = live.pop(mine[0] if mine else rng.randrange(len(live)))
            for token in left[:rng.randrange(len(left) + 1)]:
                decode(ours, theirs, ro, rt, token)
            ours.release(ro)
            theirs.free(rt)
            assert ours.free == theirs.block_pool.get_num_free_blocks()
        ro, rt = ours_request(rid, prompt, reply), vllm_request(rid, prompt)
        blocks, cached, _ = theirs.get_computed_blocks(rt)
        hit = ours.lookup(ro)
        assert len(hit) * BLOCK == cached, f"request {rid}: our hit {len(hit) * BLOCK}, vLLM's {cached}"
        new = len(prompt) - cached
        got = theirs.allocate_slots(rt, new, cached, blocks)
        need = ours.blocks_for(len(prompt)) - len(hit) + ours.unreferenced(hit)
        assert (got is not None) == (need <= ours.free), f"request {rid}: admitted by one manager only"
        if got is None:
            continue
        hits_ours.append(len(hit) * BLOCK)
        hits_theirs.append(cached)
        ours.admit(ro, hit)
        ours.allocate_chunks([(ro, new)])
        ro.num_computed = len(prompt)
        rt.num_computed_tokens = len(prompt)
        ro.num_generated = 1
        rt.append_output_token_ids(reply[0])
        assert ours.free == theirs.block_pool.get_num_free_blocks()
        live.append((user, ro, rt, reply[1:]))
    assert hits_ours == hits_theirs
    assert sum(hits_ours) > 0  # the sequences share prefixes: the comparison is not vacuous


def decode(ours, theirs, ro: Request, rt, token: int) -> None:
    """One decode step of a request in both managers (if both have a block for it)."""
    got = theirs.allocate_slots(rt, 1)
    fits = ours.extra_blocks(ro, ro.num_computed + 1) <= ours.free
    assert (got is not None) == fits
    if got is None:
        return
    ours.allocate_decodes([ro])
    ro.num_computed += 1
    rt.num_computed_tokens += 1
    ro.num_generated += 1
    rt.append_output_token_ids(token)

"""The offline prefix count equals a brute-force one over block hashes: leading full blocks seen before, never the
whole prompt, earlier replies included; it is the total a cache that evicts nothing must reach."""
import random

import pytest

from llmsched.content import Content, Space, piece_id
from llmsched.request import Request
from llmsched.workload.traces.prefix_stats import prefix_stats
from llmsched.workload.generators.sessions import first_prompt, next_prompt


def brute_force(requests, block_size, outputs=True):
    seen, out = set(), []
    for r in requests:
        hit = 0
        if r.content is not None:
            limit = (r.prompt_len - 1) // block_size
            for h in r.content.block_hashes(block_size, limit * block_size):
                if h not in seen:
                    break
                hit += block_size
            seen.update(r.content.block_hashes(block_size, r.prompt_len + r.output_len - 1 if outputs
                                               else r.prompt_len))
        out.append(hit)
    return out


def random_requests(seed: int, n: int = 40):
    rng = random.Random(seed)
    shared = [(piece_id(Space.SHARED, k), rng.randrange(1, 90)) for k in range(5)]
    reqs, last = [], []
    for i in range(n):
        output = rng.randrange(1, 40)
        if last and rng.random() < 0.3:  # a session's next turn
            before, before_output = rng.choice(last)
            content = next_prompt(before, before_output, i, before.length + before_output + rng.randrange(0, 30))
        elif rng.random() < 0.1:
            content = None
        else:
            pieces = shared[:rng.randrange(len(shared))]
            content = first_prompt(i, pieces, sum(n for _, n in pieces) + rng.randrange(1, 60))
        prompt = content.length if content else rng.randrange(1, 100)
        reqs.append(Request(i, float(i), prompt, output, content=content))
        if content:
            last.append((content, output))
    return reqs


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_the_count_is_the_brute_force_one(seed, block_size):
    reqs = random_requests(seed)
    for outputs in (True, False):
        stats = prefix_stats(reqs, block_size, outputs=outputs, keep=True)
        assert stats.cached.tolist() == brute_force(reqs, block_size, outputs)
        assert stats.cached_tokens == sum(stats.cached) and stats.requests == len(reqs)


def test_never_the_whole_prompt_and_replies_count():
    c = Content.of_pieces([(piece_id(Space.SHARED, 0), 64)], piece_id(Space.REPLY, 0))
    same = [Request(0, 0.0, 64, 10, content=c), Request(1, 1.0, 64, 10, content=c)]
    assert prefix_stats(same, 16, keep=True).cached.tolist() == [0, 48]  # 64 tokens: 3 blocks, the last recomputed
    turn2 = next_prompt(c, 10, 2, 100)
    reqs = [same[0], Request(2, 2.0, 100, 5, content=turn2)]
    assert prefix_stats(reqs, 16, keep=True).cached.tolist() == [0, 64]  # 73 tokens with KV: 4 full blocks
    assert prefix_stats(reqs, 16, outputs=False, keep=True).cached.tolist() == [0, 64]
    assert prefix_stats(reqs, 8, outputs=False, keep=True).cached.tolist() == [0, 64]
    assert prefix_stats(reqs, 8, keep=True).cached.tolist() == [0, 72]


def test_mooncake_conversation_trace(shared_data):
    from llmsched.workload.workload import trace_workload
    reqs = trace_workload("conversation_trace.jsonl", num_requests=2000).requests()
    stats = prefix_stats(reqs, 16, keep=True)
    assert stats.with_content == 2000 and 0.2 < stats.hit_rate < 0.9
    assert stats.cached.tolist() == brute_force(reqs, 16)

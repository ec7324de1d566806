"""The fused-MoE tile padding: the analytic expectation against routing drawn at random, and where it applies."""
import random

import pytest

from llmsched.batchtime import Batch, make_batch_time_model
from llmsched.batchtime.fused_moe_tiles import default_block_m, padding_factor


def padded_rows_drawn(tokens, experts, k, rng, draws=100):
    """moe_align_block_size's padded row count, averaged over uniform routings (k distinct experts a token)."""
    block, total = default_block_m(tokens), 0
    for _ in range(draws):
        counts = [0] * experts
        for _ in range(tokens):
            for e in rng.sample(range(experts), k):
                counts[e] += 1
        total += sum(-(-n // block) * block for n in counts)
    return total / draws / (tokens * k)


@pytest.mark.parametrize("tokens,experts,k", [(8, 128, 8), (128, 128, 8), (600, 128, 8), (2048, 128, 8),
                                              (300, 8, 2), (1024, 64, 8)])
def test_padding_factor_matches_drawn_routings(tokens, experts, k):
    drawn = padded_rows_drawn(tokens, experts, k, random.Random(tokens))
    assert padding_factor(tokens, experts, k) == pytest.approx(drawn, rel=0.02)


def test_block_m_follows_vllm_default_rule():
    assert [default_block_m(m) for m in (1, 32, 33, 96, 97, 512, 513, 2048)] == [16, 16, 32, 32, 64, 64, 128, 128]


def test_padding_raises_moe_prefill_only():
    moe = dict(model="qwen3-30b-a3b", gpu="h200", step_overhead=0)
    on = make_batch_time_model("roofline", **moe)
    off = make_batch_time_model("roofline", **moe, moe_tile_padding=False)
    prefill = Batch(prefill_new=[2048], prefill_ctx=[0], decode_ctx=[])
    assert on.step_time(prefill) > 1.05 * off.step_time(prefill)
    dense = Batch(prefill_new=[2048], prefill_ctx=[0], decode_ctx=[512] * 32)
    assert make_batch_time_model("roofline", "llama-3.1-8b", "h200").step_time(dense) == \
        make_batch_time_model("roofline", "llama-3.1-8b", "h200", moe_tile_padding=False).step_time(dense)

"""Five small gaps closed together: SLAI beside requests a KV tier loaded, what --max-total-tokens clipped, --rate-
schedule stages as inference-perf sends them, capacity's served share, and bad input to the commands (the last in
tests/data/bad_inputs.toml)."""
from __future__ import annotations

import warnings

import pytest

from llmsched.run_config import RunConfig

from test_fuzz_conservation import _check

# --- 1. SLAI with a prefix cache and KV tiers --------------------------------------------------------------------
# Multi-turn chat over a tight GPU cache with host-memory tiers below it: a request preempted by recompute, whose
# prompt and output the cache still holds, keys at or below 0 for shortest-prefill-first; ahead of the requests a
# tier loaded (which hold their blocks while they wait) it needed its cached blocks back and the replica idled.
SHARED_CHAT = dict(workload="shared-prefix", kv_offload="cpu:64MiB", max_num_batched_tokens=2048)
SPF_STALL = dict(SHARED_CHAT, router="vllm-dp-fresh", rate=24.349932325764616, num_requests=58,
                 workload_params={"num_groups": 1, "num_prompts_per_group": 3, "system_prompt_len": 600,
                                  "question_len": 100, "output_len": 20, "enable_multi_turn_chat": True},
                 max_num_seqs=16, max_model_len=8192, num_blocks=288, seed=365379823)
# One decode short of a block, the rest of the cache held by a request a tier loaded: SLAI's plan preempting the
# decode (itself: no paused prefill to take from) was dropped as a plan of preemptions alone, and nothing moved.
SELF_PREEMPT_STALL = dict(SHARED_CHAT, model="qwen3-14b", gpu="h200", router="prefix-hash",
                          router_params={"prefix_blocks": 64, "load_factor": 1.25}, rate=23.321622259394992,
                          num_requests=35, workload_params={"num_groups": 1, "num_prompts_per_group": 2,
                                                            "system_prompt_len": 300, "question_len": 100,
                                                            "output_len": 200, "enable_multi_turn_chat": False},
                          max_num_seqs=4, max_num_batched_tokens=512, max_model_len=8192, num_blocks=41,
                          swap_space_gb=0.01, seed=579003161)


def checked(fields: dict) -> str | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _check(RunConfig(**fields))


@pytest.mark.parametrize("name", ["slai", "slai-priority", "slai-spf-fixed"])
def test_slai_admits_the_requests_holding_kv_first(name):
    """Every request finishes or is rejected with a reason, none by the stall guard, no replica idles holding work
    (the fuzz's guarantees): SLAI's orders put the requests a tier loaded first, as vLLM 0.32 drains its
    KV-holding queue first, and shortest-prefill-first orders the rest."""
    assert checked({**SPF_STALL, "scheduler": name}) is None


@pytest.mark.parametrize("name", ["slai-fcfs", "slai"])
def test_slai_preempts_a_decode_short_of_a_block_for_a_loaded_request(name):
    assert checked({**SELF_PREEMPT_STALL, "scheduler": name}) is None

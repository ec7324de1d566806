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


# --- 2. what --max-total-tokens clipped ---------------------------------------------------------------------------
def lengths_of(result):
    """Prompt and output lengths by request id (the log holds rows in the order requests left the run)."""
    log = result.requests
    order = log.column("id").argsort(kind="stable")
    return log.column("prompt_len")[order].tolist(), log.column("output_len")[order].tolist()


@pytest.mark.parametrize("source", [dict(rate=20.0), dict(concurrency=8), dict(rate=20.0, arrival="gamma", cv=2.0)])
def test_max_total_tokens_counts_the_requests_it_clips(source):
    """The count is each request's own: the same run without the cap draws the same lengths uncut, and the requests
    whose prompt exceeds limit-1 or whose prompt+output exceeds the limit are the ones counted; the capped run's
    requests all fit, and the cut ones end exactly at the limit."""
    from llmsched.experiment import run
    from llmsched.metrics.summary import summarize
    limit = 1024
    base = dict(scheduler="sarathi", workload="sharegpt", num_requests=150, seed=7, **source)
    raw = lengths_of(run(RunConfig(**base)))
    capped_run = run(RunConfig(**base, max_total_tokens=limit))
    prompts, outputs = lengths_of(capped_run)
    over = [p > limit - 1 or p + o > limit for p, o in zip(*raw)]
    assert 0 < sum(over) < len(over)
    assert all(p + o <= limit for p, o in zip(prompts, outputs))
    assert all(p + o == limit for (p, o), cut in zip(zip(prompts, outputs), over) if cut)
    section = summarize(capped_run)["max_total_tokens"]
    assert (section["limit"], section["drawn"], section["clipped"]) == (limit, 150, sum(over))
    assert "max_total_tokens" not in summarize(run(RunConfig(**base, max_total_tokens=None)))


def test_simulate_prints_and_writes_the_clipped_count(tmp_path, capsys):
    import json
    from llmsched.cli.commands import main
    main(["simulate", "--workload", "sharegpt", "--rate", "20", "--num-requests", "60", "--max-total-tokens", "512",
          "--seed", "3", "--no-progress", "--out", str(tmp_path)])
    written = json.loads((tmp_path / "summary.json").read_text())["max_total_tokens"]
    line = [x for x in capsys.readouterr().out.splitlines() if x.startswith("max_total_tokens 512:")]
    assert line == [f"max_total_tokens 512: clipped {written['clipped']} of 60 requests (prompt to 511 tokens at "
                    f"most, then the output to the rest)"]
    assert 0 < written["clipped"] < 60


def test_max_total_tokens_help_says_how_it_clips():
    from llmsched.run_field import declared
    text = declared(RunConfig)["max_total_tokens"].help
    assert "cut to N-1" in text and "output to N minus the prompt" in text

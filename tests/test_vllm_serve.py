"""End to end through vLLM's OpenAI-compatible server: the llmsched plug-in chosen with ``--scheduler-cls``, its
policy and tiers from ``LLMSCHED_*`` variables, and the official ``openai`` client streaming completions that pick
their tier with ``extra_body={"vllm_xargs": {"tier": ...}}``.

The server (API process plus engine-core process) runs on a free loopback port with job-local temp and cache
folders; the test starts it, waits for it with a bound, and stops the whole process group (checking nothing is
left). Counts are deterministic: every request is forced to its length with ``ignore_eos``.
"""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.vllm_support import SERVE_POLICY, require_vllm, take_server

require_vllm("openai")

# (tier asked for, prompt tokens, forced output tokens); "gold" is not configured: it falls back to "free"
REQUESTS = [("paid", 40, 12), ("free", 50, 16), ("paid", 60, 12), ("free", 70, 16), ("gold", 30, 8)]
START_TIMEOUT = 300  # seconds; about 35 s on an idle 2-core machine, far more when it is shared


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = take_server(tmp_path_factory, START_TIMEOUT)
    yield srv
    srv.stop()


def stream(client, model, i, tier, prompt, max_tokens):
    """One streamed completion; returns (finish reason, tokens streamed, usage's completion tokens, chunks)."""
    chunks = tokens = 0
    finish = usage = None
    for ch in client.completions.create(
            model=model, prompt=[3 + (i * 131 + k * 17) % 997 for k in range(prompt)], max_tokens=max_tokens,
            temperature=0.0, logprobs=0, stream=True, stream_options={"include_usage": True},
            extra_body={"ignore_eos": True, "vllm_xargs": {"tier": tier}}):
        if ch.choices:
            chunks += 1
            c = ch.choices[0]
            tokens += len(c.logprobs.tokens) if c.logprobs and c.logprobs.tokens else 0
            finish = c.finish_reason or finish
        if ch.usage:
            usage = ch.usage.completion_tokens
    return finish, tokens, usage, chunks


def test_openai_client_streams_two_tiers_through_the_plugin(server):
    from openai import OpenAI
    client = OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=120, max_retries=0)
    with ThreadPoolExecutor(len(REQUESTS)) as pool:
        futures = [pool.submit(stream, client, server.model, i, *r) for i, r in enumerate(REQUESTS)]
        results = [f.result(timeout=180) for f in futures]
    for (tier, _, n), (finish, tokens, usage, chunks) in zip(REQUESTS, results):
        assert (finish, tokens, usage) == ("length", n, n), (tier, finish, tokens, usage)
        assert chunks >= 1

    leftovers = server.stop()  # API server and engine core, the whole process group
    assert leftovers == [], f"processes left after stopping the server: {leftovers}"
    # The plug-in writes adapter.json as the last request finishes, before its tokens leave the engine core.
    info = json.loads((server.records / "adapter.json").read_text())
    stats = info["stats"]
    assert info["policy"]["name"] == SERVE_POLICY and info["settings"]["tiers"] == ["paid", "free"]
    assert stats["tiers_seen"] == {"paid": 2, "free": 3} and stats["unknown_tiers"] == 1
    assert stats["tiers_scheduled"] == {"paid": 2, "free": 3}  # the policy's plans took both tiers' requests
    assert stats["finished"] == len(REQUESTS) and stats["rejected"] == stats["aborted"] == 0
    assert stats["mismatch_steps"] == 0, stats["mismatches"]

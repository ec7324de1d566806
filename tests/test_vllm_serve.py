"""End to end through vLLM's OpenAI-compatible server, once per scheduler family, each policy with its defaults
(but PAB's node-wide SLOs, scaled to a CPU engine: see ``SERVE_PARAMS``):
the plug-in chosen with ``--scheduler-cls``, its policy and tiers from ``LLMSCHED_*`` variables, and the official
``openai`` client sending concurrent completions and chat completions (tier picked with
``extra_body={"vllm_xargs": {"tier": ...}}``), a prompt longer than the token budget and a request with an unknown
tier, then one more request after those (the server keeps serving).

Each server (API process plus engine-core process) runs on a free loopback port with job-local temp, cache and
profile folders (so the policy's batch-time model is the online fit, as on a fresh machine); the test starts it,
waits with a bound, and stops the whole process group (checking nothing is left). Counts are deterministic: every
request is forced to its length with ``ignore_eos``.
"""
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.vllm_support import SERVE_FAMILIES, require_vllm, take_server

require_vllm("openai")

# (tier, prompt tokens, forced output tokens) of the concurrent completions
COMPLETIONS = [("paid", 40, 12), ("free", 50, 16), ("paid", 60, 12), ("free", 70, 16), ("free", 35, 10),
               ("paid", 45, 8)]
CHATS = [("paid", "hello, which batch am I in?", 8), ("free", "tell me about schedulers", 10)]
OVER_BUDGET = 300  # prompt tokens > the servers' max_num_batched_tokens (256), < max_model_len (512)
START_TIMEOUT = 300  # seconds; about 35 s on an idle 2-core machine, far more when it is shared
TIMEOUT = 150  # seconds a request may take before the test fails (a policy that never answers fails, not hangs)


@pytest.fixture(scope="module", params=SERVE_FAMILIES)
def server(request, tmp_path_factory):
    srv = take_server(tmp_path_factory, START_TIMEOUT, request.param)
    yield srv
    srv.stop()


def prompt(i, n):
    return [3 + (i * 131 + k * 17) % 997 for k in range(n)]


def complete(client, model, i, tier, n_prompt, max_tokens):
    """One streamed completion: (finish reason, stop reason, tokens streamed, usage's completion tokens)."""
    tokens = 0
    finish = stop = usage = None
    for ch in client.completions.create(
            model=model, prompt=prompt(i, n_prompt), max_tokens=max_tokens, temperature=0.0, logprobs=0,
            stream=True, stream_options={"include_usage": True},
            extra_body={"ignore_eos": True, "vllm_xargs": {"tier": tier}}):
        if ch.choices:
            c = ch.choices[0]
            tokens += len(c.logprobs.tokens) if c.logprobs and c.logprobs.tokens else 0
            finish = c.finish_reason or finish
            stop = getattr(c, "stop_reason", None) or stop
        if ch.usage:
            usage = ch.usage.completion_tokens
    return finish, stop, tokens, usage


def complete_once(client, model, i, tier, n_prompt, max_tokens):
    """One completion, not streamed: (finish reason, stop reason, tokens)."""
    r = client.completions.create(model=model, prompt=prompt(i, n_prompt), max_tokens=max_tokens,
                                  temperature=0.0, extra_body={"ignore_eos": True, "vllm_xargs": {"tier": tier}})
    c = r.choices[0]
    return c.finish_reason, getattr(c, "stop_reason", None), r.usage.completion_tokens


def refused(client, model, i, tier, chat=False):
    """(HTTP status, message) of a request the server must refuse."""
    from openai import APIStatusError
    try:
        if chat:
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                           stream=True, extra_body={"vllm_xargs": {"tier": tier}})
        else:
            client.completions.create(model=model, prompt=prompt(i, 20), max_tokens=4,
                                      extra_body={"vllm_xargs": {"tier": tier}})
    except APIStatusError as e:
        return e.status_code, e.message
    return 200, "accepted"


def chat(client, model, tier, text, max_tokens):
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}],
                                       max_tokens=max_tokens, temperature=0.0,
                                       extra_body={"ignore_eos": True, "vllm_xargs": {"tier": tier}})
    c = r.choices[0]
    return c.finish_reason, getattr(c, "stop_reason", None), r.usage.completion_tokens


def test_every_family_serves_with_its_defaults_and_tells_clients_why_it_rejects(server):
    from openai import OpenAI
    client = OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=TIMEOUT, max_retries=0)
    # Warm-up, as before serving traffic: the first forward passes compile the CPU kernels (7-45 s on a loaded
    # 2-core machine), and a request held that long is so late that FairBatching's PAB refuses all that follow.
    assert complete(client, server.model, 5, "paid", 20, 2)[::2] == ("length", 2), server.policy
    with ThreadPoolExecutor(len(COMPLETIONS) + len(CHATS) + 2) as pool:
        done = [pool.submit(complete, client, server.model, i, *r) for i, r in enumerate(COMPLETIONS)]
        chats = [pool.submit(chat, client, server.model, *c) for c in CHATS]
        over = pool.submit(complete_once, client, server.model, 99, "free", OVER_BUDGET, 8)
        gold = pool.submit(refused, client, server.model, 98, "gold")
        gold_chat = pool.submit(refused, client, server.model, 97, "gold", chat=True)
        results = [f.result(timeout=TIMEOUT + 30) for f in done]
        chat_results = [f.result(timeout=TIMEOUT + 30) for f in chats]
        over, gold = over.result(timeout=TIMEOUT + 30), gold.result(timeout=TIMEOUT + 30)
        gold_chat = gold_chat.result(timeout=TIMEOUT + 30)
    for (tier, _, n), (finish, stop, tokens, usage) in zip(COMPLETIONS, results):
        assert (finish, tokens, usage) == ("length", n, n), (server.policy, tier, finish, stop, tokens, usage)
    for (tier, _, n), (finish, stop, usage) in zip(CHATS, chat_results):
        assert (finish, usage) == ("length", n), (server.policy, tier, finish, stop, usage)
    # An unknown tier: HTTP 400 from the API server (llmsched.vllm.http.TierCheck) naming the valid tiers.
    for status, message in (gold, gold_chat):
        assert status == 400 and "unknown tier 'gold'" in message and "paid, free" in message, (status, message)
    # Longer than the token budget: served by a policy that chunks prompts, rejected at arrival (with the budget
    # in the reason) by one that does not, or by PAB's admission (with its prefill budget, which depends on the
    # step times it has seen); never an error, never left waiting.
    finish, stop, tokens = over
    if finish == "abort":
        budget = "PAB admission" if server.policy == "fairbatching-pab" and "PAB admission" in stop else "256"
        assert "rejected by llmsched" in stop and budget in stop, over
    else:
        assert (finish, tokens) == ("length", 8), over
    # The server keeps serving.
    assert complete(client, server.model, 7, "paid", 20, 4)[::2] == ("length", 4), server.policy

    log = server.log_tail(10 ** 7)
    assert f"llmsched: policy {server.policy} " in log and "llmsched: batch-time model: " in log
    assert "Internal server error" not in log and "EngineDeadError" not in log
    leftovers = server.stop()  # API server and engine core, the whole process group
    assert leftovers == [], f"processes left after stopping the server: {leftovers}"
    info = json.loads((server.records / "adapter.json").read_text())
    stats = info["stats"]
    assert info["policy"]["name"] == server.policy and info["settings"]["tiers"] == ["paid", "free"]
    served = len(COMPLETIONS) + len(CHATS) + 2 + (finish != "abort")
    assert stats["finished"] == served and stats["rejected"] == (finish == "abort"), stats
    assert stats["unknown_tiers"] == 0 and stats["aborted"] == 0, stats
    assert stats["mismatch_steps"] == 0, stats["mismatches"]

"""The plug-in inside vLLM with vLLM's prefix caching on: a tiny random-weight Llama in process, prompts sharing a
long prefix. The view shows each waiting request's cached prefix as vLLM finds it, policies plan only the tokens
after it, and vLLM runs the plans exactly."""
import os
import time

import pytest

from tests.vllm_support import require_vllm

require_vllm()

from llmsched.vllm.launch import EngineConfig, make_llm, prompt_ids, scheduler_of, set_in_process_env  # noqa: E402
from llmsched.vllm.model import write_model  # noqa: E402
from llmsched.vllm.settings import load_settings  # noqa: E402


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    work = tmp_path_factory.mktemp("vllm-prefix")
    set_in_process_env(str(work))
    os.environ["LLMSCHED_PROFILES"] = str(work / "profiles")
    model = write_model(work / "tiny")
    return make_llm(EngineConfig(model=str(model), max_model_len=512, max_num_seqs=16, max_num_batched_tokens=256,
                                 kv_cache_mb=2, prefix_caching=True))


def run(llm, scheduler, prompts, max_tokens, seen=None):
    """Submit ``prompts`` at once and step to completion; ``seen`` collects, per request, the cached tokens the
    view showed the policy while it waited."""
    from vllm import SamplingParams
    s = scheduler_of(llm)
    s.configure(load_settings({}, scheduler=scheduler), record=True)
    if seen is not None:
        policy, schedule = s.llmsched_policy, s.llmsched_policy.schedule

        def spied(view):
            for m in view.waiting:
                seen.setdefault(m.id, view.cached_tokens(m))
            return schedule(view)
        policy.schedule = spied
    eng = llm.llm_engine
    for i, p in enumerate(prompts):
        eng.add_request(str(i), {"prompt_token_ids": p}, SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    deadline = time.monotonic() + 60
    while eng.has_unfinished_requests() and time.monotonic() < deadline:
        eng.step()
    assert not eng.has_unfinished_requests(), "the engine did not drain"
    return s


@pytest.mark.parametrize("name", ["vllm", "vllm-chunked", "sarathi", "fcfs"])
def test_shared_prefixes_hit_in_vllm_and_plans_run_exactly(llm, name):
    shared = prompt_ids(160, 99)
    first = run(llm, name, [shared + prompt_ids(20, 1)], 4)  # the prefix enters vLLM's cache
    assert first.stats["finished"] == 1
    seen = {}
    s = run(llm, name, [shared + prompt_ids(10 + 7 * i, 10 + i) for i in range(6)], 6, seen)
    assert s.stats["mismatch_steps"] == 0, s.stats["mismatches"]
    assert s.stats["finished"] == 6
    log, _ = s.records
    found = dict(zip(log.column("id").tolist(), log.column("cached_tokens").tolist()))  # vLLM's, at admission
    assert seen == found
    assert all(v >= 160 for v in found.values())  # the shared prefix's five 32-token blocks (an earlier
    # parameter's run may have left more of these prompts cached)
    assert s.view.free_blocks == s.view.total_blocks

"""Real-engine prompts from request contents (vllm/content_ids.py, workload/content_scale.py): requests whose
contents share a prefix send the same token ids there, so vLLM's prefix cache shares the KV blocks the simulator's
does; requests without content send the ids they always did. No vLLM needed."""
import os
import subprocess
import sys

import pytest

from llmsched.content import Content, Space, piece_id
from llmsched.request import Request
from llmsched.run_config import RunConfig
from llmsched.vllm.content_ids import content_ids
from llmsched.vllm.fidelity import fidelity_engine
from llmsched.vllm.launch import PROMPT_VOCAB, EngineConfig, prompt_ids
from llmsched.vllm.runner import request_ids, workload_requests
from llmsched.workload.content_scale import scaled_content

MOONCAKE = "../shared/data/traces/mooncake/conversation_trace.jsonl"
BLOCK = 32  # vLLM's block size on CPU


def shared_blocks(a, b, block: int = BLOCK) -> int:
    """Leading full blocks two requests' contents share, as the simulator's prefix cache counts them."""
    n = 0
    for x, y in zip(a.content.block_hashes(block, a.prompt_len), b.content.block_hashes(block, b.prompt_len)):
        if x != y:
            break
        n += 1
    return n


def same_blocks(a: list[int], b: list[int], block: int = BLOCK) -> int:
    """Leading full blocks of token ids two prompts share, as vLLM's chained block hashes count them."""
    n = 0
    while (n + 1) * block <= min(len(a), len(b)) and a[n * block:(n + 1) * block] == b[n * block:(n + 1) * block]:
        n += 1
    return n


def mooncake(n: int, scale: float, max_model_len: int = 1024):
    cfg = RunConfig.checked({"trace": MOONCAKE, "num_requests": n, "max_model_len": max_model_len})
    return workload_requests(cfg, max_model_len, scale)


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
@pytest.mark.parametrize("scale", [1.0, 0.1, 0.04])
def test_mooncake_prompts_share_exactly_the_blocks_their_hash_ids_share(scale):
    """The reported bug: at --scale-lengths 0.04 every request lost its content (and vLLM got ids from the request
    id alone, so cached_tokens was 0). Now every pair of prompts agrees on exactly the blocks the simulator
    shares: at 0.04 a 512-token hash block is 20 or 21 tokens, so block 0 alone (shared by all) fills no 32-token
    block; at 0.1 it fills one."""
    reqs = mooncake(40, scale)
    assert all(r.content is not None and r.content.length >= r.prompt_len for r in reqs)
    ids = [request_ids(r) for r in reqs]
    assert all(len(i) == r.prompt_len and min(i) >= 3 and max(i) < PROMPT_VOCAB for i, r in zip(ids, reqs))
    counts = []
    for i in range(len(reqs)):
        for j in range(i):
            k = shared_blocks(reqs[i], reqs[j])
            assert same_blocks(ids[i], ids[j]) == k, (i, j)
            counts.append(k)
    assert max(counts) >= 1 if scale >= 0.1 else max(counts) == 0


def test_scaled_pieces_keep_their_ids_and_shrink_in_proportion():
    """A 512-token hash block stays one piece of about 512 * scale tokens; shared pieces end at the same place."""
    c = Content([piece_id(Space.BLOCK, x) for x in (0, 7, 9)], [512, 1024, 1300], piece_id(Space.REPLY, 1))
    s = scaled_content(c, 0.04, round(1300 * 0.04))
    assert list(s.ids) == list(c.ids) and list(s.ends) == [20, 41, 52] and s.reply == c.reply
    other = scaled_content(Content([piece_id(Space.BLOCK, x) for x in (0, 7, 5)], [512, 1024, 1536], 9), 0.04, 61)
    assert list(other.ends[:2]) == list(s.ends[:2])


def test_scaling_drops_only_pieces_that_round_to_no_tokens_and_keeps_one_token():
    """A token-id prompt at 0.1 keeps about a tenth of its one-token pieces, the same ones in two prompts that
    share them; a content whose every end rounds to 0 keeps its first piece as the one-token prompt."""
    a = Content.of_tokens(range(100, 140), 1)
    b = Content.of_tokens([*range(100, 130), 7, 8, 9], 2)
    sa, sb = scaled_content(a, 0.1, 4), scaled_content(b, 0.1, 3)
    assert sa.length == 4 and sb.length == 3 and list(sa.ids[:3]) == list(sb.ids[:3])
    tiny = scaled_content(Content([piece_id(Space.TEXT, 3)], [4], 1), 0.1, 1)
    assert list(tiny.ids) == [piece_id(Space.TEXT, 3)] and tiny.length == 1
    with pytest.raises(ValueError, match="length scale must be > 0"):
        scaled_content(a, 0.0, 1)


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_content_cut_to_the_engine_context_keeps_the_shared_prefix():
    """A prompt cut to half of --max-model-len keeps its content's first tokens (it used to lose its content)."""
    reqs = mooncake(12, 1.0, max_model_len=512)
    assert all(r.prompt_len == 256 and r.content.length == 256 for r in reqs)  # every prompt there is > 256
    assert request_ids(reqs[0])[:256] == request_ids(reqs[1])[:256]  # both begin with hash block 0 (512 tokens)


def test_shared_prefix_groups_send_their_system_prompt():
    """--workload shared-prefix: prompts of one group share their system prompt's full blocks, no more; prompts of
    different groups share nothing."""
    cfg = RunConfig.checked({"workload": "shared-prefix", "num_requests": 30, "rate": 5.0, "max_model_len": 2048,
                             "workload_params": {"num_groups": 3, "num_prompts_per_group": 5,
                                                 "system_prompt_len": 100, "question_len": 50}})
    reqs = workload_requests(cfg, 2048, 1.0)
    ids = [request_ids(r) for r in reqs]
    pairs = [(same_blocks(ids[i], ids[j]), shared_blocks(reqs[i], reqs[j]))
             for i in range(len(reqs)) for j in range(i)]
    assert all(real == sim for real, sim in pairs)
    assert {real for real, _ in pairs} == {0, 3, 4}  # other group; same group (96 of 100 tokens); the same prompt


def test_requests_without_content_send_the_ids_they_always_did():
    r = Request(17, 0.0, 300, 5)
    assert request_ids(r) == prompt_ids(300, 17)


def test_token_pieces_send_their_own_ids_within_the_vocabulary():
    c = Content.of_tokens([5, 999, 1000, 123456], 1)
    assert content_ids(c, 4, PROMPT_VOCAB) == [5, 999, 3 + 1000 % 997, 3 + 123456 % 997]
    with pytest.raises(ValueError, match="covers its prompt"):
        content_ids(c, 5, PROMPT_VOCAB)


def test_ids_are_the_same_in_every_process():
    """Python's str hash changes from process to process; a piece's tokens must not (a warm prefix cache, two
    runs compared)."""
    code = ("from llmsched.content import Content, Space, piece_id\n"
            "from llmsched.vllm.content_ids import content_ids\n"
            "print(content_ids(Content([piece_id(Space.SHARED, 4), piece_id(Space.TEXT, 9)], [40, 60], 1), 60, 1000))")
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    here = content_ids(Content([piece_id(Space.SHARED, 4), piece_id(Space.TEXT, 9)], [40, 60], 1), 60, 1000)
    assert out.strip() == str(here)


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_fidelity_caches_prefixes_in_vllm_only_when_prompts_have_content():
    """fidelity simulates with contents (the simulation caches prefixes by default), so the engine does too;
    without content it keeps the engine's default, off."""
    engine = EngineConfig(model="m")
    cfg = RunConfig.checked({"trace": MOONCAKE, "num_requests": 12, "max_model_len": 1024})
    assert fidelity_engine(cfg, engine, mooncake(12, 0.1)).prefix_caching
    off = RunConfig.checked({"trace": MOONCAKE, "num_requests": 12, "max_model_len": 1024, "prefix_caching": False})
    assert not fidelity_engine(off, engine, mooncake(12, 0.1)).prefix_caching
    assert not fidelity_engine(cfg, engine, [Request(0, 0.0, 10, 2)]).prefix_caching

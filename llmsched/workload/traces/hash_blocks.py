"""Prompts named by Mooncake's ``hash_ids``: one id per 512-token block of the prompt (the last block partial),
equal ids standing for equal blocks.

Mooncake's traces and server logs that carry the ids (llmsched's GPU captures, ``scripts/vllm_gpu_replay.py``,
build each block's tokens from its id) share these checks and this content, so the same ids give the same prompt
whichever file holds them. A KV block size dividing 512 then shares a KV block exactly when two prompts agree on
every hash block up to it, which is what the ids say. A log without ids gives each prompt text of its own
(``own_content``), after the prefix its bench dataset gave it where that is known (``prefixed_content``:
workload/traces/bench_prefixes.py).
"""
from __future__ import annotations

from array import array
from pathlib import Path

from llmsched.content import MAX_NUMBER, Content, Space, piece_id
from llmsched.workload.traces.jsonl import capped
from llmsched.workload.traces.trace_error import TraceError

HASH_BLOCK = 512
FIX = "hash_ids list one integer block id per 512 prompt tokens"
BLOCK_BASE = piece_id(Space.BLOCK, 0)


def check_blocks(path: Path, number: int, prompt: int, ids: list[int], length_key: str = "input_length",
                 fix: str = FIX) -> None:
    """A row's ids against its prompt length (``length_key``, the file's name for it): one id per 512 tokens, each
    a block number in [0, 2**56)."""
    need = -(-prompt // HASH_BLOCK)
    if len(ids) > need:
        raise TraceError(f"{path}:{number}: hash_ids has {len(ids)} block ids, a prefix longer than the prompt "
                         f"({length_key} {prompt} fills {need} block(s) of {HASH_BLOCK} tokens); fix {length_key} "
                         f"or hash_ids")
    if len(ids) < need:
        raise TraceError(f"{path}:{number}: hash_ids has {len(ids)} block ids but {length_key} {prompt} fills {need} "
                         f"block(s) of {HASH_BLOCK} tokens (the last may be partial); {fix}")
    big = next((x for x in ids if x > MAX_NUMBER), None)
    if big is not None:
        raise TraceError(f"{path}:{number}: hash_ids holds {big}, above 2**56 - 1; renumber the block ids from 0")


def block_content(index: int, prompt: int, ids, max_prompt: int | None = None) -> Content:
    """Request ``index``'s prompt of ``prompt`` tokens whose 512-token blocks are ``ids`` (its reply named by
    ``index``), cut where max_total_tokens clipped the prompt."""
    reply = piece_id(Space.REPLY, index)
    if not ids:  # a zero-length prompt clamped to one token
        return Content([piece_id(Space.TEXT, index)], [prompt], reply)
    ends = array("q", range(HASH_BLOCK, HASH_BLOCK * len(ids), HASH_BLOCK))
    ends.append(prompt)
    return capped(Content(array("q", [BLOCK_BASE | x for x in ids]), ends, reply), prompt, max_prompt)


def own_content(index: int, prompt: int, max_prompt: int | None = None) -> Content:
    """Request ``index``'s prompt when its log names no tokens: one piece of its own, shared with no other request.
    Its KV blocks are then found again only by itself: after a preemption by recompute vLLM's prefix cache still
    holds the blocks it freed (until an allocation evicts them), and the re-prefill hits them."""
    return capped(Content([piece_id(Space.TEXT, index)], [prompt], piece_id(Space.REPLY, index)), prompt, max_prompt)


def prefixed_content(index: int, prompt: int, group: int, length: int, max_prompt: int | None) -> Content:
    """Request ``index``'s prompt: bench prefix ``group`` (``length`` tokens; -1: none), then text of its own."""
    reply = piece_id(Space.REPLY, index)
    if group < 0:
        return own_content(index, prompt, max_prompt)
    shared = piece_id(Space.SHARED, group)
    if prompt <= length:
        return capped(Content([shared], [prompt], reply), prompt, max_prompt)
    return capped(Content([shared, piece_id(Space.TEXT, index)], [length, prompt], reply), prompt, max_prompt)

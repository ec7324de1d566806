"""Mooncake's traces (FAST'25; conversation, synthetic and tool-agent): one JSON object a line with ``timestamp``
(milliseconds), ``input_length``, ``output_length`` and ``hash_ids``, one id per 512-token block of the prompt
(the last block partial), equal ids standing for equal blocks.

Each prompt becomes a ``Content`` whose pieces are its blocks: a KV block size dividing 512 then shares a KV block
exactly when the prompts agree on every hash block up to it, which is what the ids say.
"""
from __future__ import annotations

from array import array
from pathlib import Path

from llmsched.content import MAX_NUMBER, Content, Space, piece_id
from llmsched.workload.jsonl import Columns, JsonlTrace, capped, chunked, in_order, integers, lines, require, \
    seconds, whole
from llmsched.workload.trace_error import TraceError

KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
HASH_BLOCK = 512
FIX = "Mooncake's hash_ids list one integer block id per 512 prompt tokens"


def is_mooncake(keys: set[str]) -> bool:
    return set(KEYS) <= keys


def read_mooncake(path: Path, zero_lengths: str = "error", vocab_size: int | None = None) -> JsonlTrace:
    """Every line checked; the prompts' block ids are read again as the run goes (``JsonlTrace.contents``)."""
    columns = Columns(path, zero_lengths)
    before = 0.0
    for number, row in lines(path):
        t = seconds(path, number, "timestamp", require(path, number, row, "timestamp"), 1e-3)
        in_order(path, number, "timestamp", t, before)
        before = t
        prompt = whole(path, number, "input_length", require(path, number, row, "input_length"))
        output = whole(path, number, "output_length", require(path, number, row, "output_length"))
        ids = integers(path, number, "hash_ids", require(path, number, row, "hash_ids"), FIX)
        check_blocks(path, number, prompt, ids)
        columns.add(number, t, prompt, output, ("input_length", "output_length"))

    def contents(n: int, chunk: int, max_prompt: int | None = None):
        return chunked(_contents(path, columns.dropped, max_prompt), n, chunk)

    return JsonlTrace.of(columns, "mooncake", contents, HASH_BLOCK)


def check_blocks(path: Path, number: int, prompt: int, ids: list[int]) -> None:
    need = -(-prompt // HASH_BLOCK)
    if len(ids) > need:
        raise TraceError(f"{path}:{number}: hash_ids has {len(ids)} block ids, a prefix longer than the prompt "
                         f"(input_length {prompt} fills {need} block(s) of {HASH_BLOCK} tokens); fix input_length "
                         f"or hash_ids")
    if len(ids) < need:
        raise TraceError(f"{path}:{number}: hash_ids has {len(ids)} block ids but input_length {prompt} fills {need} "
                         f"block(s) of {HASH_BLOCK} tokens (the last may be partial); {FIX}")
    big = next((x for x in ids if x > MAX_NUMBER), None)
    if big is not None:
        raise TraceError(f"{path}:{number}: hash_ids holds {big}, above 2**56 - 1; renumber the block ids from 0")


def _contents(path: Path, dropped: set[int], max_prompt: int | None):
    base = piece_id(Space.BLOCK, 0)
    for index, (_, row) in enumerate(lines(path)):
        if index in dropped:
            continue
        prompt = max(1, int(row["input_length"]))
        ids = row["hash_ids"]
        reply = piece_id(Space.REPLY, index)
        if not ids:  # a zero-length prompt clamped to one token
            yield Content([piece_id(Space.TEXT, index)], [prompt], reply)
            continue
        ends = array("q", range(HASH_BLOCK, HASH_BLOCK * len(ids), HASH_BLOCK))
        ends.append(prompt)
        yield capped(Content(array("q", [base | x for x in ids]), ends, reply), prompt, max_prompt)

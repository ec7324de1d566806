"""Mooncake's traces (FAST'25; conversation, synthetic and tool-agent): one JSON object a line with ``timestamp``
(milliseconds), ``input_length``, ``output_length`` and ``hash_ids``, one id per 512-token block of the prompt
(the last block partial), equal ids standing for equal blocks.

Each prompt becomes a ``Content`` whose pieces are its blocks (workload/traces/hash_blocks.py, which server logs with
``hash_ids`` share).
"""
from __future__ import annotations

from pathlib import Path

from llmsched.workload.traces.hash_blocks import HASH_BLOCK, block_content, check_blocks
from llmsched.workload.traces.jsonl import Columns, JsonlTrace, chunked, in_order, integers, lines, require, \
    seconds, whole

KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
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
        check_blocks(path, number, prompt, ids, fix=FIX)
        columns.add(number, t, prompt, output, ("input_length", "output_length"))

    def contents(n: int, chunk: int, max_prompt: int | None = None):
        return chunked(_contents(path, columns.dropped, max_prompt), n, chunk)

    return JsonlTrace.of(columns, "mooncake", contents, HASH_BLOCK)


def _contents(path: Path, dropped: set[int], max_prompt: int | None):
    for index, (_, row) in enumerate(lines(path)):
        if index in dropped:
            continue
        yield block_content(index, max(1, int(row["input_length"])), row["hash_ids"], max_prompt)

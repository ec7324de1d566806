"""JSON-lines traces: one object a line, read as a stream, and the checks every field gets (file:line errors).

A JSONL trace is read twice: once up front, every line checked and its arrival time and lengths kept (24 bytes a
request, as a CSV trace holds them), and again as the run goes, a chunk at a time, for each request's content, so
memory does not grow with the identities of a million prompts.
"""
from __future__ import annotations

import json
import math
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llmsched.bounds import MAX_SECONDS, MAX_TOKENS
from llmsched.workload.traces.trace_error import TraceError


def is_jsonl(path: Path) -> bool:
    """True when the file's first non-blank character opens a JSON object."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lstrip()
    except OSError:
        return False
    return head[:1] == b"{"


def first_keys(path: Path) -> set[str]:
    """The keys of the first line's object (empty if it is not one)."""
    for _, row in lines(path):
        return set(row)
    return set()


def lines(path: Path, stop: int | None = None) -> Iterator[tuple[int, dict]]:
    """(line number, object) of each non-blank line, up to ``stop`` objects."""
    count = 0
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror})") from None
    with f:
        number = 0
        while stop is None or count < stop:
            try:
                text = f.readline()
            except UnicodeDecodeError:
                raise TraceError(f"{path}:{number + 1}: not a UTF-8 text file; a JSONL trace is text, one JSON "
                                 f"object a line") from None
            if not text:
                return
            number += 1
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except ValueError as e:
                raise TraceError(f"{path}:{number}: not valid JSON ({e.msg} at column {e.colno}); a JSONL trace "
                                 f"has one JSON object a line") from None
            if not isinstance(row, dict):
                raise TraceError(f"{path}:{number}: a line must be a JSON object {{...}}, got "
                                 f"{type(row).__name__}")
            count += 1
            yield number, row


def require(path: Path, number: int, row: dict, key: str, fix: str = ""):
    if key not in row:
        raise TraceError(f"{path}:{number}: the line lacks {key!r}" + (f"; {fix}" if fix else "") +
                         f" (it has {', '.join(row) or 'nothing'})")
    return row[key]


def whole(path: Path, number: int, key: str, value, low: int = 0) -> int:
    """An integer field (a float with no fraction is taken, as JSON writers give 12.0) at least ``low`` and at most
    ``bounds.MAX_TOKENS`` (every such field is a length in tokens or a turn's number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceError(f"{path}:{number}: {key} is {json.dumps(value)}, not a whole number")
    if isinstance(value, float):
        if not value.is_integer():
            raise TraceError(f"{path}:{number}: {key} is {value!r}, not a whole number")
        if value > MAX_TOKENS:
            raise TraceError(f"{path}:{number}: {key} is {value!r}; it must be at most {MAX_TOKENS:,} tokens (the "
                             f"longest context served is about 10 million)")
        value = int(value)
    if value < low:
        raise TraceError(f"{path}:{number}: {key} is {value}; it must be >= {low}")
    if value > MAX_TOKENS:
        raise TraceError(f"{path}:{number}: {key} is {value}; it must be at most {MAX_TOKENS:,} tokens (the longest "
                         f"context served is about 10 million)")
    return value


def seconds(path: Path, number: int, key: str, value, scale: float = 1.0) -> float:
    """A time field, as seconds (``scale`` converts the file's unit: 1e-3 for milliseconds), at most
    ``bounds.MAX_SECONDS``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TraceError(f"{path}:{number}: {key} is {json.dumps(value)}; arrival times must be finite numbers "
                         f">= 0")
    if value * scale > MAX_SECONDS:
        raise TraceError(f"{path}:{number}: {key} is {json.dumps(value)}, {value * scale:.3g} s, more than "
                         f"{MAX_SECONDS:.0e} s (about 32 years) the simulator runs: check the field's unit")
    return value * scale


def integers(path: Path, number: int, key: str, value, fix: str) -> list[int]:
    """A list of integers >= 0 (ids): anything else is an error naming the first bad entry and ``fix``."""
    if not isinstance(value, list):
        raise TraceError(f"{path}:{number}: {key} is {type(value).__name__} {json.dumps(value)[:40]}, not a list of "
                         f"integers; {fix}")
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise TraceError(f"{path}:{number}: {key}[{i}] is {json.dumps(x)[:40]}, not an integer >= 0; {fix}")
    return value


def in_order(path: Path, number: int, key: str, t: float, before: float) -> None:
    if t < before:
        raise TraceError(f"{path}:{number}: {key} goes back in time ({t:g} after {before:g} on an earlier line); "
                         f"lines must be in arrival order: sort them by {key}")


ZERO_FIX = ("a request needs at least one token: remove or fix the line (in Python, zero_lengths='drop' skips such "
            "lines and 'clamp' counts them as 1)")


class Columns:
    """What the first pass keeps of each request: arrival, prompt and output length (8 bytes each), and which
    lines the zero-length policy dropped."""

    def __init__(self, path: Path, zero_lengths: str):
        if zero_lengths not in ("error", "drop", "clamp"):
            raise ValueError(f"zero_lengths must be one of error, drop, clamp; got {zero_lengths!r}")
        self.path, self.zero_lengths = path, zero_lengths
        self.arrivals, self.prompts, self.outputs = array("d"), array("q"), array("q")
        self.dropped: set[int] = set()  # indices (among the file's requests) of dropped lines
        self.clamped = 0
        self.count = 0

    def add(self, number: int, t: float, prompt: int, output: int, names=("prompt", "output")) -> bool:
        """Keeps one request; False when the zero-length policy drops it."""
        index = self.count
        self.count += 1
        if prompt == 0 or output == 0:
            if self.zero_lengths == "error":
                name = names[0] if prompt == 0 else names[1]
                raise TraceError(f"{self.path}:{number}: {name} is 0; {ZERO_FIX}")
            if self.zero_lengths == "drop":
                self.dropped.add(index)
                return False
            self.clamped += 1
            prompt, output = max(prompt, 1), max(output, 1)
        self.arrivals.append(t)
        self.prompts.append(prompt)
        self.outputs.append(output)
        return True


@dataclass
class JsonlTrace:
    """A JSONL trace as the workload reads it: like ``traces.Trace`` (arrivals, prompt and output lengths), plus
    ``contents(n, chunk, max_prompt)``, the first ``n`` requests' contents a chunk at a time, read anew from the
    file at each call (None when the file names no prompt identities), and ``hash_block``, the tokens each of its
    block ids stands for (Mooncake: 512), which a KV block size must divide; and ``follow_ups``,
    for a trace whose sessions continue as their requests finish, their later turns (``Workload.follow_ups``)."""

    arrivals: np.ndarray
    prompt_lens: np.ndarray
    output_lens: np.ndarray
    source: Path
    format: str
    dropped: int = 0
    clamped: int = 0
    contents: Callable | None = None
    hash_block: int | None = None
    follow_ups: object = None
    in_flight: int | None = None  # a client's cap on requests in flight that a replay keeps (a closed loop)
    sent_before: object = None  # the prompt its client sent before the run (bench_warmups.SentBefore), or None
    turns: object = None  # a conversation log's: per request, the request its turn follows (-1: none), or None

    def __len__(self) -> int:
        return len(self.prompt_lens)

    @classmethod
    def of(cls, columns: Columns, fmt: str, contents=None, hash_block=None, follow_ups=None) -> "JsonlTrace":
        return cls(np.frombuffer(columns.arrivals, np.float64) if columns.arrivals else np.zeros(0),
                   np.frombuffer(columns.prompts, np.int64) if columns.prompts else np.zeros(0, np.int64),
                   np.frombuffer(columns.outputs, np.int64) if columns.outputs else np.zeros(0, np.int64),
                   columns.path, fmt, len(columns.dropped), columns.clamped, contents, hash_block, follow_ups)


def chunked(items: Iterator, n: int, chunk: int) -> Iterator[list]:
    """The first ``n`` items, in lists of ``chunk`` (the last shorter)."""
    out = []
    for item in items:
        if n <= 0:
            break
        out.append(item)
        n -= 1
        if len(out) == chunk:
            yield out
            out = []
    if out:
        yield out


def capped(content, prompt: int, max_prompt: int | None):
    """``content`` cut to a prompt that max_total_tokens clipped (its tail would otherwise stand for the reply)."""
    if content is not None and max_prompt is not None and prompt > max_prompt:
        return content.cut(max_prompt)
    return content

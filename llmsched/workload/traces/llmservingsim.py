"""LLMServingSim's workload JSONL (casys-kaist/LLMServingSim, docs/docs/workloads/jsonl-format.md), read as its
router loads it, with the checks it leaves out.

A flat line is one request: ``input_toks``, ``output_toks``, ``arrival_time_ns`` and optionally the prompt's token
ids ``input_tok_ids`` and the output's ``output_tok_ids``, which extend the same hash chain so that a later prompt
carrying them hits. An agentic line is a session: ``arrival_time_ns`` of its first call and ``sub_requests``, each
call arriving ``tool_duration_ns`` after the one before it finishes. A request without token ids has no content
(it shares nothing, as there).

Where LLMServingSim accepts silently, this refuses with the line: ids whose count is not the token count (there
they only change how much is hashed), ids outside the model's vocabulary, an empty ``sub_requests`` (skipped
there), a negative tool time (a turn going back in time), a ``session_id`` used twice (there the later session
overwrites the earlier one), lines out of arrival order (sorted there; a stream needs them sorted).
"""
from __future__ import annotations

import json
from array import array
from pathlib import Path

from llmsched.content import Content, Space, piece_id
from llmsched.workload.traces.jsonl import Columns, JsonlTrace, capped, chunked, in_order, integers, lines, \
    require, seconds, whole
from llmsched.workload.generators.sessions import Turn
from llmsched.workload.traces.trace_error import TraceError

FLAT = ("input_toks", "output_toks", "arrival_time_ns")
AGENTIC = ("arrival_time_ns", "sub_requests")
NS = 1e-9
MAX_CALLS = 1 << 16  # calls in one session; a call's reply id is its line's index * MAX_CALLS + its position


def is_llmservingsim(keys: set[str]) -> bool:
    return set(FLAT) <= keys or set(AGENTIC) <= keys


def read_llmservingsim(path: Path, zero_lengths: str = "error", vocab_size: int | None = None) -> JsonlTrace:
    """Every line checked; token ids and sessions' later calls are read again as the run goes."""
    columns = Columns(path, zero_lengths)
    sizes = array("l")  # per first request kept: its session's number of calls (1 for a flat line)
    sessions: dict[str, int] = {}
    before = 0.0
    for number, row in lines(path):
        t = seconds(path, number, "arrival_time_ns", require(path, number, row, "arrival_time_ns"), NS)
        in_order(path, number, "arrival_time_ns", t, before)
        before = t
        if "sub_requests" not in row:
            prompt, output = call(path, number, row, "", vocab_size)
            if columns.add(number, t, prompt, output, FLAT[:2]):
                sizes.append(1)
            continue
        subs = row["sub_requests"]
        if not isinstance(subs, list) or not subs:
            raise TraceError(f"{path}:{number}: sub_requests is {json.dumps(subs)[:40]}; a session needs a list of at "
                             f"least one request (LLMServingSim skips such a line): remove the line or add its "
                             f"requests")
        if len(subs) > MAX_CALLS:
            raise TraceError(f"{path}:{number}: sub_requests has {len(subs)} calls, more than {MAX_CALLS}; split the "
                             f"session")
        name = row.get("session_id")
        if name is not None:
            if name in sessions:
                raise TraceError(f"{path}:{number}: session_id {name!r} is used on line {sessions[name]} too; give "
                                 f"each session its own id")
            sessions[name] = number
        lengths = []
        for k, sub in enumerate(subs):
            where = f"sub_requests[{k}]."
            if not isinstance(sub, dict):
                raise TraceError(f"{path}:{number}: sub_requests[{k}] is {json.dumps(sub)[:40]}, not an object")
            prompt, output = call(path, number, sub, where, vocab_size)
            lengths.append((prompt, output))
            if not prompt or not output:
                raise TraceError(f"{path}:{number}: {where}{'input_toks' if not prompt else 'output_toks'} is 0; a "
                                 f"request needs at least one token (a session's call cannot be dropped): fix it")
            tool = sub.get("tool_duration_ns", 0)
            if isinstance(tool, (int, float)) and not isinstance(tool, bool) and tool < 0:
                raise TraceError(f"{path}:{number}: {where}tool_duration_ns is {tool}: the next call would arrive "
                                 f"before this one ends, a session going back in time; tool times are >= 0")
            seconds(path, number, f"{where}tool_duration_ns", tool, NS)
        columns.add(number, t, *lengths[0], FLAT[:2])
        sizes.append(len(subs))
    del sessions
    follow = FollowUps(path, columns.dropped, sizes) if any(x > 1 for x in sizes) else None

    def contents(n: int, chunk: int, max_prompt: int | None = None):
        return chunked(_contents(path, columns.dropped, max_prompt), n, chunk)

    return JsonlTrace.of(columns, "llmservingsim", contents, follow_ups=follow)


def call(path: Path, number: int, row: dict, where: str, vocab_size: int | None) -> tuple[int, int]:
    """One request's token counts, its token ids checked against them and the vocabulary."""
    prompt = whole(path, number, where + "input_toks", require(path, number, row, "input_toks"))
    output = whole(path, number, where + "output_toks", require(path, number, row, "output_toks"))
    for key, count in (("input_tok_ids", prompt), ("output_tok_ids", output)):
        if key not in row:
            continue
        ids = integers(path, number, where + key, row[key], "token ids are a list of integers >= 0")
        if len(ids) != count:
            raise TraceError(f"{path}:{number}: {where}{key} has {len(ids)} ids but {where}{key[:-8]}_toks is "
                             f"{count}; give one id per token")
        if vocab_size is not None:
            k = next((k for k, x in enumerate(ids) if x >= vocab_size), None)
            if k is not None:
                raise TraceError(f"{path}:{number}: {where}{key}[{k}] is {ids[k]}, outside the model's vocabulary "
                                 f"of {vocab_size} token ids; tokenize the trace with the run's model (or run the "
                                 f"model it was tokenized for, --model)")
    if "output_tok_ids" in row and "input_tok_ids" not in row:
        raise TraceError(f"{path}:{number}: {where}output_tok_ids without input_tok_ids; the output extends the "
                         f"prompt's token ids, so give both")
    return prompt, output


def content(row: dict, line: int, k: int) -> Content | None:
    """Call ``k`` of line ``line``'s content (its reply id unique in the run), None without token ids."""
    if not row.get("input_tok_ids"):  # none, or a zero-token prompt (counted as one token by zero_lengths='clamp')
        return None
    return Content.of_tokens(row["input_tok_ids"] + row.get("output_tok_ids", []),
                             piece_id(Space.REPLY, line * MAX_CALLS + k))


def _contents(path: Path, dropped: set[int], max_prompt: int | None):
    """Each first request's content (a flat line's, or a session's first call's)."""
    for line, (_, row) in enumerate(lines(path)):
        if line not in dropped:
            head = row["sub_requests"][0] if "sub_requests" in row else row
            yield capped(content(head, line, 0), max(1, int(head["input_toks"])), max_prompt)


class FollowUps:
    """The later calls of each session, read from the file a chunk of first requests at a time."""

    def __init__(self, path: Path, dropped: set[int], sizes: array):
        self.path, self.dropped, self.sizes = path, dropped, sizes

    def count(self, n: int) -> int:
        """Requests in all among the first ``n`` first requests and their sessions."""
        return sum(self.sizes[:n])

    def chunks(self, n: int, chunk: int, max_prompt: int | None = None):
        return chunked(self._sessions(max_prompt), n, chunk)

    def _sessions(self, max_prompt: int | None):
        for line, (_, row) in enumerate(lines(self.path)):
            if line not in self.dropped:
                subs = row.get("sub_requests")
                yield None if subs is None or len(subs) == 1 else _later_calls(subs, line, max_prompt)


def _later_calls(subs: list, line: int, max_prompt: int | None):
    for k in range(1, len(subs)):
        sub = subs[k]
        prompt, output = int(sub["input_toks"]), int(sub["output_toks"])
        cut = prompt if max_prompt is None else min(prompt, max_prompt)
        if max_prompt is not None:  # as Capped clips a first request: the prompt first, then the output
            output = min(output, max_prompt + 1 - cut)
        yield Turn(cut, output, capped(content(sub, line, k), prompt, max_prompt),
                   delay=subs[k - 1].get("tool_duration_ns", 0) * NS)

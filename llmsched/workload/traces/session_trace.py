"""llmsched's own JSONL trace: requests with shared prefixes and multi-turn sessions (docs/workloads.md).

One JSON object a line, in arrival order::

    {"arrival": 0.0, "prompt_len": 900, "output_len": 120, "prefix": [["system-a", 800]]}
    {"arrival": 0.4, "session": "u1", "prompt_len": 850, "output_len": 60, "prefix": [["system-a", 800]]}
    {"arrival": 9.1, "session": "u1", "turn": 1, "prompt_len": 1000, "output_len": 90}

``arrival`` (seconds), ``prompt_len`` and ``output_len`` are required. ``prefix`` lists the texts the prompt starts
with, as [id, tokens] pairs (an id is a string or an integer; the same id is the same text, a shorter piece its
beginning); the rest of the prompt is the request's own text. A ``session``'s later turns (``turn`` 1, 2, ...,
optional, checked when given) start with the conversation so far, the previous turn's prompt and its whole reply,
then the user's new text, so their ``prompt_len`` counts all of it; they arrive at their own ``arrival``, as
recorded (the trace is replayed, not re-timed).
"""
from __future__ import annotations

from pathlib import Path

from llmsched.content import MAX_NUMBER, Space, name_number, piece_id
from llmsched.workload.traces.jsonl import Columns, JsonlTrace, capped, chunked, in_order, lines, require, \
    seconds, whole
from llmsched.workload.generators.sessions import first_prompt, next_prompt
from llmsched.workload.traces.trace_error import TraceError

KEYS = ("arrival", "prompt_len", "output_len")
OPTIONAL = ("session", "turn", "prefix")
PREFIX_FIX = 'write prefix as [[ID, TOKENS], ...], e.g. [["system-a", 800]] (ID a string or an integer >= 0)'


def is_session_trace(keys: set[str]) -> bool:
    return set(KEYS) <= keys


def read_session_trace(path: Path, zero_lengths: str = "error", vocab_size: int | None = None) -> JsonlTrace:
    """Every line checked (sessions included: turns in order, each prompt holding the conversation so far)."""
    columns = Columns(path, zero_lengths)
    open_sessions: dict = {}  # session -> (turns so far, prompt_len, output_len, line, index) of its last turn
    before = 0.0
    for number, row in lines(path):
        unknown = sorted(set(row) - set(KEYS) - set(OPTIONAL))
        if unknown:
            raise TraceError(f"{path}:{number}: unknown key(s) {', '.join(unknown)}; a line has "
                             f"{', '.join(KEYS)} and optionally {', '.join(OPTIONAL)}")
        t = seconds(path, number, "arrival", require(path, number, row, "arrival"))
        in_order(path, number, "arrival", t, before)
        before = t
        prompt = whole(path, number, "prompt_len", require(path, number, row, "prompt_len"))
        output = whole(path, number, "output_len", require(path, number, row, "output_len"))
        pieces = prefix_pieces(path, number, row.get("prefix"))
        session = session_key(path, number, row.get("session"))
        index = columns.count
        if not columns.add(number, t, prompt, output, ("prompt_len", "output_len")):
            if session is not None:
                raise TraceError(f"{path}:{number}: a zero length in session {session!r}: a session's turn cannot "
                                 f"be dropped (its later turns carry it); fix the line")
            continue
        prompt, output = max(prompt, 1), max(output, 1)
        held = sum(length for _, length in pieces)
        if held > prompt:
            raise TraceError(f"{path}:{number}: prefix holds {held} tokens, a prefix longer than the prompt "
                             f"(prompt_len {prompt}); fix prompt_len or the prefix lengths")
        if session is None:
            if "turn" in row:
                raise TraceError(f"{path}:{number}: turn without session; give the session it belongs to")
            continue
        turns, *last = open_sessions.get(session, (0, 0, 0, 0, -1))
        if "turn" in row:
            turn = whole(path, number, "turn", row["turn"])
            if turn < turns:
                raise TraceError(f"{path}:{number}: session {session!r} turn {turn} comes after its turn "
                                 f"{turns - 1} (line {last[2]}): a session's turns go back in time; number them "
                                 f"0, 1, 2, ... in arrival order")
            if turn > turns:
                raise TraceError(f"{path}:{number}: session {session!r} turn {turn} follows turn {turns - 1}: turn "
                                 f"{turns} is missing" if turns else
                                 f"{path}:{number}: session {session!r} starts at turn {turn}: its turns count "
                                 f"from 0")
        if turns:
            if pieces:
                raise TraceError(f"{path}:{number}: prefix on turn {turns} of session {session!r}: a later turn's "
                                 f"prompt starts with the conversation so far; give prefix on its first turn")
            history = last[0] + last[1]
            if history > prompt:
                raise TraceError(f"{path}:{number}: session {session!r} turn {turns} has prompt_len {prompt}, less "
                                 f"than the conversation so far ({last[0]} prompt + {last[1]} reply tokens, line "
                                 f"{last[2]}), a prefix longer than the prompt: a later turn's prompt_len counts "
                                 f"the whole conversation")
        open_sessions[session] = (turns + 1, prompt, output, number, index)
    ends = bytearray(columns.count)  # 1 where a session's last turn is: its state is dropped there
    for *_, index in open_sessions.values():
        ends[index] = 1
    del open_sessions

    def contents(n: int, chunk: int, max_prompt: int | None = None):
        return chunked(_contents(path, columns.dropped, ends, max_prompt), n, chunk)

    return JsonlTrace.of(columns, "sessions", contents)


def session_key(path: Path, number: int, value):
    if value is None or isinstance(value, str) and value or isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TraceError(f"{path}:{number}: session is {value!r}; name a session by a non-empty string or an integer")


def prefix_pieces(path: Path, number: int, value) -> list[tuple[int, int]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise TraceError(f"{path}:{number}: prefix is {type(value).__name__}, not a list; {PREFIX_FIX}")
    out = []
    for k, item in enumerate(value):
        if not (isinstance(item, list) and len(item) == 2):
            raise TraceError(f"{path}:{number}: prefix[{k}] is {item!r}, not an [ID, TOKENS] pair; {PREFIX_FIX}")
        name, length = item
        if isinstance(name, str) and name:
            number_ = name_number(name)
        elif isinstance(name, int) and not isinstance(name, bool) and 0 <= name <= MAX_NUMBER:
            number_ = name
        else:
            raise TraceError(f"{path}:{number}: prefix[{k}] id is {name!r}; {PREFIX_FIX}")
        out.append((piece_id(Space.NAMED, number_), whole(path, number, f"prefix[{k}] tokens", length, low=1)))
    return out


def _contents(path: Path, dropped: set[int], ends: bytearray, max_prompt: int | None):
    state: dict = {}  # session -> (content, output_len) of its latest turn
    for index, (number, row) in enumerate(lines(path)):
        if index in dropped:
            continue
        prompt, output = max(1, int(row["prompt_len"])), max(1, int(row["output_len"]))
        session = row.get("session")
        before = state.get(session) if session is not None else None
        if before is None:
            content = first_prompt(index, prefix_pieces(path, number, row.get("prefix")), prompt)
        else:
            content = next_prompt(before[0], before[1], index, prompt)
        if session is not None:
            if ends[index]:
                state.pop(session, None)
            else:
                state[session] = (content, output)
        yield capped(content, prompt, max_prompt)

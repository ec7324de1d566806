"""A client that sent conversations: each later turn's prompt starts with its conversation so far, the turn before it
(prompt and reply), then the user's new text, as a chat client sends every earlier message with the next
(AIPerf's and GuideLLM 0.8's multi-turn runs, whose records name each turn's session and index; a requests.jsonl's
optional ``session`` and ``turn``). The replay gives each turn that prompt (``ServerLog.turn_content``), so its
prefix cache finds what vLLM's found: on a real AIPerf run (tests/data/cpu_aiperf_multiturn) every request's cached
tokens are vLLM's ``num_cached_tokens``, on a GuideLLM one (tests/data/cpu_guidellm_run) 23 of 24 (a reply whose
text lost a special token, which GuideLLM then sent one word short). A later turn is not sent before the turn it
follows has left (workload/held_turns.py)."""
from __future__ import annotations

import numpy as np

from .trace_error import TraceError

SESSION_FIX = "give both `session` (a string or an integer) and `turn` (0, 1, ... within it), or neither"


def turn_links(turns: list) -> np.ndarray | None:
    """Per request (``turns``: its (session, turn index) or None, in the log's order), the index of its session's
    turn before it (-1: none); None where no request is a later turn."""
    if not any(t is not None and t[1] > 0 for t in turns):
        return None
    index = {t: k for k, t in enumerate(turns) if t is not None}
    return np.array([index.get((t[0], t[1] - 1), -1) if t is not None and t[1] > 0 else -1 for t in turns],
                    np.int64)


def take_turns(log, turns: list, client: str) -> None:
    """``log`` (a ``ServerLog``) of requests sent as conversations (``turns`` in its order, ``turn_links``) links
    each later turn to the one before it, and says so; a log with no later turn is left as it is."""
    links = turn_links(turns)
    if links is None:
        return
    log.turns = links
    sessions = len({t[0] for t in turns if t is not None})
    log.notes.append(f"{sessions} conversation(s), {int((links >= 0).sum())} later turn(s): each starts with its "
                     f"conversation so far (the turn before it, prompt and reply), as {client} sends it")


def is_turn_index(value) -> bool:
    """Whether ``value`` is a turn's index in its conversation (0, 1, ...), as every client's record writes it."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def jsonl_turn(where: str, row: dict) -> tuple[str, int] | None:
    """A requests.jsonl line's optional ``session`` and ``turn``."""
    session, turn = row.get("session"), row.get("turn")
    if session is None and turn is None:
        return None
    if session is None or turn is None:
        raise TraceError(f"{where}: {'turn' if session is None else 'session'} without "
                         f"{'session' if session is None else 'turn'}; {SESSION_FIX}")
    if isinstance(session, bool) or not (isinstance(session, str) and session or isinstance(session, int)):
        raise TraceError(f"{where}: session is {session!r}; {SESSION_FIX}")
    if not is_turn_index(turn):
        raise TraceError(f"{where}: turn is {turn!r}; {SESSION_FIX}")
    return str(session), turn

"""Sessions: a user's requests one after another, each prompt carrying the conversation so far.

A turn's prompt is fixed by the workload, never by the run: the previous turn's prompt, its whole reply
(``output_len`` tokens, the reply's piece of the content) and the user's new text. So one seed gives the same
requests under every scheduler, and a turn whose predecessor was rejected is issued all the same (every request
that enters a run leaves it finished or rejected).
"""
from __future__ import annotations

from dataclasses import dataclass

from llmsched.content import Content, Space, piece_id
from llmsched.request import DEFAULT_TIER, Tier


@dataclass(frozen=True, slots=True)
class Turn:
    """A session's next request before it is issued: ``delay`` seconds after its predecessor leaves the run, and
    not before ``not_before`` (seconds of the run's clock)."""

    prompt_len: int
    output_len: int
    content: Content | None = None
    delay: float = 0.0
    not_before: float = 0.0
    tier: Tier = DEFAULT_TIER


TURN_BITS = 20  # turn t of session s has the text and reply numbers s * 2**20 + t


def turn_number(session: int, turn: int) -> int:
    """A number for turn ``turn`` of session ``session``'s texts, unique in a run."""
    return (session << TURN_BITS) | turn


def first_prompt(index: int, pieces, prompt_len: int) -> Content:
    """Request ``index``'s content: the shared ``pieces`` ((id, length) pairs), then its own text to
    ``prompt_len`` tokens."""
    own = prompt_len - sum(length for _, length in pieces)
    if own < 0:
        raise ValueError(f"request {index}: its prefix pieces hold {prompt_len - own} tokens, more than its "
                         f"prompt's {prompt_len}")
    tail = [(piece_id(Space.TEXT, index), own)] if own else []
    return Content.of_pieces([*pieces, *tail], piece_id(Space.REPLY, index))


def next_prompt(before: Content, before_output: int, index: int, prompt_len: int, pieces=()) -> Content:
    """Request ``index``'s content as the next turn after ``before`` (whose reply had ``before_output`` tokens):
    the conversation so far, ``pieces``, then its own text to ``prompt_len`` tokens."""
    history = before.length + before_output + sum(length for _, length in pieces)
    own = prompt_len - history
    if own < 0:
        raise ValueError(f"request {index}: the conversation so far holds {history} tokens, more than its "
                         f"prompt's {prompt_len}")
    tail = [(piece_id(Space.TEXT, index), own)] if own else []
    return before.then(before_output, [*pieces, *tail], piece_id(Space.REPLY, index))


"""Writing a step's tokens into a request (the token model of llmsched/request.py)."""
from __future__ import annotations

from ..request import Request


def advance_chunk(r: Request, n: int, now: float) -> int:
    """Write a prompt chunk of ``n`` tokens that ended at ``now`` into ``r``: its generated count when the chunk
    completed the prompt (the token it sampled included), else 0."""
    c = r.num_computed + n
    r.num_computed = c
    if c != r.prompt_len + r.num_generated:
        return 0
    g = r.num_generated = r.num_generated + 1
    if g == 1:
        r.first_token = now
    r.token_times.append(now)
    r.last_token = now
    return g

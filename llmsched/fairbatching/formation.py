"""Algorithm 1 of seed 002 (§3.3): fair batch formation under a time (or token) budget.

Tasks fall into three groups, each sorted by slack (ties by arrival, then id; spec G22):
urgent decodes (slack < B0 + min TPOT), then every prefill, then the other decodes. The
scan never stops at a task that does not fit, so a later, smaller task still can (Alg. 1
lines 36-48). A prefill that does not fit whole is chunked to what the budget leaves.
Resolutions of the printed algorithm (spec G5): line 45's precedence typo is read as
``time_budget -= b·cp + c·context``; ``cp`` is floored and a chunk needs ``cp ≥ 1``; only
prefills are chunked. ``context`` is the KV length after the step (k + q, spec G6); in
the default ``literal`` mode a chunk is charged the full prompt's context, in ``exact``
mode its own (``cp = (budget − c·k)/(b + c)``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


@dataclass(slots=True)
class Task:
    """A request's candidacy for the next step: ``q`` computable new tokens over ``k`` already computed."""

    req: object
    slack: float
    arrival: float
    id: int
    is_decode: bool
    q: int
    k: int
    tpot: float


def budget_and_groups(tasks: list[Task], min_slack_scope: str = "decode"):
    """(B0, min TPOT, urgent decodes, prefills, other decodes), each group in slack order (Alg. 1 lines 18-33).

    B0 = max(min slack, min TPOT): the min is over decodes (the paper's text, §3.2) with
    ``min_slack_scope="decode"``, falling back to all tasks when there is no decode (Alg. 1
    line 18 read literally); ``"all"`` always takes every task.
    """
    decodes = [t for t in tasks if t.is_decode]
    scope = decodes if (min_slack_scope == "decode" and decodes) else tasks
    min_slack = min(t.slack for t in scope)
    min_tpot = min(t.tpot for t in scope)
    b0 = max(min_slack, min_tpot)
    threshold = b0 + min_tpot
    key = _order
    urgent = sorted((t for t in decodes if t.slack < threshold), key=key)
    others = sorted((t for t in decodes if t.slack >= threshold), key=key)
    prefills = sorted((t for t in tasks if not t.is_decode), key=key)
    return b0, min_tpot, urgent, prefills, others


def _order(t: Task):
    return (t.slack, t.arrival, t.id)


def form_batch(ordered: list[Task], time_budget: float, token_budget: int, b: float, c: float,
               chunk_context: str = "literal", accept: Callable[[Task, int], bool] | None = None
               ) -> list[tuple[Task, int]]:
    """Scan ``ordered`` (Alg. 1 lines 36-48) and return ``(task, tokens)`` pairs.

    ``time_budget`` is what the step may spend beyond the fixed cost ``a`` (``inf`` for a
    pure token budget); ``b``/``c`` the predictor's per-token and per-context costs.
    ``accept(task, n)`` is the caller's last word (KV blocks, sequence slots); it books
    what it accepts.
    """
    batch = []
    for t in ordered:
        q = t.q
        kappa = t.k + q
        cost = b * q + c * kappa
        if cost <= time_budget and q <= token_budget:
            if accept is None or accept(t, q):
                batch.append((t, q))
                time_budget -= cost
                token_budget -= q
            continue
        if t.is_decode or token_budget <= 0:
            continue
        if chunk_context == "exact":
            charge_k = t.k
            room = (time_budget - c * t.k) / (b + c) if math.isfinite(time_budget) else math.inf
        else:
            charge_k = kappa
            if c * kappa > time_budget:
                continue
            room = (time_budget - c * kappa) / b if math.isfinite(time_budget) else math.inf
        cp = token_budget if room >= token_budget else int(room + 1e-9)  # floor, forgiving rounding
        if cp >= 1 and (accept is None or accept(t, cp)):
            batch.append((t, cp))
            time_budget -= b * cp + c * (charge_k + cp if chunk_context == "exact" else charge_k)
            token_budget -= cp
    return batch

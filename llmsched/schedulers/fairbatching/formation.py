"""Algorithm 1 of Lyu et al. (Lyu et al. §3.3): fair batch formation under a time (or token) budget.

Tasks fall into three groups, each sorted by slack (ties by arrival, then id: the paper does not say):
urgent decodes (slack < B0 + min TPOT), then every prefill, then the other decodes. The
scan never stops at a task that does not fit, so a later, smaller task still can (Alg. 1
lines 36-48). A prefill that does not fit whole is chunked to what the budget leaves.
Resolutions of the printed algorithm (a gap in the paper; our resolution): line 45's precedence typo is read as
``time_budget -= b·cp + c·context``; ``cp`` is floored and a chunk needs ``cp ≥ 1``; only
prefills are chunked. ``context`` is the KV length after the step (k + q, a gap in the paper; our resolution); in
the default ``literal`` mode a chunk is charged the full prompt's context, in ``exact``
mode its own (``cp = (budget − c·k)/(b + c)``).

Checked line by line against the paper; where this code and Lyu et al. differ, and why:

* lines 13-17 (envelope, slack): identical; ``Task.slack`` is ``arrival + TTFT + j·TPOT − now`` with j the
  next output index (token 0 = the first token).
* lines 18-20 (B0): Alg. 1 takes min slack and min TPOT over *all* active requests, §3.2's text over
  *decode* requests. Default: decodes (the text; a prefill's slack is its TTFT margin, which would shrink
  B0 to that margin whenever a prompt waits and turn the time budget into a per-prompt deadline), all
  tasks when there is no decode; ``min_slack_scope="all"`` is line 18 literally.
* line 25 (urgency): identical, ``slack < B0 + min TPOT``, decodes only.
* line 33 (order): identical, ties (not specified) by arrival then id.
* lines 36-48 (scan): identical order and no early exit. §3.3's text says urgent decodes are "always
  included"; Alg. 1 admits them only while the budget lasts. They are scanned first, so they are left out
  only when the urgent decodes alone exceed ``B0 − a``; the scheduler's ``force_urgent_decodes`` adds them
  anyway (the text), off by default (the algorithm).
* line 42-45 (chunking): Alg. 1 would also "chunk" a decode; with one token that is a no-op (cp < 1), so
  only prefills are chunked. Line 45's sign typo is fixed, cp is floored.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from operator import attrgetter
from typing import Callable

from ...batchtime.base import Batch


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
    prefills = [t for t in tasks if not t.is_decode] if len(decodes) < len(tasks) else []
    scope = decodes if (min_slack_scope == "decode" and decodes) else tasks
    min_slack = min(map(SLACK, scope))
    min_tpot = min(map(TPOT, scope))
    b0 = max(min_slack, min_tpot)
    threshold = b0 + min_tpot
    in_order(decodes)
    cut = bisect_left(decodes, threshold, key=SLACK)  # slacks ascend: the urgent ones (slack < threshold) lead
    in_order(prefills)
    return b0, min_tpot, decodes[:cut], prefills, decodes[cut:]


def in_order(tasks: list[Task]) -> None:
    """Sort ``tasks`` in place by (slack, arrival, id); by slack alone when no two slacks are equal (the same
    order, without building a key tuple per task)."""
    if len(set(map(SLACK, tasks))) == len(tasks):
        tasks.sort(key=SLACK)
    else:
        tasks.sort(key=ORDER)


SLACK = attrgetter("slack")
TPOT = attrgetter("tpot")
ORDER = attrgetter("slack", "arrival", "id")  # slack order, ties by arrival then id (a gap in the paper; our resolution)


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


def form_batch_exact(ordered: list[Task], time_budget: float, token_budget: int, step_time: Callable,
                     accept: Callable[[Task, int], bool] | None = None) -> list[tuple[Task, int]]:
    """Algorithm 1's scan with a perfect predictor: the step's *whole* predicted time ``step_time(Batch)`` must
    stay within ``time_budget`` (B0, the fixed cost included), and a prefill that does not fit whole gets the
    largest chunk that does (bisection). An oracle for the ablation: it shows what FairBatching
    would gain if its step-time prediction had no error; ``step_time`` is the replica's own batch-time model.
    """
    batch: list[tuple[Task, int]] = []
    pn, pc, dc = [], [], []

    def time_with(t: Task, n: int) -> float:
        if t.is_decode:
            return step_time(Batch(pn, pc, dc + [t.k + 1]))
        return step_time(Batch(pn + [n], pc + [t.k], dc))

    for t in ordered:
        q = t.q
        if q <= token_budget and time_with(t, q) <= time_budget:
            n = q
        elif t.is_decode or token_budget <= 0 or time_with(t, 1) > time_budget:
            continue
        else:
            lo, hi = 1, min(q, token_budget)  # lo fits; find the largest chunk that does
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if time_with(t, mid) <= time_budget:
                    lo = mid
                else:
                    hi = mid - 1
            n = lo
        if accept is not None and not accept(t, n):
            continue
        batch.append((t, n))
        token_budget -= n
        if t.is_decode:
            dc.append(t.k + 1)
        else:
            pn.append(n)
            pc.append(t.k)
    return batch

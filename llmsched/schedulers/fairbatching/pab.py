"""Prefill Admission Budget (Lyu et al. §3.4 and Appendix A).

PAB = the extra prefill tokens a node can finish within one TTFT window without breaking
the SLOs of what it already holds, by a worst-case relaxation: every decode is assumed
deferred until its slack runs out, after which it needs one step per TPOT window.

    PAB = [TTFT − N·a − Σ_i N_i·(b + c·ctx_i)] / (b + c) − Σ_{prefills} prompt_i
    N = (TTFT − min_i s_i)/TPOT + 1,  N_i = max(0, (TTFT − s_i)/TPOT)

over DUP, every unfinished request on the node (waiting ones included; the paper leaves it open). TTFT and
TPOT are the node's global targets (a gap in the paper; our resolution). Resolutions (a gap in the paper; our resolution): N and N_i stay
continuous (N clamped to ≥ 1 step, N_i to ≥ 0), ``ctx_i`` is prompt + generated tokens
for a decode and the prompt for a prefill, queued prefills count only their uncomputed
tokens (``remaining_only=False`` counts whole prompts, as the paper writes), and PAB may
be negative.

Against Appendix A, line by line: N uses the minimum slack over decodes *and* prefills (DUP, as A.7 writes,
though A.2's text says the most urgent decode); N_i is clamped at 0 because A.3 counts only requests with
TTFT > slack_i (the printed sum would credit budget for requests far ahead of their envelope); the prefill
term charges b + c per token (A.5's approximation, kept). The router (§3.4) "selects a suitable node with
sufficient budget" without saying which: ``pab`` takes the most budget, ``pab-first-fit`` / ``pab-best-fit``
the alternatives; the paper's reports arrive "in the next batch", ``report_delay`` models that lag.
"""
from __future__ import annotations

from typing import Iterable

from ...request import Request


def pab_from_slacks(slacks: Iterable[float], contexts: Iterable[int], queued_prefill: int, ttft: float, tpot: float,
                    a: float, b: float, c: float) -> float:
    """The closed form on plain numbers: one slack and one context per unfinished request."""
    slacks = list(slacks)
    contexts = list(contexts)
    if len(slacks) != len(contexts):
        raise ValueError("pab: give one context per slack")
    if not slacks:
        return (ttft - a) / (b + c)
    n_batches = max(0.0, (ttft - min(slacks)) / tpot) + 1
    tasks = sum(max(0.0, (ttft - s) / tpot) * (b + c * ctx) for s, ctx in zip(slacks, contexts))
    return (ttft - n_batches * a - tasks) / (b + c) - queued_prefill


def compute_pab(requests: Iterable[Request], now: float, ttft: float, tpot: float, a: float, b: float, c: float,
                remaining_only: bool = True) -> float:
    """PAB of a node holding ``requests`` (all unfinished: waiting, running, swapped) at time ``now``."""
    slacks, contexts = [], []
    queued = 0
    for r in requests:
        slacks.append(r.arrival + ttft + tpot * r.num_generated - now)
        if r.num_generated:
            contexts.append(r.prompt_len + r.num_generated)
        else:
            contexts.append(r.prompt_len)
            queued += r.prompt_len - r.num_computed if remaining_only else r.prompt_len
    return pab_from_slacks(slacks, contexts, queued, ttft, tpot, a, b, c)


def node_requests(view) -> list[Request]:
    """Every unfinished request a replica holds."""
    return [*view.waiting, *view.running, *view.swapped]

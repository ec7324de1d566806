"""Service each tenant received and how fairly: VTC's service measure, backlogged periods and Jain's index.

Service follows the VTC paper (Sheng et al., OSDI 2024): ``INPUT_WEIGHT`` per prompt token served and
``OUTPUT_WEIGHT`` per output token (as OpenAI prices them, 1 and 2), divided by the tenant's weight when tenants are
compared. From the request records: a request's prompt tokens are counted when its first token appears (the step
that finished its prefill), each output token when it appears; recomputation after a preemption is not service.

A tenant is **backlogged** while one of its requests has arrived and not yet been scheduled (VTC's queue): from its
arrival to its first scheduled step (or to its end, if it never ran). Jain's index J = (Σx)² / (n·Σx²) is 1 when
the n tenants received equal weighted service and 1/n when one took it all.
"""
from __future__ import annotations

import math

import numpy as np

INPUT_WEIGHT = 1.0
OUTPUT_WEIGHT = 2.0
SERIES_BINS = 100  # service over time: the window cut into this many equal bins


def jain(values) -> float:
    """Jain's fairness index of ``values`` (NaN for none, when all are 0, or when one is not finite). The index does
    not change when every value is scaled by one factor: values whose squares would overflow (a weighted service
    of 1e160) are divided by the largest first."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) and not np.isfinite(x).all():
        return math.nan
    if len(x) and float(np.abs(x).max()) > 1e150:
        x = x / float(np.abs(x).max())
    square = float((x * x).sum())
    if not len(x) or square == 0:
        return math.nan
    return float(x.sum()) ** 2 / (len(x) * square)


def union(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The disjoint, sorted intervals covering every [start, end) with end > start, as rows (start, end)."""
    keep = ends > starts
    s, e = starts[keep], ends[keep]
    if not len(s):
        return np.zeros((0, 2))
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > e[:-1]  # an interval starting after every earlier one ended opens a new run
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(s) - 1]
    return np.column_stack([s[first], e[last]])


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The intersection of two sets of disjoint sorted intervals."""
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i, 0], b[j, 0]), min(a[i, 1], b[j, 1])
        if hi > lo:
            out.append((lo, hi))
        if a[i, 1] < b[j, 1]:
            i += 1
        else:
            j += 1
    return np.array(out, dtype=np.float64).reshape(-1, 2)


def inside(times: np.ndarray, intervals: np.ndarray) -> np.ndarray:
    """Which ``times`` fall in one of the disjoint sorted ``intervals`` (start included, end excluded)."""
    if not len(intervals):
        return np.zeros(len(times), dtype=bool)
    k = np.searchsorted(intervals[:, 0], times, side="right") - 1
    return (k >= 0) & (times < intervals[np.maximum(k, 0), 1])


def backlogged(arrival: np.ndarray, first_scheduled: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The periods in which some of these requests waited to be scheduled (never scheduled: until its end)."""
    until = np.where(np.isfinite(first_scheduled), first_scheduled, end)
    return union(arrival, until)


def service_events(prompt: np.ndarray, generated: np.ndarray, first_token: np.ndarray, gaps: np.ndarray | None,
                   num_gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(times, amounts) of the service these requests received: prompt and first token at the first token, each
    later token at its time (rebuilt from the inter-token gaps; without them, every token at the first token).

    A gap is one token's where the client sees each token (one gap per token after the first); with vLLM's
    ``stream_interval`` k a gap is a chunk's (metrics/client_side.py), and a request's tokens after the first are
    spread evenly over its chunks: the service counts every token served, not one per chunk."""
    served = np.isfinite(first_token) & (generated > 0)
    first = first_token[served]
    if gaps is None:
        return first, INPUT_WEIGHT * prompt[served] + OUTPUT_WEIGHT * generated[served]
    counts = num_gaps[served]
    if len(gaps) != int(counts.sum()):
        raise ValueError(f"service_events: {len(gaps)} gaps for requests that have {int(counts.sum())}")
    starts = np.cumsum(counts) - counts
    cum = np.cumsum(gaps)
    before = np.where(starts > 0, cum[np.maximum(starts - 1, 0)] if len(cum) else 0.0, 0.0)
    later = np.repeat(first, counts) + cum - np.repeat(before, counts)  # each request's own running sum of gaps
    rest = generated[served] - 1
    per_gap = OUTPUT_WEIGHT * np.repeat(np.divide(rest, counts, out=np.zeros(len(rest)), where=counts > 0), counts)
    first_amount = INPUT_WEIGHT * prompt[served] + OUTPUT_WEIGHT + OUTPUT_WEIGHT * np.where(counts > 0, 0, rest)
    return np.concatenate([first, later]), np.concatenate([first_amount, per_gap])

"""Is the deployment keeping up? A verdict from the *trend* of outstanding work over the measurement window.

Outstanding work W(t) is the tokens (prompt + output) of every request that has arrived and not yet been
served by time t; a rejected request's tokens stay outstanding (work the deployment did not do), so refusing
work cannot pass for keeping up. W is averaged over ``BATCHES`` equal slices of the window (batch means,
which tame the autocorrelation of a queue), and a least-squares line through those means gives the growth
rate dW/dt, its standard error, and ``growth`` = dW/dt divided by the rate at which work arrives.

* ``stable``: no growth that is both significant (t < ``T_SIGNIFICANT``) and material (growth < ``GROWTH_MIN``,
  5% of arriving work). The 5% is the verdict's resolution, set from measurement: stable queues (Llama-3-8B on
  an A100, ShareGPT lengths, Sarathi at 50-95% of its saturated throughput, 480 s windows, three seeds each)
  drift by up to 3% of arriving work over one window, often with t > 3, because batch means of a queue with
  long requests stay correlated. A finite window cannot tell slower growth from that drift.
* ``backlogged``: significant growth of 5% to 15% (``GROWTH_OVERLOAD``): at or just past the limit.
* ``overloaded``: work piles up at 15% or more of the rate it arrives.

The final value alone would not do: a stable queue can end high by chance, and a starving scheduler can end a
run with a short queue of long prompts while its backlog of tokens grows throughout.
"""
from __future__ import annotations

import math

import numpy as np

BATCHES = 10
SAMPLES_PER_BATCH = 20
T_SIGNIFICANT = 3.0
GROWTH_MIN = 0.05
GROWTH_OVERLOAD = 0.15
VERDICTS = ("stable", "backlogged", "overloaded")


def outstanding(times: np.ndarray, arrival: np.ndarray, leave: np.ndarray, work: np.ndarray) -> np.ndarray:
    """W(t) at each of ``times``: work of requests with arrival <= t < leave (leave = inf: never served)."""
    a_order = np.argsort(arrival, kind="stable")
    l_order = np.argsort(leave, kind="stable")
    a_cum = np.r_[0.0, np.cumsum(work[a_order])]
    l_cum = np.r_[0.0, np.cumsum(work[l_order])]
    arrived = a_cum[np.searchsorted(arrival[a_order], times, side="right")]
    left = l_cum[np.searchsorted(leave[l_order], times, side="right")]
    return arrived - left


def trend(arrival: np.ndarray, leave: np.ndarray, work: np.ndarray, start: float, end: float) -> dict:
    """The verdict and its evidence for the window [start, end] (seconds)."""
    if not end > start:
        raise ValueError(f"stability: the measurement window [{start:g}, {end:g}] s is empty; offer more requests")
    n = BATCHES * SAMPLES_PER_BATCH
    times = start + (np.arange(n) + 0.5) * (end - start) / n
    w = outstanding(times, arrival, leave, work)
    means = w.reshape(BATCHES, SAMPLES_PER_BATCH).mean(axis=1)
    mids = times.reshape(BATCHES, SAMPLES_PER_BATCH).mean(axis=1)
    x = mids - mids.mean()
    slope = float((x * (means - means.mean())).sum() / (x * x).sum())
    resid = means - means.mean() - slope * x
    se = float(math.sqrt((resid * resid).sum() / (BATCHES - 2) / (x * x).sum()))
    t = slope / se if se > 0 else (math.inf if slope > 0 else 0.0)
    arriving = (arrival >= start) & (arrival <= end)
    work_rate = float(work[arriving].sum()) / (end - start)
    growth = slope / work_rate if work_rate > 0 else 0.0
    if t < T_SIGNIFICANT or growth < GROWTH_MIN:
        verdict = "stable"
    elif growth < GROWTH_OVERLOAD:
        verdict = "backlogged"
    else:
        verdict = "overloaded"
    return {"verdict": verdict, "growth": growth, "slope_tokens_per_s": slope, "t_stat": t,
            "work_rate_tokens_per_s": work_rate, "outstanding_start": float(means[0]),
            "outstanding_end": float(means[-1]), "outstanding_mean": float(w.mean())}


def worst(verdicts) -> str:
    return max(verdicts, key=VERDICTS.index)

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

The trend alone misses growth in a short, bursty window: clumped arrivals keep t under 3 however fast the queue
fills (300 requests of the Azure code trace at 64 req/s on Mistral-7B TP2/B200 under vtc: t = -1.5, yet 60% of
the window's work finished in it). So the verdict also asks that the work the window's arrivals bring be
*admitted* (its request first scheduled) within the window: ``admitted_share`` at least ``1 - GROWTH_MIN`` (95%),
the same 5% resolution as the trend, and the share of its offered work that the sound throughput bound takes a
stable probe to serve (sound_bound.py, ``SERVED_FRACTION``); below ``1 - GROWTH_OVERLOAD`` (85%) the probe is
overloaded, between the two backlogged. Admission rather than completion: a request in service at the window's
end is not backlog, and counting completions would charge every short window the work in flight at its end
(the same probe at 16 req/s finished 88% of its window's work in it and admitted 100%: it keeps up). The verdict
is the worse of the two.
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


def trend(arrival: np.ndarray, leave: np.ndarray, work: np.ndarray, start: float, end: float,
          admitted: np.ndarray | None = None) -> dict:
    """The verdict and its evidence for the window [start, end] (seconds); ``admitted``: each request's first
    scheduling time (NaN or inf: never), for the admitted share (module docstring); None: the trend alone."""
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
    out = {"verdict": verdict, "growth": growth, "slope_tokens_per_s": slope, "t_stat": t,
           "work_rate_tokens_per_s": work_rate, "outstanding_start": float(means[0]),
           "outstanding_end": float(means[-1]), "outstanding_mean": float(w.mean())}
    if admitted is not None:
        arrived = float(work[arriving].sum())
        began = (admitted >= start) & (admitted <= end)  # NaN and inf compare False: never admitted
        share = float(work[began].sum()) / arrived if arrived > 0 else 1.0
        out["admitted_share"] = share
        out["verdict"] = worst((verdict, share_verdict(share)))
    return out


def share_verdict(share: float) -> str:
    """The verdict of an admitted share alone: the trend's thresholds as shares of the arriving work."""
    if share >= 1 - GROWTH_MIN:
        return "stable"
    return "backlogged" if share >= 1 - GROWTH_OVERLOAD else "overloaded"


def worst(verdicts) -> str:
    return max(verdicts, key=VERDICTS.index)

"""Throughput ρ(K) of the departure-threshold policy and the optimal threshold K* (Mohanty et al. §3).

* :func:`exact_throughput` — Theorem 1 with Lemma 2: ρ(K) = E D / (c_p + c_d·E N_1 + (t_d/α + s_p)·E D), from
  the exact per-cycle means of :mod:`.renewal`.
* :func:`prop1_throughput` — Proposition 1: E D ≈ K and E N_1 ≈ ln(1 − K/C)/ln(1 − α). Poor at small K (about
  14% low at K = 1 with the constants back-solved from Table 1) and undefined at K = C (returned as NaN).
* :func:`optimal_K` — argmax of the exact form over K ∈ 1..C (the exact form is the
  predictor, Prop. 1 is kept for comparison with the paper's "Num" column).
"""
from __future__ import annotations

import numpy as np

from .renewal import CycleStats, check_batch, cycle_stats, prop1_iterations
from .timing_constants import Timing


def exact_throughput(C: int, alpha: float, timing: Timing, stats: CycleStats | None = None) -> np.ndarray:
    """ρ(K) in prompts/s for K = 0..C (index K; entry 0 is NaN)."""
    C, alpha = check_batch(C, alpha)
    stats = stats or cycle_stats(C, alpha)
    D, N = stats.departures, stats.iterations
    return D / (timing.c_p + timing.c_d * N + (timing.t_d / alpha + timing.s_p) * D)


def prop1_throughput(C: int, alpha: float, timing: Timing) -> np.ndarray:
    """Proposition 1's approximation of ρ(K) for K = 0..C (entries 0 and C are NaN)."""
    C, alpha = check_batch(C, alpha)
    K = np.arange(C + 1, dtype=float)
    n = prop1_iterations(C, K[1:C], alpha)
    rho = np.full(C + 1, np.nan)
    rho[1:C] = 1.0 / ((timing.c_p + timing.c_d * n) / K[1:C] + timing.t_d / alpha + timing.s_p)
    return rho


def optimal_K(rho: np.ndarray) -> int:
    """The smallest K with the largest finite ρ(K)."""
    values = np.where(np.isfinite(rho), rho, -np.inf)
    return int(np.argmax(values))


def r_interval(C: int, alpha: float, K: int, prop1: bool = False, r_max: float = 1e3) -> tuple[float, float]:
    """The interval of r = c_p/c_d for which K is the argmax (K* depends only on r, C and α).
    Found by bisection on r; K* is non-decreasing in r."""
    C, alpha = check_batch(C, alpha)
    stats = None if prop1 else cycle_stats(C, alpha)

    def argmax(r: float) -> int:
        t = Timing(c_p=r, s_p=0.0, c_d=1.0, t_d=0.0)
        return optimal_K(prop1_throughput(C, alpha, t) if prop1 else exact_throughput(C, alpha, t, stats))

    def edge(target: int) -> float:  # smallest r with argmax >= target
        lo, hi = 0.0, r_max
        if argmax(hi) < target:
            return float("inf")
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if argmax(mid) < target else (lo, mid)
        return hi

    return edge(K), edge(K + 1)

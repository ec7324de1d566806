"""Exact renewal-reward throughput of the departure-threshold policy (Mohanty et al. §3: Lemma 1, Lemma 2,
Theorem 1).

After a refill the batch holds C prompts, and by memorylessness each one leaves at every decode iteration with
probability α, so the resident count is the Markov chain X_j ~ Binomial(X_{j-1}, 1 − α) (Lemma 1), stopped the
first time X ≤ C − K. For every threshold K at once this module computes, by first-step analysis on that
absorbing chain:

* ``iterations[K]``  E N_1, decode iterations per cycle;
* ``departures[K]``  E[C − X_{S_1}], prompts that leave per cycle (≥ K: several may leave in one iteration);
* ``decode_time[K]`` E Σ_{j<N_1} τ(X_j), the decode-phase length for any per-iteration time τ(x).

With τ(x) = c_d + t_d·x the decode time is c_d·E N_1 + (t_d/α)·E[C − X_S] (Lemma 2), and Theorem 1 is
ρ(K) = E D / (c_p + s_p·E D + decode_time). The recursion runs over x ascending and, for each x, over every K in
one matrix-vector product, so the whole curve costs O(C³) flops (about 0.1 s at C = 410).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def check_batch(C, alpha) -> tuple[int, float]:
    if isinstance(C, bool) or not isinstance(C, (int, np.integer)) or C < 1:
        raise ValueError(f"batch size C must be an integer >= 1, got {C!r}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise ValueError(f"alpha (per-iteration departure probability, 1/mean output) must be in (0, 1), "
                         f"got {alpha!r}")
    return int(C), float(alpha)


def binomial_matrix(C: int, alpha: float) -> np.ndarray:
    """B[x, y] = P(y of x resident prompts survive one iteration) = Binom(y; x, 1 − α), 0 ≤ y ≤ x ≤ C."""
    lf = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, C + 1)))))
    x = np.arange(C + 1)[:, None]
    y = np.arange(C + 1)[None, :]
    valid = y <= x
    k = np.where(valid, x - y, 0)
    log_b = lf[x] - lf[np.where(valid, y, 0)] - lf[k] + y * math.log1p(-alpha) + k * math.log(alpha)
    return np.where(valid, np.exp(np.where(valid, log_b, 0.0)), 0.0)


@dataclass(frozen=True)
class CycleStats:
    """Per-cycle means for thresholds K = 0..C (index K; entry 0 unused, NaN)."""

    C: int
    alpha: float
    iterations: np.ndarray
    departures: np.ndarray
    decode_time: np.ndarray | None  # only when a τ was given

    def at(self, K: int) -> tuple[float, float]:
        return float(self.iterations[K]), float(self.departures[K])


def cycle_stats(C: int, alpha: float, tau=None) -> CycleStats:
    """E N_1, E[C − X_{S_1}] and (with ``tau``, a length-C+1 array of per-iteration times τ(x)) the expected
    decode time of a cycle, for every K in 1..C."""
    C, alpha = check_batch(C, alpha)
    B = binomial_matrix(C, alpha)
    ys = np.arange(C + 1)
    below = np.cumsum(B * ys[None, :], axis=1)       # below[x, t] = Σ_{y ≤ t} y·B[x, y]
    Ks = np.arange(C + 1)
    H = np.zeros((C + 1, C + 1))                      # H[K, x] = E N from x (x transient for K), else 0
    M = np.zeros((C + 1, C + 1))                      # M[K, x] = E X at absorption from x
    G = np.zeros((C + 1, C + 1)) if tau is not None else None
    if tau is not None:
        tau = np.asarray(tau, dtype=float)
        if tau.shape != (C + 1,) or not np.all(np.isfinite(tau)) or np.any(tau < 0):
            raise ValueError(f"tau must be C + 1 = {C + 1} finite per-iteration times >= 0 (index = batch size)")
    for x in range(1, C + 1):
        live = Ks > C - x                              # thresholds for which x is transient
        row = B[x].copy()
        row[x] = 0.0
        stay = 1.0 - B[x, x]
        H[live, x] = (1.0 + H[live] @ row) / stay
        M[live, x] = (below[x, C - Ks[live]] + M[live] @ row) / stay
        if G is not None:
            G[live, x] = (tau[x] + G[live] @ row) / stay
    iterations = H[:, C].copy()
    departures = C - M[:, C]
    iterations[0] = departures[0] = np.nan
    decode = None
    if G is not None:
        decode = G[:, C].copy()
        decode[0] = np.nan
    return CycleStats(C, alpha, iterations, departures, decode)


def check_K(K, C: int) -> int:
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or not 1 <= K <= C:
        raise ValueError(f"departure threshold K must be an integer in 1..C = 1..{C}, got {K!r}")
    return int(K)


def prop1_iterations(C: int, K, alpha: float) -> np.ndarray:
    """Proposition 1's mean-field n(K) = ln(1 − K/C)/ln(1 − α); undefined (inf) at K = C."""
    K = np.asarray(K, dtype=float)
    with np.errstate(divide="ignore"):
        return np.log1p(-K / C) / math.log1p(-alpha)

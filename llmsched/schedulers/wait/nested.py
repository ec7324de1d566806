"""Nested WAIT's segments, thresholds and safety buffer (Ao et al. §5, eqs. 12–14 and 20).

Decode lengths sorted l'_1 < … < l'_m cut the stages into segments: segment 1 is stages 0..l'_1 (the prefill
and the first l'_1 decodes), segment s ≥ 2 is stages l'_{s−1}+1..l'_s. Segment s sees the arrival rate
Λ_s = Σ_{j≥s} λ_j; a prompt that survives segment s−1 continues into s with probability p_s = Λ_s/Λ_{s−1}.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .fluid_model import PromptType, check_iteration_time


@dataclass(frozen=True)
class Segment:
    first: int      # first stage (0 for segment 1)
    last: int       # last stage (= its decode length l'_s)
    rate: float     # Λ_s
    survive: float  # p_s (1 for segment 1)

    @property
    def stages(self) -> int:
        return self.last - self.first + 1


def segments(types: list[PromptType]) -> list[Segment]:
    """One segment per distinct decode length, in increasing order (rates of equal lengths add)."""
    by_len: dict[int, float] = {}
    for t in types:
        by_len[t.decode] = by_len.get(t.decode, 0.0) + t.rate
    lengths = sorted(by_len)
    out, prev_last, prev_rate = [], -1, None
    for i, lp in enumerate(lengths):
        rate = sum(by_len[x] for x in lengths[i:])
        out.append(Segment(prev_last + 1, lp, rate, 1.0 if prev_rate is None else rate / prev_rate))
        prev_last, prev_rate = lp, rate
    return out


def segment_memory(prompt: float, segs: list[Segment], n: list[int]) -> float:
    """M(n), eq. (13) as an exact sum: n_s prompts at every stage k of segment s, l + k tokens each."""
    return sum(ns * s.stages * (prompt + (s.first + s.last) / 2) for ns, s in zip(n, segs))


def nested_thresholds(segs: list[Segment], batch_cap: int) -> list[int]:
    """The experiments' rule: n_s ∝ Λ_s scaled so Σ n_s·(stages of s) ≈ B; n_s = ⌈B·Λ_s / Σ c̃ Λ⌉."""
    if batch_cap < 1:
        raise ValueError(f"batch cap B must be >= 1 prompts, got {batch_cap}")
    total = sum(s.stages * s.rate for s in segs)
    return [max(1, math.ceil(batch_cap * s.rate / total - 1e-9)) for s in segs]


def _solve(f, hi: float) -> float:
    """The root of f on (0, hi] where f < 0 just above 0 and f(hi) > 0 (bisection to machine precision)."""
    lo = 0.0
    while f(hi) <= 0:
        lo, hi = hi, hi * 2
        if hi > 1e6:
            raise ValueError("θ* search diverged")
    for _ in range(200):
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        if f(mid) > 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def theta_star_poisson(rho: float, n: int) -> float:
    """θ* > 0 with E exp(θ(Poisson(ρ) − n)) = 1, i.e. ρ(e^θ − 1) = nθ (eq. 20); needs ρ < n."""
    if not 0 < rho < n:
        raise ValueError(f"θ* needs a negative drift 0 < ρ < n, got ρ={rho:g}, n={n}")
    return _solve(lambda th: rho * math.expm1(th) - n * th, 1.0)


def theta_star_binomial(N: int, p: float, n: int) -> float:
    """θ* > 0 with E exp(θ(Binomial(N, p) − n)) = 1, i.e. N log(1 − p + p e^θ) = nθ (eq. 20); needs Np < n < N."""
    if not (0 < p <= 1 and N * p < n < N):
        raise ValueError(f"θ* needs N·p < n < N (a negative drift that can still be exceeded), got N={N}, p={p:g}, "
                         f"n={n}")
    return _solve(lambda th: N * math.log1p(p * math.expm1(th)) - n * th, 1.0)


def memory_requirement(prompt: float, segs: list[Segment], n: list[int], d0: float, d1: float,
                       horizon: float, delta: float) -> dict:
    """Eq. (14): M(n) plus the boundary-queue buffer Σ_{s≥2} (l + l'_{s−1})·(n_s + log(m b/δ)/θ*_s), with
    b = horizon/d0 iterations. Also reports whether (12) holds (strict negative drift)."""
    check_iteration_time(d0, d1)
    if not 0 < delta < 1:
        raise ValueError(f"overflow probability δ must be in (0, 1), got {delta}")
    if horizon <= 0:
        raise ValueError(f"horizon must be > 0 seconds, got {horizon}")
    m = len(segs)
    b = max(horizon / d0, 1.0)
    peak = segment_memory(prompt, segs, n)
    T = d0 + d1 * peak
    drift_ok = [segs[0].rate * T < n[0]] + [s.survive * n[i] < n[i + 1] for i, s in enumerate(segs[1:])]
    thetas, buffer = [], 0.0
    for i in range(1, m):
        s = segs[i]
        if n[i] >= n[i - 1]:  # at most n_{s−1} survivors per batch, n_s leave: the queue can never grow
            th = math.inf
        elif n[i - 1] * s.survive >= n[i]:  # (12b) fails: the queue drifts up, no finite buffer bounds it
            th = 0.0
        else:
            th = theta_star_binomial(n[i - 1], s.survive, n[i])
        thetas.append(th)
        if th == 0.0:
            buffer = math.inf
            continue
        buffer += (prompt + segs[i - 1].last) * (n[i] + math.log(m * b / delta) / th)
    return {"peak": peak, "buffer": buffer, "total": peak + buffer, "iteration_time": T, "iterations": b,
            "theta": thetas, "drift_ok": drift_ok}

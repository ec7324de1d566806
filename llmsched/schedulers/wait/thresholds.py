"""Thresholds that honour the fluid model when its per-stage counts are below one, and checks of (11)/(12).

Ao et al.'s conditions are on per-stage counts: WAIT needs (11a) Σ n_j c_j ≤ M and (11b) λ_j T(n) ≤ n_j; Nested
WAIT needs (12a) Λ_1 T(n) < n_1 and (12b) p_s n_{s−1} < n_s. At realistic d0, d1 the fluid counts
n*_j = λ_j T* are 0.01–0.9, and integer rounding (n = max(1, ⌈·⌉) or the B rule) breaks (12b): e.g.
n = 2, 2, 1 with p_3 = 0.75 gives p_3·n_2 = 1.5 > n_3. What the fluid model prescribes at that scale is a
*rate*: x_s new prompts per iteration on average. :class:`RandomisedThresholds` realises it by time-sharing: each
iteration draws n_s ∈ {⌊x_s⌋, ⌈x_s⌉} with mean x_s from a seeded generator (a draw of 0 admits nobody that
iteration but lets the segment's prompts advance). With x_s = Λ_s·τ·(1+ε)^(s−1) every condition of (12) holds in
expectation with strict margin ε, and (11b) with x_j = λ_j·τ, τ = (1+ε)·T(x).
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .fluid_model import Overloaded, PromptType, fluid
from .nested import Segment, segment_memory


class RandomisedThresholds:
    """Per-iteration integer thresholds whose mean is ``means`` (seeded; one draw per scheduling decision)."""

    def __init__(self, means: list[float], seed: int = 0):
        if not means or min(means) <= 0 or not all(math.isfinite(x) for x in means):
            raise ValueError(f"randomised thresholds need finite means > 0, got {means}")
        self.means = [float(x) for x in means]
        self._floor = np.floor(self.means)
        self._frac = np.asarray(self.means) - self._floor
        self._rng = np.random.default_rng(seed)

    def draw(self) -> list[int]:
        up = self._rng.random(len(self.means)) < self._frac
        return [int(f) + int(u) for f, u in zip(self._floor, up)]


def _cycle(means, memory, d0: float, d1: float, T: float, slack: float) -> float:
    """The cycle time τ with τ = (1+slack)·T(x(τ)), by fixed-point iteration from the fluid T*."""
    tau = T * (1 + slack)
    for _ in range(10_000):
        nxt = (1 + slack) * (d0 + d1 * memory(means(tau)))
        if abs(nxt - tau) <= 1e-12 * tau:
            return nxt
        tau = nxt
        if not math.isfinite(tau) or tau > 1e6 * T:
            break
    raise ValueError(f"no cycle time meets the fluid conditions with slack {slack:g}: the load is too close to "
                     f"ρ = 1 for that margin; lower the slack or the rates")


def wait_means(types: list[PromptType], d0: float, d1: float, slack: float) -> list[float]:
    """x_j = λ_j·τ with τ = (1+slack)·T(x): (11b) holds with margin ``slack`` (``Overloaded`` when ρ ≥ 1)."""
    T = fluid(types, d0, d1).T
    means = lambda tau: [t.rate * tau for t in types]  # noqa: E731
    tau = _cycle(means, lambda x: sum(xj * t.memory for xj, t in zip(x, types)), d0, d1, T, slack)
    return means(tau)


def nested_means(types: list[PromptType], segs: list[Segment], d0: float, d1: float, slack: float) -> list[float]:
    """x_s = Λ_s·τ·(1+slack)^(s−1) with τ = (1+slack)·T(x): (12a) and (12b) hold with margin ``slack`` in
    expectation (survivors into s, p_s·x_(s−1), are x_s/(1+slack))."""
    T = fluid(types, d0, d1).T
    prompt = sum(t.rate * t.prompt for t in types) / sum(t.rate for t in types)
    means = lambda tau: [s.rate * tau * (1 + slack) ** i for i, s in enumerate(segs)]  # noqa: E731
    tau = _cycle(means, lambda x: segment_memory(prompt, segs, x), d0, d1, T, slack)
    return means(tau)


def wait_violations(types: list[PromptType], n: list[float], d0: float, d1: float, M: float) -> list[str]:
    """The conditions (11) that (mean) thresholds ``n`` break; empty when they hold."""
    mem = sum(nj * t.memory for nj, t in zip(n, types))
    T = d0 + d1 * mem
    bad = [] if mem <= M else [f"(11a) full-batch KV Σn_j c_j = {mem:.4g} > M = {M:.4g}"]
    bad += [f"(11b) type {j + 1}: λ_j T(n) = {t.rate * T:.3g} > n_j = {nj:.3g}"
            for j, (t, nj) in enumerate(zip(types, n)) if t.rate * T > nj * (1 + 1e-9)]
    return bad


def nested_violations(segs: list[Segment], n: list[float], prompt: float, d0: float, d1: float,
                      M: float) -> list[str]:
    """The conditions (12) and the peak-memory part of (14), M(n) ≤ M, that (mean) thresholds ``n`` break."""
    mem = segment_memory(prompt, segs, n)
    T = d0 + d1 * mem
    bad = [] if mem <= M else [f"(14) in-flight KV M(n) = {mem:.4g} > M = {M:.4g}"]
    if segs[0].rate * T >= n[0]:
        bad.append(f"(12a) Λ_1 T(n) = {segs[0].rate * T:.3g} >= n_1 = {n[0]:.3g}")
    bad += [f"(12b) segment {i + 2}: p_s n_(s-1) = {s.survive * n[i]:.3g} >= n_s = {n[i + 1]:.3g}"
            for i, s in enumerate(segs[1:]) if s.survive * n[i] >= n[i + 1] - 1e-9]
    return bad


def memory_scaled(means: list[float], stages: list[int], kv: list[float], memory: float, seats: int) -> list[float]:
    """Means ∝ ``means`` scaled so the full batch fills the KV (Σ x·kv = ``memory``) or the sequence cap
    (Σ x·stages = ``seats``), whichever binds first: what is left when ρ ≥ 1 and no equilibrium exists
    (Ao et al., Remark 1: run at the memory limit)."""
    scale = min(memory / sum(x * k for x, k in zip(means, kv)), seats / sum(x * n for x, n in zip(means, stages)))
    return [x * scale for x in means]


def fluid_or_memory_means(kind: str, types: list[PromptType], segs: list[Segment] | None, d0: float, d1: float,
                          slack: float, memory: float, seats: int) -> tuple[list[float], bool]:
    """The fluid means (``wait_means`` / ``nested_means``), or when the load is overloaded (ρ ≥ 1, or no cycle
    time meets the margin) the same proportions scaled to the memory limit; returns (means, overloaded)."""
    try:
        if kind == "wait":
            return wait_means(types, d0, d1, slack), False
        return nested_means(types, segs, d0, d1, slack), False
    except (Overloaded, ValueError):
        if kind == "wait":
            base = [t.rate for t in types]
            return memory_scaled(base, [t.stages for t in types], [t.memory for t in types], memory, seats), True
        prompt = sum(t.rate * t.prompt for t in types) / sum(t.rate for t in types)
        base = [s.rate * (1 + slack) ** i for i, s in enumerate(segs)]
        kv = [s.stages * (prompt + (s.first + s.last) / 2) for s in segs]
        return memory_scaled(base, [s.stages for s in segs], kv, memory, seats), True


def report_violations(policy: str, n: list[float], bad: list[str], d0: float, d1: float, memory: float,
                      strict: bool, conditions: str = "") -> list[str]:
    """Tell the user about thresholds that break Ao et al.'s conditions: a warning, or (``strict``) an error."""
    if bad:
        which = f" {conditions}" if conditions else ""
        msg = (f"{policy} thresholds {[round(x, 3) for x in n]} break Ao et al.'s conditions{which} at d0={d0:.4g}, "
               f"d1={d1:.4g}, M={memory}: {'; '.join(bad)}; use rule=fluid-random (fluid means, seeded draws) "
               f"or more KV memory")
        if strict:
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=3)
    return bad

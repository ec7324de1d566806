"""The fluid equilibrium of Ao et al. §2 (eqs. 4–10) and WAIT's threshold conditions (11).

In equilibrium every stage of type j holds n_j prompts; a full iteration takes T = d0 + d1·M with
M = Σ n_j c_j, and arrivals per iteration equal completions: n_j = λ_j T. Solving gives
T* = d0 / (1 − ρ), M* = T*·Σ λ_j c_j, n*_j = λ_j T*, Thp* = Σ λ_j l'_j, with ρ = d1·Σ λ_j c_j < 1
(Prop. 1: at ρ ≥ 1 no policy is stable).
"""
from __future__ import annotations

import math
from dataclasses import dataclass


class Overloaded(ValueError):
    """ρ = d1·Σ λ_j c_j ≥ 1: no policy keeps latency bounded (Ao et al. Prop. 1)."""


@dataclass(frozen=True)
class PromptType:
    """Paper units: ``rate`` prompts/s, ``prompt`` = l input tokens, ``decode`` = l' decode iterations."""

    rate: float
    prompt: int
    decode: int

    def __post_init__(self):
        if not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"prompt type rate must be a positive number of prompts/s, got {self.rate!r}")
        if self.prompt < 1 or self.decode < 0:
            raise ValueError(f"prompt type needs prompt >= 1 and decode >= 0 tokens, got l={self.prompt}, "
                             f"l'={self.decode}")

    @property
    def stages(self) -> int:
        return self.decode + 1

    @property
    def memory(self) -> float:
        """c_j: KV tokens summed over the l'+1 stages, (l'+1)(l + l'/2)."""
        return (self.decode + 1) * (self.prompt + self.decode / 2)

    @property
    def output_len(self) -> int:
        """The same prompt's output length in the engine's convention (the prefill samples a token)."""
        return self.decode + 1


def parse_types(text: str) -> list[PromptType]:
    """``"RATE:L:L',RATE:L:L'"`` (paper units) → prompt types."""
    out = []
    for part in str(text).split(","):
        try:
            rate, l, lp = part.split(":")
            out.append(PromptType(float(rate), int(l), int(lp)))
        except ValueError as e:
            if isinstance(e, Overloaded) or "prompt type" in str(e):
                raise
            raise ValueError(f"prompt types {text!r}: write RATE:PROMPT:DECODE triples separated by commas, e.g. "
                             f"'20:10:10,10:10:20'") from None
    if not out:
        raise ValueError("prompt types: give at least one RATE:PROMPT:DECODE triple")
    return out


@dataclass(frozen=True)
class Equilibrium:
    rho: float              # d1·Σ λ_j c_j, the fraction of iteration time spent on KV work
    T: float                # T*: iteration time (s)
    M: float                # M*: KV memory in use (tokens)
    n: tuple[float, ...]    # n*_j: prompts per stage (fractional)
    throughput: float       # Thp*: decode tokens/s
    c: tuple[float, ...]    # c_j

    def as_dict(self) -> dict:
        return {"rho": self.rho, "T": self.T, "M": self.M, "n": list(self.n), "throughput": self.throughput,
                "c": list(self.c)}


def check_iteration_time(d0: float, d1: float) -> None:
    if not (d0 > 0 and math.isfinite(d0)) or not (d1 >= 0 and math.isfinite(d1)):
        raise ValueError(f"iteration time needs d0 > 0 and d1 >= 0 seconds (per token), got d0={d0!r}, d1={d1!r}")


def fluid(types: list[PromptType], d0: float, d1: float) -> Equilibrium:
    """The multi-type equilibrium (8)–(10); raises :class:`Overloaded` when ρ ≥ 1."""
    check_iteration_time(d0, d1)
    c = tuple(t.memory for t in types)
    load = sum(t.rate * cj for t, cj in zip(types, c))
    rho = d1 * load
    if rho >= 1:
        raise Overloaded(f"overloaded: d1·Σλ_j c_j = {rho:.4g} >= 1, so no policy is stable (Ao et al. Prop. 1); "
                         f"lower the arrival rates below {1 / rho:.4g}× these or use a faster d1")
    T = d0 / (1 - rho)
    return Equilibrium(rho, T, T * load, tuple(t.rate * T for t in types),
                       sum(t.rate * t.decode for t in types), c)


def feasible_cycle_times(types: list[PromptType], d0: float, d1: float, M: float) -> tuple[float, float] | None:
    """Cycle times τ with n_j = λ_j τ satisfying (11a) and (11b): [T*, M/Σλc]; None iff M < M*."""
    eq = fluid(types, d0, d1)
    load = eq.M / eq.T
    hi = M / load
    return (eq.T, hi) if hi >= eq.T * (1 - 1e-12) else None


def check_wait_thresholds(types: list[PromptType], d0: float, d1: float, M: float, n: list[int]) -> list[str]:
    """The conditions (11) that integer thresholds ``n`` violate (empty when WAIT never overflows and drifts ≤ 0)."""
    mem = sum(nj * t.memory for nj, t in zip(n, types))
    T = d0 + d1 * mem
    bad = [] if mem <= M else [f"(11a) full-batch memory {mem:g} > M = {M:g}"]
    bad += [f"(11b) type {j}: λT(n) = {t.rate * T:.4g} > n = {nj}" for j, (t, nj) in enumerate(zip(types, n))
            if t.rate * T > nj * (1 + 1e-12)]
    return bad


def wait_thresholds(types: list[PromptType], d0: float, d1: float, M: float, slack: float = 0.0) -> list[int]:
    """Smallest integer thresholds n_j = ⌈λ_j τ⌉ meeting (11), iterating τ ← T(n) from τ = T*·(1+slack).

    Raises ValueError when M cannot hold them (M < M*, or integer rounding pushes memory past M)."""
    eq = fluid(types, d0, d1)
    tau = eq.T * (1 + slack)
    for _ in range(1000):
        n = [max(1, math.ceil(t.rate * tau - 1e-9)) for t in types]
        T = d0 + d1 * sum(nj * t.memory for nj, t in zip(n, types))
        if all(t.rate * T <= nj * (1 + 1e-12) for t, nj in zip(types, n)):
            break
        tau = T
    bad = check_wait_thresholds(types, d0, d1, M, n)
    if bad:
        raise ValueError(f"no integer WAIT thresholds fit M = {M:g} tokens (M* = {eq.M:.4g}): {'; '.join(bad)}; "
                         f"give more KV memory or lower the rates")
    return n


def batch_cap_thresholds(types: list[PromptType], batch_cap: int) -> list[int]:
    """The experiments' rule (Ao et al. §6.1, authors' code): n_j = max(⌊B·λ_j / Σ_k λ_k(l'_k+1)⌋, 1), so that
    the full batch Σ n_j (l'_j+1) is about B prompts."""
    if batch_cap < 1:
        raise ValueError(f"batch cap B must be >= 1 prompts, got {batch_cap}")
    total = sum(t.rate * t.stages for t in types)
    return [max(int(batch_cap * t.rate / total), 1) for t in types]

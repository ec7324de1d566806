"""Ao et al.'s synthetic multi-type workloads: a mixture of fixed (prompt, output) types with rate shares.

§6.1's parameter values were stripped from the seed text; these are the candidates from the authors' code, labelled "paper-inspired". Lengths are engine lengths: a paper type (l, l') has output l' + 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...workload.lengths.distributions import LengthDist, check_count
from .fluid_model import PromptType


class Mixture(LengthDist):
    """Type j = (prompt_j, output_j) drawn with probability ∝ weight_j (Poisson per type when the arrivals are
    Poisson at the total rate: thinning)."""

    def __init__(self, types: list[tuple[float, int, int]]):
        if not types:
            raise ValueError("Mixture needs at least one (weight, prompt, output) type")
        w = np.array([t[0] for t in types], dtype=float)
        if (w <= 0).any():
            raise ValueError(f"Mixture weights must be > 0, got {w.tolist()}")
        self.weights = w / w.sum()
        self.prompts = np.array([int(t[1]) for t in types], dtype=np.int64)
        self.outputs = np.array([int(t[2]) for t in types], dtype=np.int64)
        if self.prompts.min() < 1 or self.outputs.min() < 1:
            raise ValueError("Mixture prompt and output lengths must be >= 1 tokens")

    def sample(self, n, rng):
        j = rng.choice(len(self.weights), size=check_count(n), p=self.weights)
        return self.prompts[j], self.outputs[j]

    def describe(self) -> dict:
        return {"kind": "mixture", "types": [[float(w), int(p), int(o)] for w, p, o in
                                            zip(self.weights, self.prompts, self.outputs)]}


@dataclass(frozen=True)
class TypedWorkload:
    """Paper types (rates in prompts/s) and the engine length mixture they induce."""

    name: str
    types: tuple[PromptType, ...]
    note: str

    @property
    def rate(self) -> float:
        return sum(t.rate for t in self.types)

    @property
    def lengths(self) -> Mixture:
        return Mixture([(t.rate, t.prompt, t.output_len) for t in self.types])

    def scaled(self, factor: float) -> "TypedWorkload":
        return TypedWorkload(self.name, tuple(PromptType(t.rate * factor, t.prompt, t.decode) for t in self.types),
                             self.note)


def _w(name, triples, note):
    return lambda: TypedWorkload(name, tuple(PromptType(*t) for t in triples), note)


# rates in prompts/s; (λ, l, l') in the paper's units
WAIT_WORKLOADS = {
    "wait-low": _w("wait-low", [(20, 10, 10), (10, 10, 20)],
                   "§6.1 low demand, candidate from the authors' code: (20,10,10) and (10,10,20)"),
    "wait-high": _w("wait-high", [(167, 50, 156), (31, 100, 171)],
                    "§6.1 high demand, candidate from the authors' code: (167a,50,156) and (31a,100,171), a=1"),
    "nested-synthetic": _w("nested-synthetic",
                           [(r, 60, d) for r, d in zip((23, 11, 8, 7, 6, 4, 3, 2, 1, 1),
                                                       range(50, 501, 50))],
                           "§6.2 synthetic-from-real: prefill 60, decode 50..500, rates 23:11:…:1 (66 QPS, authors' "
                           "code); scale to 55 or 550 QPS"),
}

"""Theorem 1 (capacity bound) and Theorem 2 (RAD's cycle condition) of Bari et al., from any batch-time
model.

The paper's optimal effective completion time of request j (§4, eq. 12-13) charges each of its iterations its
share of an optimally tiled batch: the prompt as chunks of t*_lcm tokens, each chunk alone in a batch (as RAD
runs it), and every decode 1/t*_col of a batch of t*_col decodes at that context. We evaluate exactly that
with the simulator's own batch-time model, so

    T*(j) = Σ_chunks step_time(chunk of t*_lcm over the chunks before it)
          + Σ_decodes step_time(t*_col decodes at the decode's context) / t*_col,

and T̄ᴿ = E[T*(1)] over the workload's lengths (a seeded Monte-Carlo mean; its standard error is reported).

* In the paper's cost model (eq. 7: linear layers with tile ceilings, no fixed per-batch cost) this is
  exactly Theorem 1's T̄ᴿ: no policy can serve more than r/T̄ᴿ requests/s, and RAD reaches it (Theorem 2).
* Under a model with a fixed cost per batch (the roofline's weight streaming and step overhead), it is the
  throughput of RAD's batching regime (RAD keeps its batches at t*_col requests and t*_lcm tokens): RAD is
  stable below r/T̄ᴿ and unstable above it, but a hybrid batcher that amortises the fixed cost over more
  tokens (Sarathi's 512-token batches) can exceed it. docs/rad-slai.md measures both cases.

Decode count: the simulator (like the authors' engine) samples the first output token at the end of the
prefill, so a request of L^D output tokens runs L^D − 1 decodes at contexts L^P+1 … L^P+L^D−1
(``convention="engine"``); the paper charges L^D decodes at L^P+1 … L^P+L^D (``"theory"``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ...batchtime.base import Batch, BatchTimeModel

CONVENTIONS = ("engine", "theory")


class TileCosts:
    """Per-iteration costs of optimally tiled batches under ``model``, cached per context."""

    def __init__(self, model: BatchTimeModel, t_col: int, t_lcm: int, max_tokens: int):
        if t_col < 1 or t_lcm < 1 or t_lcm % t_col:
            raise ValueError(f"tile sizes must satisfy t_col >= 1 and t_lcm a multiple of t_col, got "
                             f"t_col={t_col}, t_lcm={t_lcm}")
        self.model, self.t_col, self.t_lcm = model, t_col, t_lcm
        share = np.array([0.0] + [model.step_time(Batch([], [], [ctx] * t_col)) / t_col
                                  for ctx in range(1, max_tokens + 1)])
        self._decode_cum = np.cumsum(share)  # Σ of decode shares at contexts 1..i
        full = [model.prefill_time(t_lcm, k * t_lcm) for k in range(max_tokens // t_lcm + 1)]
        self._chunk_cum = np.concatenate(([0.0], np.cumsum(full)))
        self._tail: dict[tuple[int, int], float] = {}

    def prefill(self, prompt: int) -> float:
        """Seconds of a prompt's t*_lcm chunks, each alone in a batch (the last one the remainder)."""
        k, rem = divmod(prompt, self.t_lcm)
        t = float(self._chunk_cum[k])
        if rem:
            key = (k, rem)
            if key not in self._tail:
                self._tail[key] = self.model.prefill_time(rem, k * self.t_lcm)
            t += self._tail[key]
        return t

    def decodes(self, first_ctx: int, last_ctx: int) -> float:
        """Σ of the decode shares at contexts first_ctx … last_ctx (0 when empty)."""
        if last_ctx < first_ctx:
            return 0.0
        return float(self._decode_cum[last_ctx] - self._decode_cum[first_ctx - 1])

    def request(self, prompt: int, output: int, convention: str = "engine") -> float:
        """T*(j) for one request (seconds)."""
        last = prompt + output - (1 if convention == "engine" else 0)
        return self.prefill(prompt) + self.decodes(prompt + 1, last)


def t_max(model: BatchTimeModel, max_prompt: int, max_output: int) -> float:
    """Eq. (14): one request of maximal length processed one token per batch, with no batching at all."""
    return sum(model.step_time(Batch([], [], [i])) for i in range(1, max_prompt + max_output + 1))


@dataclass(frozen=True)
class RadBound:
    """Theorem 1's figures for one workload, model and GPU."""

    t_bar: float            # T̄ᴿ, seconds of one GPU per request
    t_bar_stderr: float     # standard error of the Monte-Carlo mean
    replicas: int
    t_col: int
    t_lcm: int
    t_max: float            # eq. (14), seconds
    samples: int
    convention: str
    mean_prompt: float
    mean_output: float

    @property
    def capacity(self) -> float:
        """r / T̄ᴿ: the largest stable arrival rate (requests/s)."""
        return self.replicas / self.t_bar

    def as_dict(self) -> dict:
        return {**asdict(self), "capacity_rps": self.capacity, "per_replica_rps": 1.0 / self.t_bar}


def rad_bound(model: BatchTimeModel, prompts, outputs, t_col: int, t_lcm: int, replicas: int = 1,
              convention: str = "engine") -> RadBound:
    """T̄ᴿ and r/T̄ᴿ over the given (prompt, output) length samples."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    prompts, outputs = np.asarray(prompts, dtype=np.int64), np.asarray(outputs, dtype=np.int64)
    if prompts.shape != outputs.shape or prompts.size == 0:
        raise ValueError("rad_bound needs equally many prompt and output lengths, at least one")
    if prompts.min() < 1 or outputs.min() < 1:
        raise ValueError("prompt and output lengths must be >= 1 token")
    costs = TileCosts(model, t_col, t_lcm, int((prompts + outputs).max()))
    per = np.array([costs.request(int(p), int(o), convention) for p, o in zip(prompts, outputs)])
    stderr = float(per.std(ddof=1) / math.sqrt(len(per))) if len(per) > 1 else 0.0
    return RadBound(float(per.mean()), stderr, replicas, t_col, t_lcm,
                    t_max(model, int(prompts.max()), int(outputs.max())), len(per), convention,
                    float(prompts.mean()), float(outputs.mean()))


def theorem2_min_n(t_col: int, t_max_s: float, t_bar: float, eps: float) -> float:
    """Theorem 2: RAD with cycle parameter n is stable at λT̄ᴿ ≤ r(1−ε) when n exceeds this value."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    return (t_col - 1) * t_max_s / (eps * t_bar)


def theorem2_holds(n: int, rate: float, bound: RadBound) -> bool:
    """Whether n satisfies Theorem 2's condition at arrival rate ``rate`` (ε = 1 − λT̄ᴿ/r; False at ε ≤ 0)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not rate > 0:
        raise ValueError(f"rate must be > 0 requests/s, got {rate}")
    eps = 1.0 - rate * bound.t_bar / bound.replicas
    if eps <= 0:
        return False
    return n > theorem2_min_n(bound.t_col, bound.t_max, bound.t_bar, eps)


def saturated_throughput(n: int, t_bar: float, t_max_s: float, t_col: int) -> float:
    """Lower bound on one saturated RAD node's throughput, n / (n·T̄ᴿ + (t*_col − 1)·T^max) (eq. 26)."""
    return n / (n * t_bar + (t_col - 1) * t_max_s)

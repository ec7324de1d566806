"""Arrivals whose rate follows a ``RateShape``: a unit-rate renewal process mapped through the inverse of the
cumulative rate.

With exponential gaps this is the non-homogeneous Poisson process of that rate, exactly (the time-rescaling
theorem; ``rate_shape.py``). With gamma gaps of mean 1 and coefficient of variation ``cv`` it is the transformed
renewal process of Gerhardt and Nelson ("Transforming renewal processes for simulation of nonstationary arrival
processes", INFORMS Journal on Computing 21(4), 2009, §2): bursty (cv > 1) or regular (cv < 1) at every rate, with
the expected count of the schedule. Its first gap is the stationary one (U times a gamma of shape ``k + 1``, the
residual life of a renewal process in equilibrium; Ross, "Stochastic Processes", 2nd ed., §3.5), so the expected
number of arrivals in ``[0, t)`` is the schedule's integral exactly, as for the Poisson process. ``constant`` puts
the i-th arrival (from 0) where the expected count reaches i.

A piecewise-constant shape with Poisson arrivals is ``Piecewise``'s process, and ``scheduled_arrivals`` returns a
``Piecewise`` for it, so a rate schedule of steps draws what it drew before this module existed.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Iterator

import numpy as np

from llmsched.workload.arrivals.processes import ArrivalProcess, Piecewise, check_count, check_duration
from llmsched.workload.chunks import CHUNK, check_chunk, pieces
from llmsched.workload.arrivals.rate_shape import RateShape

UNITS = ("poisson", "gamma", "constant")
INFERENCE_PERF = "inference-perf"  # --arrival for stages as inference-perf's load generator sends them


def scheduled_arrivals(shape: RateShape, arrival: str = "poisson", cv: float | None = None,
                       load_type: str = "constant") -> ArrivalProcess:
    """The arrival process of ``shape`` with ``arrival``'s gaps (``cv`` for gamma); ``inference-perf``: a stages
    shape's fixed count a stage, timed as inference-perf's ``load_type`` (``stage_counts.py``)."""
    if arrival == INFERENCE_PERF:
        from llmsched.workload.arrivals.stage_counts import StageCounts
        return StageCounts(shape, load_type)
    if arrival == "poisson" and shape.is_steps:
        return Piecewise(shape.segments())
    return Modulated(shape, arrival, cv)


class Modulated(ArrivalProcess):
    """A unit-rate renewal process (exponential, gamma or constant gaps) in the time of ``shape`` (module
    docstring)."""

    def __init__(self, shape: RateShape, unit: str = "poisson", cv: float | None = None):
        if not isinstance(shape, RateShape):
            raise ValueError(f"Modulated needs a RateShape, got {type(shape).__name__}")
        if unit not in UNITS:
            raise ValueError(f"Modulated: unknown arrival process {unit!r}; valid: {', '.join(UNITS)}")
        if (unit == "gamma") != (cv is not None):
            raise ValueError("Modulated: gamma gaps need cv, and only gamma gaps take it")
        if cv is not None and not (cv > 0 and np.isfinite(cv)):
            raise ValueError(f"Modulated cv must be finite and > 0, got {cv!r}")
        if not shape.total > 0:
            raise ValueError("Modulated: the rate is 0 everywhere, so no request would ever arrive")
        self.shape, self.unit, self.cv = shape, unit, cv

    def _gaps(self, rng: np.random.Generator, k: int, first: bool) -> np.ndarray:
        """``k`` unit-time gaps; ``first``: the first of them is the process's first arrival."""
        if self.unit == "poisson":
            return rng.exponential(1.0, k)
        if self.unit == "constant":
            gaps = np.ones(k)
            if first and k:
                gaps[0] = 0.0
            return gaps
        shape = 1.0 / self.cv**2
        if not (first and k):
            return rng.gamma(shape, 1.0 / shape, k)
        residual = rng.gamma(shape + 1.0, 1.0 / shape) * rng.uniform()
        return np.concatenate(([residual], rng.gamma(shape, 1.0 / shape, k - 1)))

    def _units(self, n: int, rng: np.random.Generator, size: int) -> Iterator[np.ndarray]:
        """The first ``n`` unit times in pieces of ``size``: one running sum, as one cumulative sum of all n would
        add them."""
        total = 0.0
        for a in range(0, n, size):
            k = min(size, n - a)
            unit = np.cumsum(np.concatenate(([total], self._gaps(rng, k, a == 0))))[1:]
            total = unit[-1]
            yield unit

    def _times(self, units: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
        """Unit times to clock times; a running maximum keeps them sorted where two unit times closer than the
        inverse's tolerance could swap."""
        last = -np.inf
        for unit in units:
            if unit[-1] >= self.shape.total:
                raise ValueError(f"the rate schedule offers {self.shape.total:.6g} expected arrivals in all (its rate "
                                 f"is 0 from {self.shape.end:g} s on) and this draw has fewer than were asked for; ask "
                                 f"for fewer requests or give a duration instead")
            times = np.maximum.accumulate(np.concatenate(([last], self.shape.inverse(unit))))[1:]
            last = times[-1]
            yield times

    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n = check_count(n)
        if n == 0:
            return np.zeros(0)
        return next(self._times(self._units(n, rng, n)))

    def chunks(self, n, rng, size=CHUNK):
        n, size = check_count(n), check_chunk(size)
        if self.shape.total < math.inf:  # whether n arrivals exist is known only from all of them: drawn now
            return pieces(self.times(n, rng), size)
        return self._times(self._units(n, rng, size))

    def until(self, duration: float, rng: np.random.Generator) -> np.ndarray:
        check_duration(duration)
        _, pieces = self.until_chunks(duration, rng, CHUNK)
        return np.concatenate([np.zeros(0), *pieces()])

    def until_chunks(self, duration, rng, size=CHUNK):
        """Counts the unit times below the expected count at ``duration`` in one pass, then gives them anew in
        pieces from a copy of the generator's state."""
        check_duration(duration)
        size = check_chunk(size)
        limit = float(self.shape.cumulative(duration))
        start = copy.deepcopy(rng)
        n = sum(len(unit) for unit in self._units_below(limit, copy.deepcopy(start), size))
        return n, lambda: self._times(self._units_below(limit, copy.deepcopy(start), size))

    def _units_below(self, limit: float, rng: np.random.Generator, size: int) -> Iterator[np.ndarray]:
        for unit in self._units(2**62, rng, size):  # endless: stops at the limit
            inside = unit[unit < limit]  # a prefix: unit times never decrease
            if len(inside):
                yield inside
            if len(inside) < len(unit):
                return

    def describe(self) -> dict:
        out = {"kind": "modulated", "gaps": self.unit, "shape": self.shape.describe()}
        if self.cv is not None:
            out["cv"] = self.cv
        return out

"""Stages as inference-perf's load generator sends them (``--arrival inference-perf``): a fixed count a stage.

inference-perf (kubernetes-sigs/inference-perf, ``inference_perf/loadgen/load_generator.py``'s ``run_stage`` and
``load_timer.py`` at 7de5ef2) sends exactly ``int(rate * duration)`` requests a stage, timed by its ``load.type``:

* ``constant`` (its default): ``ConstantLoadTimer`` draws that many exponential gaps of mean ``1/rate`` and scales
  them to sum to the stage's duration, so the count is fixed, the spacing random and the last request lands on the
  stage's end;
* ``poisson``: ``PoissonLoadTimer`` draws a Poisson count of mean ``rate`` for each second (a second with none
  passes empty) and spreads that second's requests as ``constant`` does over it, until the stage's count is sent:
  the stage may end early or run past its duration.

A stages rate schedule's pieces of rate > 0 are its stages (with a file, the pauses between them are pieces at
rate 0). Where the Poisson default (``modulated.py``) draws a Poisson count of mean ``rate * duration`` a stage,
this sends inference-perf's count; it is asked for, not the default, so every other schedule and every earlier
run keeps its process.
"""
from __future__ import annotations

import numpy as np

from llmsched.workload.arrivals.processes import ArrivalProcess, check_count, check_duration
from llmsched.workload.arrivals.rate_shape import RateShape

LOAD_TYPES = ("constant", "poisson")


class StageCounts(ArrivalProcess):
    """``int(rate * duration)`` arrivals in each stage of ``shape`` (its pieces at a rate > 0), timed as
    inference-perf's ``load_type`` times them (module docstring); all drawn at once, in time order."""

    def __init__(self, shape: RateShape, load_type: str = "constant"):
        if not isinstance(shape, RateShape) or shape.wave is not None or shape.levels[-1] != 0:
            raise ValueError("--arrival inference-perf applies to stages (a schedule 'stages:RATE@SECONDS,...' or "
                             "an inference-perf config file): its count is int(rate x duration) a stage")
        if load_type not in LOAD_TYPES:
            raise ValueError(f"inference-perf load type {load_type!r}: its rate loads are {', '.join(LOAD_TYPES)}")
        self.shape, self.load_type = shape, load_type
        ends = shape.starts[1:]
        self.stages = [(a, b - a, rate) for a, b, rate in zip(shape.starts, ends, shape.levels) if rate > 0]
        self.counts = [int(rate * length) for _, length, rate in self.stages]  # inference-perf's run_stage
        self.total = sum(self.counts)
        if not self.total:
            raise ValueError(f"every stage sends int(rate x duration) = 0 requests (stages {self._listed()}); give "
                             f"rate x duration >= 1 to some stage")

    def _listed(self) -> str:
        return ", ".join(f"{rate:g}@{length:g}" for _, length, rate in self.stages)

    def all_times(self, rng: np.random.Generator) -> np.ndarray:
        """Every stage's arrivals, sorted (a poisson stage running past its end can meet the next stage's)."""
        parts = [self._stage(start, length, rate, n, rng)
                 for (start, length, rate), n in zip(self.stages, self.counts) if n]
        return np.sort(np.concatenate(parts), kind="stable")

    def _stage(self, start: float, length: float, rate: float, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.load_type == "constant":
            return start + spread(n, length, rate, rng)
        times, second = [], start
        while len(times) < n:  # PoissonLoadTimer: a Poisson count a second, each spread over its second
            k = int(rng.poisson(rate))
            if k:
                times.extend((second + spread(k, 1.0, k, rng))[: n - len(times)].tolist())
            second += 1.0
        return np.array(times)

    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n = check_count(n)
        if n > self.total:
            raise ValueError(f"the stages send {self.total} requests in all (int(rate x duration) each: "
                             f"{self._listed()}); ask for at most {self.total} (--num-requests) or leave it out")
        return self.all_times(rng)[:n]

    def until(self, duration: float, rng: np.random.Generator) -> np.ndarray:
        """The arrivals before ``duration``; from the stages' end on, every one (a poisson stage may send past
        its end, and inference-perf sends its whole count)."""
        check_duration(duration)
        times = self.all_times(rng)
        return times if duration >= self.shape.end else times[times < duration]

    def describe(self) -> dict:
        return {"kind": "inference-perf stages", "load_type": self.load_type, "counts": self.counts,
                "stages": [{"start": a, "duration": d, "rate": r} for a, d, r in self.stages]}


def spread(n: int, length: float, rate: float, rng: np.random.Generator) -> np.ndarray:
    """``ConstantLoadTimer``: ``n`` exponential gaps of mean ``1/rate`` scaled to sum to ``length``, as offsets from
    the start (the last at ``length``)."""
    gaps = rng.exponential(1.0 / rate, n)
    return np.cumsum(gaps * (length / gaps.sum()))

"""Arrival processes: when requests reach the system.

Renewal processes (Poisson, Gamma, Constant, TruncatedPoisson) put their first arrival at t=0, so a run never
starts with idle time; Piecewise keeps absolute time because its rate schedule is tied to the clock.
"""
from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from llmsched.bounds import MAX_SECONDS, MIN_RATE
from llmsched.workload.chunks import CHUNK, check_chunk, pieces


def check_rate(name: str, value: float, allow_zero: bool = False) -> float:
    """A rate in requests/s: finite and positive (or zero where a quiet period makes sense)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number of requests per second, got {value!r}") from None
    ok = value >= 0 if allow_zero else value > 0
    if not (ok and math.isfinite(value)):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number of requests per second {bound}, got {value!r}")
    return value


def check_count(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"number of arrivals n must be an integer >= 0, got {n!r}")
    return int(n)


def check_duration(duration) -> None:
    if not (duration > 0 and math.isfinite(duration)):
        raise ValueError(f"duration must be a finite number of seconds > 0, got {duration!r}")


class ArrivalProcess(ABC):
    """Produces sorted arrival times in seconds; every draw comes from the generator passed in."""

    @abstractmethod
    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """The first ``n`` arrival times, sorted, the first at or near 0."""

    @abstractmethod
    def describe(self) -> dict:
        """Parameters as a JSON-friendly dict, for run records."""

    def chunks(self, n: int, rng: np.random.Generator, size: int = CHUNK) -> Iterator[np.ndarray]:
        """``times(n, rng)`` in pieces of ``size``, the same values; renewal processes and Piecewise (last rate
        > 0) draw each piece as it is asked for, this default draws all ``n`` now. ``rng`` is left for this use
        alone."""
        return pieces(self.times(n, rng), size)

    def until_chunks(self, duration: float, rng: np.random.Generator,
                     size: int = CHUNK) -> tuple[int, Callable[[], Iterator[np.ndarray]]]:
        """``until(duration, rng)`` as its count and a function giving it anew in pieces of ``size``, the same
        values; renewal processes and Piecewise count the arrivals in one pass and draw each piece when asked for,
        this default draws them all now."""
        times = self.until(duration, rng)
        return len(times), lambda: pieces(times, size)

    def until(self, duration: float, rng: np.random.Generator) -> np.ndarray:
        """All arrival times in ``[0, duration)``.

        Draws ``times`` for growing ``n`` from one sub-seed, so the answer depends only on ``rng``'s state.
        """
        check_duration(duration)
        seed = int(rng.integers(2**63))
        n = 64
        while True:
            t = self.times(n, np.random.default_rng(seed))
            if t[-1] >= duration:
                return t[t < duration]
            n *= 2


class Renewal(ArrivalProcess):
    """i.i.d. gaps; the first arrival at t=0."""

    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n = check_count(n)
        if n == 0:
            return np.zeros(0)
        return np.concatenate(([0.0], np.cumsum(self.gaps(n - 1, rng))))

    def chunks(self, n, rng, size=CHUNK):
        n, size = check_count(n), check_chunk(size)
        return self._chunks(n, rng, size)

    def until_chunks(self, duration, rng, size=CHUNK):
        check_duration(duration)
        size = check_chunk(size)
        # the sub-seed ``until`` draws; its times for every n are prefixes of one stream, so counting the arrivals
        # before ``duration`` in that stream gives ``until``'s answer without holding it
        seed = int(rng.integers(2**63))
        n = 0
        for times in self._chunks(2**62, np.random.default_rng(seed), size):  # endless: stops at the duration
            inside = int(np.searchsorted(times, duration))
            n += inside
            if inside < len(times):
                break
        return n, lambda: self._chunks(n, np.random.default_rng(seed), size)

    def _chunks(self, n, rng, size):
        # the running total goes first into each piece's cumulative sum: the same additions, in the same order,
        # as np.cumsum over all n gaps
        for a in range(0, n, size):
            if a == 0:
                times = np.cumsum(np.concatenate(([0.0], self.gaps(min(size, n) - 1, rng))))
            else:
                times = np.cumsum(np.concatenate(([times[-1]], self.gaps(min(size, n - a), rng))))[1:]
            yield times

    @abstractmethod
    def gaps(self, n: int, rng: np.random.Generator) -> np.ndarray: ...


class Poisson(Renewal):
    """Exponential gaps with mean 1/rate: the papers' default open-loop traffic."""

    def __init__(self, rate: float):
        self.rate = check_rate("Poisson rate", rate)

    def gaps(self, n, rng):
        return rng.exponential(1.0 / self.rate, n)

    def describe(self) -> dict:
        return {"kind": "poisson", "rate": self.rate}


class TruncatedPoisson(Renewal):
    """Exponential gaps cut at ``max_gap/rate``, as Sarathi-Serve's and SLAI's trace generators do (Bari et al.,
    Bari et al. §5).

    The cut shortens gaps, so the real rate is ``rate / (1 - exp(-max_gap))`` (about 1.052·rate for 3).
    """

    def __init__(self, rate: float, max_gap: float = 3.0):
        self.rate = check_rate("TruncatedPoisson rate", rate)
        if not (max_gap > 0 and math.isfinite(max_gap)):
            raise ValueError(f"TruncatedPoisson max_gap must be a positive multiple of 1/rate, got {max_gap!r}")
        self.max_gap = float(max_gap)

    @property
    def effective_rate(self) -> float:
        return self.rate / (1.0 - math.exp(-self.max_gap))

    def gaps(self, n, rng):
        return np.minimum(rng.exponential(1.0 / self.rate, n), self.max_gap / self.rate)

    def describe(self) -> dict:
        return {"kind": "truncated-poisson", "rate": self.rate, "max_gap": self.max_gap,
                "effective_rate": self.effective_rate}


class Gamma(Renewal):
    """Gamma gaps with mean 1/rate and coefficient of variation ``cv``: bursty for cv > 1, Poisson at cv = 1."""

    def __init__(self, rate: float, cv: float):
        self.rate = check_rate("Gamma rate", rate)
        try:
            cv = float(cv)
        except (TypeError, ValueError):
            raise ValueError(f"Gamma cv must be a number > 0, got {cv!r}") from None
        if not (cv > 0 and math.isfinite(cv)):
            raise ValueError(f"Gamma cv (coefficient of variation of the gaps) must be finite and > 0, got {cv!r}")
        self.cv = cv

    def gaps(self, n, rng):
        shape = 1.0 / self.cv**2
        return rng.gamma(shape, 1.0 / (self.rate * shape), n)

    def describe(self) -> dict:
        return {"kind": "gamma", "rate": self.rate, "cv": self.cv}


class Constant(Renewal):
    """Evenly spaced arrivals: no randomness, useful for tests and for isolating the scheduler."""

    def __init__(self, rate: float):
        self.rate = check_rate("Constant rate", rate)

    def gaps(self, n, rng):
        return np.full(n, 1.0 / self.rate)

    def describe(self) -> dict:
        return {"kind": "constant", "rate": self.rate}


class Piecewise(ArrivalProcess):
    """Non-homogeneous Poisson process whose rate is constant on each segment ``[t_start_i, t_start_{i+1})``.

    The first segment must start at 0 and the last one runs forever. Arrivals keep absolute time, so a first
    segment of rate 0 delays the first arrival. Sampled by mapping a unit-rate Poisson process through the
    inverse of the cumulative rate.
    """

    def __init__(self, segments: Sequence[tuple[float, float]]):
        try:
            pairs = [(float(start), rate) for start, rate in segments]
        except (TypeError, ValueError):
            raise ValueError(f"Piecewise segments must be a list of (t_start, rate) pairs, got {segments!r}") from None
        starts = [start for start, _ in pairs]
        rates = [check_rate(f"Piecewise rate of segment {i}", rate, allow_zero=True)
                 for i, (_, rate) in enumerate(pairs)]
        if not starts:
            raise ValueError("Piecewise needs at least one (t_start, rate) segment")
        if starts[0] != 0:
            raise ValueError(f"Piecewise: the first segment must start at t=0, got {starts[0]}")
        if any(not (b > a and math.isfinite(b)) for a, b in zip(starts, starts[1:])):
            raise ValueError(f"Piecewise segment starts must be finite and strictly increasing, got {starts}")
        if not any(r > 0 for r in rates):
            raise ValueError("Piecewise: every segment has rate 0, so no request would ever arrive")
        for i, (start, rate) in enumerate(zip(starts, rates)):  # bounds.py: as --rate and --duration
            if 0 < rate < MIN_RATE:
                raise ValueError(f"Piecewise rate of segment {i} ({rate:g}) must be 0 or at least {MIN_RATE:g} "
                                 f"requests/s (a mean gap of at most 11.6 days)")
            if start > MAX_SECONDS:
                raise ValueError(f"Piecewise segment {i} starts at {start:g} s, after the {MAX_SECONDS:g} s "
                                 f"(about 32 years) a run may span")
        self.starts = np.array(starts)
        self.rates = np.array(rates)
        # cumulative expected arrivals at each segment start
        self.cumulative = np.concatenate(([0.0], np.cumsum(self.rates[:-1] * np.diff(self.starts))))

    def time_of(self, count: float) -> float:
        """When ``count`` arrivals are expected (inf if the last segment's rate 0 never brings them)."""
        i = int(np.searchsorted(self.cumulative, count, side="right")) - 1
        return float(self.starts[i] + (count - self.cumulative[i]) / self.rates[i]) if self.rates[i] > 0 else math.inf

    def expected_count(self, t: float) -> float:
        """Expected number of arrivals in [0, t)."""
        i = int(np.searchsorted(self.starts, t, side="right")) - 1
        return float(self.cumulative[i] + self.rates[i] * (t - self.starts[i]))

    def _invert(self, unit_times: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.cumulative, unit_times, side="right") - 1
        if self.rates[-1] == 0 and len(unit_times) and unit_times[-1] >= self.cumulative[-1]:
            k = int(np.searchsorted(unit_times, self.cumulative[-1]))
            raise ValueError(f"the rate schedule ends (its last stage has rate 0) after {k} arrivals in this draw, "
                             f"but {len(unit_times)} requests were asked for: ask for at most {k} (--num-requests) "
                             f"or give a duration (--duration) instead")
        return self.starts[i] + (unit_times - self.cumulative[i]) / self.rates[i]

    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        n = check_count(n)
        return self._invert(np.cumsum(rng.exponential(1.0, n)))

    def chunks(self, n, rng, size=CHUNK):
        if self.rates[-1] == 0:
            return super().chunks(n, rng, size)  # whether n arrivals exist is known only from all of them
        n, size = check_count(n), check_chunk(size)
        return self._chunks(n, rng, size)

    def _chunks(self, n, rng, size):
        total = 0.0
        for a in range(0, n, size):
            unit = np.cumsum(np.concatenate(([total], rng.exponential(1.0, min(size, n - a)))))[1:]
            total = unit[-1]
            yield self._invert(unit)

    def until(self, duration: float, rng: np.random.Generator) -> np.ndarray:
        check_duration(duration)
        total = self.expected_count(duration)
        unit = np.cumsum(rng.exponential(1.0, self._first_draw(total)))
        while unit[-1] < total:
            unit = np.concatenate((unit, unit[-1] + np.cumsum(rng.exponential(1.0, len(unit)))))
        return self._invert(unit[unit < total])

    @staticmethod
    def _first_draw(total: float) -> int:
        """How many unit-rate arrivals ``until`` draws at first: ten standard deviations past the expected count."""
        return int(total + 10 * math.sqrt(total) + 16)

    def until_chunks(self, duration, rng, size=CHUNK):
        check_duration(duration)
        size = check_chunk(size)
        total = self.expected_count(duration)
        start = copy.deepcopy(rng)
        n = sum(len(unit) for unit in self._units_until(total, copy.deepcopy(start), size))
        return n, lambda: (self._invert(unit) for unit in self._units_until(total, copy.deepcopy(start), size))

    def _units_until(self, total: float, rng: np.random.Generator, size: int) -> Iterator[np.ndarray]:
        """``until``'s unit-rate times below ``total`` in pieces, with its very additions: its first draw summed
        from 0, then each further draw (as long as all before it) summed and added to the last time before it."""
        block, drawn, base = self._first_draw(total), 0, 0.0
        while True:
            carry = 0.0
            for a in range(0, block, size):
                sums = np.cumsum(np.concatenate(([carry], rng.exponential(1.0, min(size, block - a)))))[1:]
                carry = sums[-1]
                unit = base + sums  # 0.0 + x is x: the first draw's plain cumulative sum
                inside = unit[unit < total]  # a prefix: the times never decrease
                if len(inside):
                    yield inside
                if len(inside) < len(unit):
                    return
            base += carry  # the draw's last time, as ``until`` reads it from ``unit[-1]``
            drawn += block
            block = drawn

    def describe(self) -> dict:
        return {"kind": "piecewise", "segments": [[float(s), float(r)] for s, r in zip(self.starts, self.rates)]}


class TraceReplay(ArrivalProcess):
    """Replays recorded arrival times, shifted to start at 0.

    ``target_rate`` stretches or compresses time so the mean rate ((n-1)/span) equals it; ``time_scale``
    multiplies every time by an explicit factor instead (2 = half the rate). The generator is not used.
    """

    def __init__(self, times, target_rate: float | None = None, time_scale: float | None = None):
        t = np.asarray(times, dtype=float).ravel()
        if len(t) == 0:
            raise ValueError("TraceReplay needs at least one arrival time")
        if not np.all(np.isfinite(t)):
            raise ValueError(f"TraceReplay times must be finite; entry {int(np.argmin(np.isfinite(t)))} is not")
        back = np.flatnonzero(np.diff(t) < 0)
        if len(back):
            raise ValueError(f"TraceReplay times must be sorted; entry {back[0] + 1} ({t[back[0] + 1]}) comes "
                             f"before entry {back[0]} ({t[back[0]]})")
        if target_rate is not None and time_scale is not None:
            raise ValueError("TraceReplay: give target_rate or time_scale, not both")
        t = t - t[0]
        self.trace_rate = (len(t) - 1) / t[-1] if len(t) > 1 and t[-1] > 0 else math.nan
        self.target_rate = None if target_rate is None else check_rate("TraceReplay target_rate", target_rate)
        if self.target_rate is not None:
            if math.isnan(self.trace_rate):
                raise ValueError("TraceReplay: cannot rescale to a target_rate, the trace spans no time")
            time_scale = self.trace_rate / self.target_rate
        elif time_scale is not None:
            time_scale = float(time_scale)
            if not (time_scale > 0 and math.isfinite(time_scale)):
                raise ValueError(f"TraceReplay time_scale must be a finite factor > 0, got {time_scale!r}")
        self.time_scale = 1.0 if time_scale is None else time_scale
        self._times = t * self.time_scale

    def __len__(self) -> int:
        return len(self._times)

    @property
    def rate(self) -> float:
        """Mean rate of the replayed (rescaled) trace."""
        return self.trace_rate / self.time_scale

    def times(self, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        n = check_count(n)
        if n > len(self._times):
            raise ValueError(f"TraceReplay: asked for {n} arrivals but the trace has only {len(self._times)}; "
                             f"ask for at most {len(self._times)}")
        return self._times[:n].copy()

    def until(self, duration: float, rng: np.random.Generator | None = None) -> np.ndarray:
        """Arrivals before ``duration``; the whole trace if it ends sooner."""
        check_duration(duration)
        return self._times[self._times < duration].copy()

    def describe(self) -> dict:
        trace_rate = None if math.isnan(self.trace_rate) else self.trace_rate
        return {"kind": "trace-replay", "num_arrivals": len(self._times), "trace_rate": trace_rate,
                "target_rate": self.target_rate, "time_scale": self.time_scale}

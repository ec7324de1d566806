"""An arrival rate that changes with time: a piecewise-constant level, optionally times a daily sinusoid.

``rate(t) = level(t) * wave(t)``: ``level`` is constant on each piece ``[start_i, start_{i+1})`` (a rate schedule's
steps or stages, multiplied by its bursts) and ``wave`` is 1, or a sinusoid in requests/s (``Sinusoid``). What an
arrival process needs from it is the cumulative rate ``cumulative(t)`` (the expected number of arrivals in
``[0, t)``) and its inverse: a unit-rate point process mapped through the inverse is a process of rate ``rate(t)``
(the time-rescaling theorem; Brown, Barbieri, Ventura, Kass and Frank, "The time-rescaling theorem and its
application to neural spike train data analysis", Neural Computation 14(2), 2002, §2). Without a wave the inverse is
exact arithmetic, the one ``Piecewise`` does; with one it is solved by Newton's method kept inside a bracket, each
time on its own, to a nanosecond.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

GUESS_POINTS = 256  # a period's table for the inverse's first guess; Newton's method takes it from there
TOLERANCE = 1e-9  # seconds: an inverted time is this close to the exact one (a time ~1e5 s holds ~1e-11 s of digits)


@dataclass(frozen=True)
class Sinusoid:
    """``mean + amp * cos(2 pi (t - peak_at) / period)`` requests/s: ``peak`` at ``peak_at`` (and every period
    after), ``trough`` half a period away."""

    peak: float
    trough: float
    period: float
    peak_at: float

    @property
    def mean(self) -> float:
        return (self.peak + self.trough) / 2

    @property
    def amp(self) -> float:
        return (self.peak - self.trough) / 2

    @property
    def omega(self) -> float:
        return 2 * math.pi / self.period

    def value(self, t):
        return self.mean + self.amp * np.cos(self.omega * (np.asarray(t, float) - self.peak_at))

    def integral(self, t):
        """An antiderivative: ``integral(b) - integral(a)`` is the expected count in ``[a, b)``."""
        t = np.asarray(t, float)
        return self.mean * t + self.amp / self.omega * np.sin(self.omega * (t - self.peak_at))

    def describe(self) -> dict:
        return {"peak": self.peak, "trough": self.trough, "period": self.period, "peak_at": self.peak_at}


@dataclass(frozen=True)
class RateShape:
    """Pieces from ``starts`` (the first at 0, strictly increasing; the last runs forever) with constant
    ``levels`` (>= 0), times ``wave`` when there is one (``levels`` are then factors, else requests/s)."""

    starts: tuple[float, ...]
    levels: tuple[float, ...]
    wave: Sinusoid | None = None

    def __post_init__(self):
        if not self.starts or self.starts[0] != 0 or len(self.starts) != len(self.levels):
            raise ValueError("RateShape: give one level per piece, the first piece starting at 0")
        if any(not b > a for a, b in zip(self.starts, self.starts[1:])):
            raise ValueError(f"RateShape: piece starts must be strictly increasing, got {list(self.starts)}")
        starts = np.array(self.starts, float)
        levels = np.array(self.levels, float)
        ends = self._antiderivative(starts)
        # expected arrivals before each piece's start
        cumulative = np.concatenate(([0.0], np.cumsum(levels[:-1] * np.diff(ends))))
        object.__setattr__(self, "_starts", starts)
        object.__setattr__(self, "_levels", levels)
        object.__setattr__(self, "_at_start", ends)
        object.__setattr__(self, "_cumulative", cumulative)

    def _antiderivative(self, t):
        return np.asarray(t, float) if self.wave is None else self.wave.integral(t)

    @property
    def is_steps(self) -> bool:
        """Whether the rate is constant on each piece (no wave): ``Piecewise`` samples it exactly."""
        return self.wave is None

    def segments(self) -> list[tuple[float, float]]:
        """(start, rate) of each piece, for a shape without a wave."""
        if self.wave is not None:
            raise ValueError("RateShape.segments: a shape with a wave is not piecewise constant")
        return list(zip(self.starts, self.levels))

    @property
    def end(self) -> float:
        """When the rate falls to 0 for good (inf if it never does)."""
        if self._levels[-1] > 0:
            return math.inf
        positive = np.flatnonzero(self._levels > 0)
        return float(self._starts[positive[-1] + 1]) if len(positive) else 0.0

    @property
    def total(self) -> float:
        """Expected arrivals over all time (inf unless the rate ends at 0)."""
        return math.inf if self._levels[-1] > 0 else float(self._cumulative[-1])

    def rate(self, t):
        """Requests/s at ``t`` (array or scalar)."""
        t = np.asarray(t, float)
        i = np.searchsorted(self._starts, t, side="right") - 1
        level = self._levels[i]
        return level if self.wave is None else level * self.wave.value(t)

    def cumulative(self, t):
        """Expected arrivals in ``[0, t)`` (array or scalar)."""
        t = np.asarray(t, float)
        i = np.searchsorted(self._starts, t, side="right") - 1
        return self._cumulative[i] + self._levels[i] * (self._antiderivative(t) - self._at_start[i])

    def inverse(self, unit: np.ndarray) -> np.ndarray:
        """The times at which the expected count reaches each of ``unit`` (non-decreasing, each below ``total``)."""
        unit = np.asarray(unit, float)
        i = np.searchsorted(self._cumulative, unit, side="right") - 1
        rest = unit - self._cumulative[i]
        if self.wave is None:
            return self._starts[i] + rest / self._levels[i]
        return self._solve(i, rest)

    def _solve(self, i: np.ndarray, rest: np.ndarray) -> np.ndarray:
        """t in piece i with ``level_i * (W(t) - W(start_i)) = rest`` (W the wave's antiderivative): Newton's method,
        falling back to bisection whenever a step would leave the bracket; each time stops on its own (so a time does
        not depend on which others it is solved with)."""
        wave, level = self.wave, self._levels[i]
        lo = self._starts[i].copy()
        # W(t) - W(s) >= mean (t - s) - 2 amp / omega bounds t from above; a piece's own end bounds it too
        hi = lo + (rest / level + 2 * wave.amp / wave.omega) / wave.mean
        nxt = np.append(self._starts[1:], np.inf)[i]
        hi = np.minimum(hi, nxt)
        t = np.clip(self._guess(i, rest), lo, hi)
        base = self._at_start[i]
        active = np.arange(len(t))
        for _ in range(200):
            if not len(active):
                break
            ta, la = t[active], level[active]
            f = la * (wave.integral(ta) - base[active]) - rest[active]
            below = f < 0
            lo[active] = np.where(below, ta, lo[active])
            hi[active] = np.where(below, hi[active], ta)
            slope = la * wave.value(ta)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = ta - f / slope
            inside = (step >= lo[active]) & (step <= hi[active]) & (slope > 0)
            new = np.where(inside, step, (lo[active] + hi[active]) / 2)
            done = np.abs(new - ta) <= TOLERANCE
            t[active] = new
            active = active[~done]
        if len(active):
            raise RuntimeError(f"RateShape: the inverse did not converge for {len(active)} times (first at "
                               f"{float(t[active[0]])} s)")
        return t

    def _guess(self, i: np.ndarray, rest: np.ndarray) -> np.ndarray:
        """A first guess for ``_solve``: whole periods (each ``mean * period`` expected arrivals per unit of level),
        then the rest of one period read off a table of the count over one period from the piece's start."""
        wave = self.wave
        guess = np.empty(len(rest))
        per_period = wave.mean * wave.period
        grid = np.linspace(0.0, wave.period, GUESS_POINTS + 1)
        for piece in np.unique(i).tolist():
            sel = i == piece
            start, units = self._starts[piece], rest[sel] / self._levels[piece]
            table = wave.integral(start + grid) - wave.integral(start)
            whole = np.floor(units / per_period)
            guess[sel] = start + whole * wave.period + np.interp(units - whole * per_period, table, grid)
        return guess

    def scaled(self, factor: float) -> "RateShape":
        """The same shape at ``factor`` times the rate."""
        return replace(self, levels=tuple(float(v) * factor for v in self.levels))

    def describe(self) -> dict:
        out = {"starts": list(self.starts), "levels": list(self.levels)}
        if self.wave is not None:
            out["wave"] = self.wave.describe()
        return out

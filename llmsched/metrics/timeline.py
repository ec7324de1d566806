"""A run over time: per-window sums of events, on one grid of fixed-width windows from t = 0.

``window_sums`` is the one reduction (events at times, optionally weighted, summed per window); ``Timeline``
keeps named series of such sums, added a chunk of events at a time (a streamed run folds its records as it writes
them) or all at once, and gives the rows of summary.json's ``timeline`` and timeline.csv. A series is a count per
window (requests that arrived, that finished, ...) or a sum (tokens); ``rows`` divides them by the window's width
where a rate is wanted. What the run offered is one series; served rate, replicas and attainment per window are
more of the same.
"""
from __future__ import annotations

import math

import numpy as np

# window widths (s) a timeline picks from when none is given: the shortest that keeps it to MAX_WINDOWS rows
WIDTHS = (1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 900.0, 1800.0, 3600.0)
MAX_WINDOWS = 300


def window_width(span: float) -> float:
    """The shortest of WIDTHS giving at most MAX_WINDOWS windows over ``span`` seconds (the longest beyond)."""
    for width in WIDTHS:
        if span / width <= MAX_WINDOWS:
            return width
    return WIDTHS[-1]


def window_sums(times, width: float, weights=None, windows: int | None = None) -> np.ndarray:
    """Events at ``times`` (seconds >= 0) summed per window ``[k * width, (k + 1) * width)``: counts, or sums of
    ``weights``; ``windows`` rows at least (more if an event lies beyond them). NaN times (no event) are skipped."""
    if not (width > 0 and math.isfinite(width)):
        raise ValueError(f"window width must be a finite number of seconds > 0, got {width!r}")
    t = np.asarray(times, float)
    keep = np.isfinite(t)
    index = np.floor(t[keep] / width).astype(np.int64)
    if len(index) and index.min() < 0:
        raise ValueError(f"window_sums: an event at {float(t[keep][np.argmin(index)]):g} s is before t = 0")
    w = None if weights is None else np.asarray(weights, float)[keep]
    return np.bincount(index, weights=w, minlength=windows or 0).astype(float)


class Timeline:
    """Named series of per-window sums on one grid (``width`` seconds a window)."""

    def __init__(self, width: float):
        window_sums((), width)  # checks the width
        self.width = float(width)
        self.series: dict[str, np.ndarray] = {}

    def add(self, name: str, times, weights=None) -> None:
        """Fold more events into series ``name``."""
        sums = window_sums(times, self.width, weights)
        old = self.series.get(name, np.zeros(0))
        if len(sums) > len(old):
            old = np.concatenate((old, np.zeros(len(sums) - len(old))))
        old[:len(sums)] += sums
        self.series[name] = old

    def set(self, name: str, values) -> None:
        """A series computed elsewhere (one value per window from the first)."""
        self.series[name] = np.asarray(values, float)

    def windows(self, end: float | None = None) -> int:
        """How many windows the series reach (or ``end`` seconds needs)."""
        longest = max((len(v) for v in self.series.values()), default=0)
        return max(longest, math.ceil(end / self.width) if end else 0)

    def starts(self, end: float | None = None) -> np.ndarray:
        return np.arange(self.windows(end)) * self.width

    def column(self, name: str, end: float | None = None) -> np.ndarray:
        values = self.series.get(name, np.zeros(0))
        n = self.windows(end)
        return np.concatenate((values, np.zeros(n - len(values))))[:n]

    def rows(self, columns: dict[str, tuple[str, bool]], end: float | None = None) -> list[dict]:
        """One dict a window: ``start``, ``end`` and, per output column, its series (``(series, per_second)``:
        divided by the width when ``per_second``)."""
        n = self.windows(end)
        starts = self.starts(end)
        out = {name: self.column(series, end) / (self.width if per_second else 1.0)
               for name, (series, per_second) in columns.items()}
        whole = {name for name, values in out.items() if not columns[name][1] and np.all(values == np.floor(values))}
        cast = {name: int if name in whole else float for name in out}
        return [{"start": float(starts[k]), "end": float(starts[k] + self.width),
                 **{name: cast[name](values[k]) for name, values in out.items()}} for k in range(n)]

"""A run over time: per-window sums of events, on one grid of fixed-width windows from t = 0.

``window_sums`` is the one reduction (events at times, optionally weighted, summed per window); ``Timeline``
keeps named series of such sums, added a chunk of events at a time (a streamed run folds its records as it writes
them) or all at once, and gives the rows of summary.json's ``timeline`` and timeline.csv. A series is a count per
window (requests that arrived, that finished, ...) or a sum (tokens); ``rows`` divides them by the window's width
where a rate is wanted. What the run offered is one series; served rate, replicas and attainment per window are
more of the same: ``fold_requests`` folds a chunk of request records (what a run served per window, its waiting
queue, TTFT and TPOT quantiles, the requests that met their SLOs), ``add_spans`` a fleet's replicas per state (a
time average per window), ``add_values`` a quantity's per-window quantile sketch.
"""
from __future__ import annotations

import math

import numpy as np

from .sketch import QuantileSketch

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


def span_sums(starts, ends, width: float, weights=None) -> np.ndarray:
    """Per window ``[k * width, (k + 1) * width)``: the time integral of how many intervals ``[start, end)`` cover it
    (weighted by ``weights``), so that divided by the width it is the window's time-average count. An interval
    with a NaN or reversed end covers nothing."""
    a, b = np.asarray(starts, float), np.asarray(ends, float)
    w = np.ones(len(a)) if weights is None else np.asarray(weights, float)
    keep = np.isfinite(a) & np.isfinite(b) & (b > a)
    a, b, w = a[keep], b[keep], w[keep]
    if not len(a):
        return np.zeros(0)
    n = int(np.floor(b.max() / width)) + 1

    def covered(x):  # per window k: sum over x of weight x clip(x - k width, 0, width)
        k = np.floor(x / width).astype(np.int64)
        part = np.bincount(k, weights=w * (x - k * width), minlength=n)
        beyond = np.bincount(k, weights=w, minlength=n)  # windows below k are covered whole
        whole = np.concatenate((np.cumsum(beyond[::-1])[::-1][1:], [0.0]))
        return part + width * whole
    return covered(b) - covered(a)


class Timeline:
    """Named series of per-window sums on one grid (``width`` seconds a window), and per-window quantile sketches."""

    def __init__(self, width: float):
        window_sums((), width)  # checks the width
        self.width = float(width)
        self.series: dict[str, np.ndarray] = {}
        self.sketches: dict[str, list[QuantileSketch]] = {}

    def add(self, name: str, times, weights=None) -> None:
        """Fold more events into series ``name``."""
        sums = window_sums(times, self.width, weights)
        old = self.series.get(name, np.zeros(0))
        if len(sums) > len(old):
            old = np.concatenate((old, np.zeros(len(sums) - len(old))))
        old[:len(sums)] += sums
        self.series[name] = old

    def add_spans(self, name: str, starts, ends, weights=None) -> None:
        """Fold intervals into series ``name``: per window, the time they cover (``span_sums``)."""
        sums = span_sums(starts, ends, self.width, weights)
        old = self.series.get(name, np.zeros(0))
        if len(sums) > len(old):
            old = np.concatenate((old, np.zeros(len(sums) - len(old))))
        old[:len(sums)] += sums
        self.series[name] = old

    def add_values(self, name: str, times, values) -> None:
        """Fold values at ``times`` into per-window quantile sketches of ``name`` (1% relative error)."""
        t, v = np.asarray(times, float), np.asarray(values, float)
        keep = np.isfinite(t) & np.isfinite(v)
        t, v = t[keep], v[keep]
        if not len(t):
            return
        index = np.floor(t / self.width).astype(np.int64)
        sketches = self.sketches.setdefault(name, [])
        while len(sketches) <= index.max():
            sketches.append(QuantileSketch())
        order = np.argsort(index, kind="stable")
        index, v = index[order], v[order]
        cuts = np.flatnonzero(np.diff(index)) + 1
        for k, part in zip(index[np.concatenate(([0], cuts))].tolist(), np.split(v, cuts)):
            sketches[k].add_many(part, owned=True)

    def quantile(self, name: str, q: float, end: float | None = None) -> np.ndarray:
        """Per window, the ``q`` quantile of ``name``'s values (NaN in a window without any)."""
        sketches = self.sketches.get(name, [])
        return np.array([sketches[k].quantile(q) if k < len(sketches) and sketches[k].count else math.nan
                         for k in range(self.windows(end))])

    def set(self, name: str, values) -> None:
        """A series computed elsewhere (one value per window from the first)."""
        self.series[name] = np.asarray(values, float)

    def windows(self, end: float | None = None) -> int:
        """How many windows the series reach (or ``end`` seconds needs)."""
        longest = max([len(v) for v in self.series.values()] + [len(v) for v in self.sketches.values()], default=0)
        return max(longest, math.ceil(end / self.width) if end else 0)

    def starts(self, end: float | None = None) -> np.ndarray:
        return np.arange(self.windows(end)) * self.width

    def column(self, name: str, end: float | None = None) -> np.ndarray:
        values = self.series.get(name, np.zeros(0))
        n = self.windows(end)
        return np.concatenate((values, np.zeros(n - len(values))))[:n]

    def rows(self, columns: dict[str, tuple[str, bool]], end: float | None = None, extra: dict | None = None
             ) -> list[dict]:
        """One dict a window: ``start``, ``end`` and, per output column, its series (``(series, per_second)``:
        divided by the width when ``per_second``); ``extra``: more columns computed elsewhere, one value a window."""
        n = self.windows(end)
        starts = self.starts(end)
        out = {name: self.column(series, end) / (self.width if per_second else 1.0)
               for name, (series, per_second) in columns.items()}
        whole = {name for name, values in out.items() if not columns[name][1] and np.all(values == np.floor(values))}
        for name, values in (extra or {}).items():
            values = np.asarray(values, float)
            out[name] = np.concatenate((values, np.full(max(0, n - len(values)), math.nan)))[:n]
        cast = {name: int if name in whole else float for name in out}
        return [{"start": float(starts[k]), "end": float(starts[k] + self.width),
                 **{name: cast[name](values[k]) for name, values in out.items()}} for k in range(n)]


def fold_requests(timeline: Timeline, col, finished: np.ndarray, good: np.ndarray) -> None:
    """Fold a chunk of request records (``col(name)`` gives a column; ``finished`` and ``good``, whether each finished
    and met every SLO target it has) into ``timeline``: by arrival window the requests that arrived (``arrivals``),
    met their targets (``good``), and their TTFT and TPOT (quantile sketches); by finish window those that finished
    (``finished``); and the waiting queue (``waiting``: each request from its arrival until first scheduled)."""
    arrival = col("arrival")
    timeline.add("arrivals", arrival)
    timeline.add("good", arrival[good])
    timeline.add("finished", col("finish")[finished])
    timeline.add_values("ttft", arrival[finished], col("ttft")[finished])
    timeline.add_values("tpot", arrival[finished], col("tpot")[finished])
    scheduled = col("first_scheduled")
    left = np.where(np.isfinite(scheduled), scheduled, col("finish"))
    timeline.add_spans("waiting", arrival, left)

"""A mergeable quantile sketch with bounded relative error (log-spaced buckets, DDSketch-style).

Memory is one counter per occupied bucket: about 2,000 buckets span 1 µs to 1 hour at
1% relative error, whatever the number of samples.
"""
from __future__ import annotations

import math

import numpy as np


class QuantileSketch:
    def __init__(self, relative_error: float = 0.01, min_value: float = 1e-6):
        if not 0 < relative_error < 1:
            raise ValueError(f"relative_error must be in (0, 1), got {relative_error}")
        self.gamma = (1 + relative_error) / (1 - relative_error)
        self._log_gamma = math.log(self.gamma)
        self.min_value = min_value
        self.counts: dict[int, int] = {}
        self.zeros = 0  # samples below min_value
        self.count = 0
        self.total = 0.0
        self.max = -math.inf

    def add_many(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=np.float64)
        if not len(values):
            return
        self.count += len(values)
        self.total += float(values.sum())
        self.max = max(self.max, float(values.max()))
        small = values < self.min_value
        self.zeros += int(small.sum())
        keys = np.ceil(np.log(values[~small]) / self._log_gamma).astype(np.int64)
        uniq, cnt = np.unique(keys, return_counts=True)
        for k, n in zip(uniq.tolist(), cnt.tolist()):
            self.counts[k] = self.counts.get(k, 0) + n

    def merge(self, other: "QuantileSketch") -> None:
        if other.gamma != self.gamma:
            raise ValueError("cannot merge sketches of different relative error")
        for k, n in other.counts.items():
            self.counts[k] = self.counts.get(k, 0) + n
        self.zeros += other.zeros
        self.count += other.count
        self.total += other.total
        self.max = max(self.max, other.max)

    def quantile(self, q: float) -> float:
        if not self.count:
            return math.nan
        rank = q * (self.count - 1)
        seen = self.zeros
        if rank < seen:
            return 0.0
        for k in sorted(self.counts):
            seen += self.counts[k]
            if rank < seen:
                return min(2 * self.gamma ** k / (self.gamma + 1), self.max)
        return self.max

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else math.nan

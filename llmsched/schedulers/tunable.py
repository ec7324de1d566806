"""What a scheduler lets `llmsched tune` search: a range per parameter, the paper's value as the starting point.

A scheduler class declares ``tunable = {"token_budget": IntRange(64, 4096, log=True), ...}``. A key is one of the
scheduler's own parameters or a run field the policy's budget depends on (``max_num_seqs``,
``max_num_batched_tokens``): the tuner tells them apart. The ranges are plain data, so the policies need no
optimiser to declare them; ``llmsched/tune`` turns them into Optuna distributions.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Bounds:
    """Numbers from ``low`` to ``high``, both included, searched on a log scale or not; what numbers (integers or
    any), and how a bound is written, is each kind's own."""

    low: float
    high: float
    log: bool = False


@dataclass(frozen=True)
class IntRange(Bounds):
    def __post_init__(self):
        if not (isinstance(self.low, int) and isinstance(self.high, int) and self.low <= self.high):
            raise ValueError(f"IntRange({self.low!r}, {self.high!r}): give integers with low <= high")
        if self.log and self.low < 1:
            raise ValueError(f"IntRange({self.low}, {self.high}, log=True): a log range starts at 1 or above")

    def contains(self, value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and self.low <= value <= self.high

    def text(self) -> str:
        return f"{self.low}:{self.high}" + (" (log)" if self.log else "")

    def with_bounds(self, low: float, high: float) -> "IntRange":
        if low != int(low) or high != int(high):
            raise ValueError(f"{low:g}:{high:g}: this parameter takes integers")
        return IntRange(int(low), int(high), self.log and low >= 1)


@dataclass(frozen=True)
class FloatRange(Bounds):
    def __post_init__(self):
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.high):
            raise ValueError(f"FloatRange({self.low!r}, {self.high!r}): give finite numbers with low <= high")
        if self.log and self.low <= 0:
            raise ValueError(f"FloatRange({self.low}, {self.high}, log=True): a log range starts above 0")

    def contains(self, value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and self.low <= value <= self.high

    def text(self) -> str:
        return f"{self.low:g}:{self.high:g}" + (" (log)" if self.log else "")

    def with_bounds(self, low: float, high: float) -> "FloatRange":
        return FloatRange(float(low), float(high), self.log and low > 0)


@dataclass(frozen=True)
class Choice:
    options: tuple

    def __post_init__(self):
        if not self.options:
            raise ValueError("Choice(): give at least one option")

    def contains(self, value) -> bool:
        return value in self.options

    def text(self) -> str:
        return "|".join(map(str, self.options))

    def with_bounds(self, low, high):
        raise ValueError(f"a choice among {self.text()} has no numeric range; tune it as declared")


Range = IntRange | FloatRange | Choice

"""Count, mean, quantiles and max of a latency sample or of a quantile sketch: the figures both summaries report
(``summary`` from the rows, ``stream_summary`` from running totals), computed in one place so they agree."""
from __future__ import annotations

import copy
import math

import numpy as np

from .requests import RequestLog
from .sketch import QuantileSketch

QUANTILES = (50, 90, 99)
TOP_REASONS = 5  # rejection reasons listed in a summary
NAN = math.nan


def value_stats(values: np.ndarray, scratch: bool = False) -> dict:
    """Count, mean, quantiles and max of the finite values; ``scratch``: ``values`` may be reordered in place
    (a copy the caller made; saves a second copy of millions of TBT gaps)."""
    finite = np.isfinite(values)
    v = values if finite.all() else values[finite]
    if not len(v):
        return {"count": 0, "mean": NAN, **{f"p{q}": NAN for q in QUANTILES}, "max": NAN}
    mean, top = float(v.mean()), float(v.max())  # before the quantiles may reorder v
    ps = np.percentile(v, QUANTILES, overwrite_input=scratch or v is not values)
    return {"count": int(len(v)), "mean": mean, **{f"p{q}": float(p) for q, p in zip(QUANTILES, ps)}, "max": top}


def sketch_stats(sk: QuantileSketch | None) -> dict:
    if sk is None or not sk.count:
        return value_stats(np.empty(0))
    return {"count": int(sk.count), "mean": float(sk.mean),
            **{f"p{q}": float(sk.quantile(q / 100)) for q in QUANTILES}, "max": float(sk.max)}


def merged_sketch(log: RequestLog, tiers=None) -> QuantileSketch | None:
    """The TBT sketch of the named tiers (all when None) merged into one; None if there is none."""
    names = log.tiers if tiers is None else tiers
    sks = [log.sketches[t] for t in names if t in log.sketches]
    if not sks:
        return None
    merged = copy.deepcopy(sks[0])
    for sk in sks[1:]:
        merged.merge(sk)
    return merged

"""Which requests met their SLO targets: one rule for the in-memory summary, the streamed one and the timeline."""
from __future__ import annotations

import numpy as np

from .requests import TBT_MISS_TOLERANCE


def meets(col, finished: np.ndarray) -> dict[str, np.ndarray]:
    """Per request (``col(name)`` gives a column): did it finish and meet each target (a missing target is met)?
    ``all``: every target it has. TBT meets when at most ``TBT_MISS_TOLERANCE`` of its gaps exceed the target."""
    out = {}
    with np.errstate(invalid="ignore"):
        for name in ("ttft", "tpot"):
            target, value = col(f"{name}_slo"), col(name)
            out[name] = finished & (np.isnan(target) | np.isnan(value) | (value <= target))
        out["tbt"] = finished & (np.isnan(col("tbt_slo")) | (col("tbt_misses") <= TBT_MISS_TOLERANCE * col("num_gaps")))
    out["all"] = out["ttft"] & out["tpot"] & out["tbt"]
    return out

"""What several kinds of source read from the run config alike: its length distribution and its SLO tiers."""
from __future__ import annotations

from ..workload.length_presets import length_preset
from ..workload.workload import lengths_file


def length_dist(cfg):
    """The run's length distribution: the user's own length file (``lengths``), else the named preset."""
    if cfg.lengths:
        return lengths_file(cfg.lengths)
    return length_preset(cfg.workload)


def tier_args(cfg) -> dict:
    """The run's tiers as a source's ``tiers`` keyword (none when the run has no tiers)."""
    tiers = cfg.tiers.value if cfg.tiers else None
    return {"tiers": tiers} if tiers else {}

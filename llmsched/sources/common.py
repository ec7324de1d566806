"""What several kinds of source read from the run config alike: its length distribution and its SLO tiers."""
from __future__ import annotations

import math

from ..bounds import MAX_REQUESTS
from ..workload.lengths.length_presets import length_preset
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


def schedule_span(cfg) -> tuple[int | None, float | None]:
    """How much of the run's rate schedule to draw: ``num_requests`` or ``duration`` as given, else a schedule that
    ends (stages) to its end; a burst after the arrivals end is an error."""
    schedule = cfg.rate_schedule.value
    n, duration = cfg.num_requests, cfg.duration
    if n is None and duration is None:
        if schedule.shape.end == math.inf:
            raise ValueError(f"rate_schedule {cfg.rate_schedule!r} never ends: give --num-requests or --duration "
                             f"(how many requests, or for how long)")
        duration = schedule.shape.end
    if duration is not None and float(schedule.shape.cumulative(duration)) > MAX_REQUESTS:
        raise ValueError(f"rate_schedule {cfg.rate_schedule!r} over {duration:g} s means about "
                         f"{float(schedule.shape.cumulative(duration)):.3g} requests (more than {MAX_REQUESTS:,}); "
                         f"shorten the duration")
    if duration is not None and n is None and float(schedule.shape.cumulative(duration)) < 1:
        raise ValueError(f"rate_schedule {cfg.rate_schedule!r} over --duration {duration:g} s means about "
                         f"{float(schedule.shape.cumulative(duration)):.3g} requests, less than one: run longer, "
                         f"or raise the rate where the run starts")
    schedule.check_run(duration, n)
    return n, duration

"""``--rate-schedule``: the run's lengths arriving at a piecewise-constant rate, for a count or a duration."""
from __future__ import annotations

from ..workload.workload import Workload
from .common import length_dist, tier_args

NAME = "rate-schedule"


def applies(cfg) -> bool:
    return bool(cfg.rate_schedule)


def build(cfg):
    if cfg.num_requests is None and cfg.duration is None:
        raise ValueError(f"rate_schedule {cfg.rate_schedule!r} needs num_requests or duration (--num-requests "
                         f"or --duration)")
    return Workload(cfg.rate_schedule.value, length_dist(cfg), num_requests=cfg.num_requests, duration=cfg.duration,
                    max_total_tokens=cfg.max_total_tokens, seed=cfg.seed, **tier_args(cfg)).source()

"""``--rate-schedule``: the run's lengths arriving at a rate that varies in time (steps, stages, diurnal, bursts), for a count, a duration or the schedule's own end."""
from __future__ import annotations

from ..workload.arrivals.modulated import scheduled_arrivals
from ..workload.workload import Workload
from .common import length_dist, schedule_span, tier_args

NAME = "rate-schedule"


def applies(cfg) -> bool:
    return bool(cfg.rate_schedule)


def build(cfg):
    n, duration = schedule_span(cfg)
    return Workload(scheduled_arrivals(cfg.rate_schedule.value.shape, cfg.arrival, cfg.cv,
                               cfg.rate_schedule.value.load_type), length_dist(cfg),
                    num_requests=n, duration=duration, max_total_tokens=cfg.max_total_tokens, seed=cfg.seed,
                    **tier_args(cfg)).source()

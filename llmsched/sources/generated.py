"""A length preset (or --lengths) with --arrival arrivals at --rate: the source of every run no other kind takes."""
from __future__ import annotations

from ..workload.workload import generated_workload
from .common import length_dist, tier_args

NAME = "generated"


def applies(cfg) -> bool:
    return True


def build(cfg):
    if cfg.rate is None:
        raise ValueError("a generated workload needs rate (--rate, requests/s)")
    n = cfg.num_requests if cfg.num_requests or cfg.duration else 1000
    return generated_workload(length_dist(cfg), rate=cfg.rate, num_requests=n, duration=cfg.duration,
                              arrival=cfg.arrival, cv=cfg.cv, max_total_tokens=cfg.max_total_tokens,
                              seed=cfg.seed, **tier_args(cfg)).source()

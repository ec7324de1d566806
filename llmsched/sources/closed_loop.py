"""``--concurrency``: a closed loop that keeps so many requests in flight, each user's next request sent
--think-time after its last one ends."""
from __future__ import annotations

from ..workload.workload import ClosedLoop
from .common import length_dist, tier_args

NAME = "closed-loop"


def applies(cfg) -> bool:
    return cfg.concurrency is not None


def build(cfg):
    check_count(cfg)
    return ClosedLoop(cfg.concurrency, length_dist(cfg), cfg.num_requests, seed=cfg.seed,
                      max_total_tokens=cfg.max_total_tokens, think_time=cfg.think_time, **tier_args(cfg))


def check_count(cfg) -> None:
    """A closed loop sends a fixed number of requests in all: the run must say how many."""
    if cfg.num_requests is None:
        raise ValueError("concurrency (a closed loop) needs num_requests, how many requests it sends in all")

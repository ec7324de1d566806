"""``--concurrency`` with ``--turns`` > 1: a closed loop of user sessions, each prompt carrying the conversation so
far (workload/generators/closed_sessions.py)."""
from __future__ import annotations

from ..workload.generators.closed_sessions import DrawnSessions, SessionClosedLoop
from .closed_loop import check_count
from .common import length_dist, tier_args

NAME = "sessions"


def applies(cfg) -> bool:
    return cfg.concurrency is not None and (cfg.turns or 1) > 1


def build(cfg):
    check_count(cfg)
    plan = DrawnSessions(length_dist(cfg), cfg.turns, cfg.num_requests, cfg.concurrency, seed=cfg.seed,
                         max_total_tokens=cfg.max_total_tokens, **tier_args(cfg))
    return SessionClosedLoop(cfg.concurrency, plan, cfg.num_requests, cfg.think_time, plan.describe())

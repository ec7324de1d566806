"""``--workload shared-prefix``: inference-perf's shared_prefix generator (workload/generators/shared_prefix.py) in an
open or a closed loop."""
from __future__ import annotations

from ..workload.arrivals.modulated import scheduled_arrivals
from ..workload.generators.shared_prefix import NAME as SHARED_PREFIX, SharedPrefix, open_loop_rate
from .common import schedule_span, tier_args

NAME = SHARED_PREFIX


def applies(cfg) -> bool:
    return cfg.workload == SHARED_PREFIX and not cfg.lengths


def build(cfg):
    if cfg.max_total_tokens is not None:
        raise ValueError(f"max_total_tokens caps generated lengths; {SHARED_PREFIX}'s lengths are its parameters "
                         f"(--wl-param system_prompt_len=..., question_len=..., output_len=...): drop it")
    generator = SharedPrefix.from_params(cfg.workload_params, cfg.seed)
    if cfg.concurrency is not None:
        return generator.closed_loop(cfg.concurrency, cfg.num_requests, cfg.think_time, cfg.turns, **tier_args(cfg))
    if cfg.rate_schedule:
        n, duration = schedule_span(cfg)
        process = scheduled_arrivals(cfg.rate_schedule.value.shape, cfg.arrival, cfg.cv,
                                     cfg.rate_schedule.value.load_type)
        return generator.open_loop(num_requests=n, duration=duration, process=process, **tier_args(cfg))
    n = None if cfg.duration is not None else cfg.num_requests or 1000
    return generator.open_loop(open_loop_rate(cfg.rate), n, cfg.duration, cfg.arrival, cfg.cv, **tier_args(cfg))

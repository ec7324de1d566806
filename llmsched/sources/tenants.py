"""``--tenants``: one generated arrival stream per tenant (its own rate, and length preset where it names one),
merged in time order."""
from __future__ import annotations

from ..workload.lengths.length_presets import length_preset
from ..workload.tenants.streams import tenant_workloads
from .common import length_dist, schedule_span, tier_args

NAME = "tenants"


def applies(cfg) -> bool:
    return bool(cfg.tenants)


def build(cfg):
    extra = tier_args(cfg)
    if cfg.rate_schedule:  # the schedule is the run's total rate, shared in the tenants' rate ratios
        n, duration = schedule_span(cfg)
        extra["shape"] = cfg.rate_schedule.value.shape
    else:
        n = cfg.num_requests if cfg.num_requests or cfg.duration else 1000
        n, duration = None if cfg.duration else n, cfg.duration
    return tenant_workloads(cfg.tenants.value, lambda preset: tenant_lengths(cfg, preset),
                            num_requests=n, duration=duration, arrival=cfg.arrival, cv=cfg.cv,
                            max_total_tokens=cfg.max_total_tokens, seed=cfg.seed, **extra)


def tenant_lengths(cfg, preset: str | None):
    """A tenant's length distribution: its own preset, else the run's."""
    return length_preset(preset) if preset else length_dist(cfg)

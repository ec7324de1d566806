"""``--trace``: a real trace replayed (at its own pace, or rescaled to --rate); a trace with a tenant column gives
its requests their tenants, weighted by --tenants."""
from __future__ import annotations

from ..hardware.models import model as model_preset
from ..workload.tenants.streams import trace_tenants
from ..workload.traces.trace_time import play
from ..workload.workload import read_arrival_trace, replay
from .common import tier_args

NAME = "trace"


def applies(cfg) -> bool:
    return bool(cfg.trace)


def build(cfg):
    """A trace replay; when the trace names each row's tenant (a ``tenant`` column) its requests carry them, with
    the weights and priorities ``tenants`` gives (weight 1 each without it)."""
    trace = read_arrival_trace(cfg.trace, vocab_size=vocab_size(cfg), clock=cfg.latency_boundary)
    if cfg.duration is not None or cfg.rate_schedule or cfg.time_scale is not None:  # the trace played in time
        schedule = cfg.rate_schedule.value if cfg.rate_schedule else None
        if schedule is not None:
            schedule.check_run(cfg.duration, cfg.num_requests or (None if cfg.duration else len(trace)))
        source = play(trace, target_rate=None if cfg.time_scale is not None else cfg.rate, time_scale=cfg.time_scale,
                      shape=None if schedule is None else schedule.shape, num_requests=cfg.num_requests,
                      duration=cfg.duration, max_total_tokens=cfg.max_total_tokens, seed=cfg.seed,
                      block_size=cfg.block_size, **tier_args(cfg)).source()
    else:
        source = replay(trace, target_rate=cfg.rate, num_requests=cfg.num_requests,
                        max_total_tokens=cfg.max_total_tokens, seed=cfg.seed, block_size=cfg.block_size,
                        **tier_args(cfg)).source()
    tenants = getattr(trace, "tenants", None)  # a JSONL trace of prompts has no tenant column
    if tenants is None:
        if cfg.tenants:
            raise ValueError(f"--tenants {cfg.tenants}: the trace {trace.source} has no tenant column to say whose "
                             f"each request is; add one (a column named tenant) or drop --tenants")
        return source
    return trace_tenants(source, tenants, cfg.tenants.value if cfg.tenants else None,
                         str(trace.source))


def vocab_size(cfg) -> int | None:
    """The run's model's vocabulary, which bounds a trace's token ids; None for a model name that build_replicas
    will refuse with its own error."""
    try:
        return model_preset(cfg.model).vocab
    except ValueError:
        return None

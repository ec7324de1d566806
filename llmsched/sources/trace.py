"""``--trace``: a real trace replayed (at its own pace, or rescaled to --rate); a trace with a tenant column gives
its requests their tenants, weighted by --tenants. With --concurrency N, or for a benchmark's log whose client held
a fixed number in flight (``JsonlTrace.in_flight``: vllm bench serve's --max-concurrency, GuideLLM's concurrent
strategies), its requests are replayed in order as a closed loop instead: N in flight, the next sent when one
ends."""
from __future__ import annotations

from ..hardware.models import model as model_preset
from ..workload.lengths.distributions import Empirical
from ..workload.tenants.streams import trace_tenants
from ..workload.traces.trace_time import play
from ..workload.workload import ClosedLoop, read_arrival_trace, replay
from .common import tier_args

NAME = "trace"


def applies(cfg) -> bool:
    return bool(cfg.trace)


def build(cfg):
    """A trace replay; when the trace names each row's tenant (a ``tenant`` column) its requests carry them, with
    the weights and priorities ``tenants`` gives (weight 1 each without it)."""
    client = cfg.bench_command.value if cfg.bench_command else None
    trace = read_arrival_trace(cfg.trace, vocab_size=vocab_size(cfg), clock=cfg.latency_boundary, client=client)
    source = replayed(cfg, trace)
    sent = getattr(trace, "sent_before", None)
    if sent is not None:  # the prompt the benchmark sent before the run: experiment.run warms the caches with it
        source.sent_before = sent
    turns = getattr(trace, "turns", None)
    if turns is not None:  # a conversation log's: a later turn waits for the one it follows (workload/held_turns.py)
        source.turns = turns
    return source


def replayed(cfg, trace):
    """``build``'s source of the trace read."""
    in_flight = cfg.concurrency or getattr(trace, "in_flight", None)
    if in_flight is not None:
        return closed_replay(cfg, trace, in_flight)
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


def closed_replay(cfg, trace, in_flight: int):
    """The trace's requests in order (their lengths and contents), ``in_flight`` of them at once."""
    own = cfg.concurrency is None  # the log's own client cap, not --concurrency
    given = [name for name, value in (("--rate", cfg.rate), ("--duration", cfg.duration),
                                      ("--rate-schedule", cfg.rate_schedule), ("--time-scale", cfg.time_scale))
             if value is not None and value != ""]
    if own and given:
        raise ValueError(f"{trace.source}: its client held {in_flight} requests in flight (a closed loop), so it "
                         f"is replayed as one, which has no arrival rate; drop {given[0]}")
    why = ("a trace whose rows name their tenants" if getattr(trace, "tenants", None) is not None else
           "a trace of sessions, whose later turns follow their first request" if getattr(trace, "follow_ups", None)
           is not None else None)
    if why:
        raise ValueError(f"{trace.source}: {why} cannot be replayed as a closed loop; drop --concurrency")
    n = cfg.num_requests or len(trace)
    if n > len(trace):
        raise ValueError(f"num_requests {n}: the trace {trace.source} has only {len(trace)} requests; ask for at "
                         f"most {len(trace)} (or leave --num-requests out to replay it whole)")
    contents = getattr(trace, "contents", None)
    return ClosedLoop(in_flight, Empirical.from_trace(trace, draw="sequential"), n, seed=cfg.seed,
                      max_total_tokens=cfg.max_total_tokens, think_time=cfg.think_time, contents=contents,
                      **tier_args(cfg))

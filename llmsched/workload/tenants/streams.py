"""Tenants from a one-line spec, each its own arrival stream, merged in time order into one run's requests.

``heavy:rate=8,light:rate=0.5:weight=2:workload=azure-conv:priority=0`` gives two tenants: ``rate`` (requests/s)
and ``workload`` (a length preset; default the run's) shape each one's stream, ``weight`` is its share in fair
sharing (default 1) and ``priority`` its priority class (an integer, lower is more urgent, as in vLLM). A tenant's
stream is seeded from the run's seed and its name, so it draws the same requests whoever else shares the run (the
light tenant alone and beside the heavy one get the same arrivals). A replayed trace names each row's tenant in a
``tenant`` column instead; its tenants then take only ``weight`` and ``priority``.
"""
from __future__ import annotations

import heapq
import math
import zlib
from collections.abc import Callable, Sequence
import dataclasses
from dataclasses import dataclass

import numpy as np

from llmsched.bounds import MAX_WEIGHT, MIN_RATE, MIN_WEIGHT
from llmsched.request import DEFAULT_TIER, Request, Tenant, Tier
from llmsched.workload.chunks import CHUNK
from llmsched.workload.arrivals.modulated import scheduled_arrivals
from llmsched.workload.arrivals.rate_shape import RateShape
from llmsched.workload.tenants.spec_fields import key_value, named_parts
from llmsched.workload.tenants.tiers import parse_priority
from llmsched.workload.workload import LazyOpenLoop, StreamedOpenLoop, Workload, check_seed, generated_workload

KEYS = ("rate", "weight", "workload", "priority")
EXAMPLE = "'heavy:rate=8,light:rate=0.5:weight=2'"


@dataclass(frozen=True)
class TenantStream:
    """A tenant and its own arrivals: ``rate`` requests/s of the length preset ``workload`` (None: the run's)."""

    tenant: Tenant
    rate: float | None = None
    workload: str | None = None

    @property
    def name(self) -> str:
        return self.tenant.name

    def describe(self) -> dict:
        t = self.tenant
        return {"name": t.name, "weight": t.weight, "priority": t.priority, "rate": self.rate,
                "workload": self.workload}


def parse_tenants(spec: str) -> tuple[TenantStream, ...]:
    """``name[:key=value]...`` separated by commas; keys rate, weight, workload, priority."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"tenant spec must be a non-empty string like {EXAMPLE}, got {spec!r}")
    out: list[TenantStream] = []
    for name, fields in named_parts(spec, "tenant"):
        values: dict = {}
        for field in fields:
            key, text = key_value(f"tenant {name!r}", field, KEYS, values)
            if key == "priority":
                values[key] = parse_priority(f"tenant {name!r}", text)
            elif key == "workload":
                if not text:
                    raise ValueError(f"tenant {name!r}: workload= needs a length preset name (see `llmsched "
                                     f"presets`)")
                values[key] = text
            else:
                values[key] = positive(name, key, text)
        out.append(TenantStream(Tenant(name, values.get("weight", 1.0), values.get("priority")),
                                values.get("rate"), values.get("workload")))
    return tuple(out)


def positive(name: str, key: str, text: str) -> float:
    """A rate (requests/s, at least bounds.MIN_RATE, as --rate) or a weight (within bounds.MIN_WEIGHT and
    MAX_WEIGHT: a share a million times another's is a typo, and would overflow the fairness figures)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"tenant {name!r}: {key}={text!r} is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        what = "requests/s" if key == "rate" else "share of service"
        raise ValueError(f"tenant {name!r}: {key} must be a positive finite number ({what}), got {text!r}")
    if key == "rate" and value < MIN_RATE:
        raise ValueError(f"tenant {name!r}: rate={text} must be at least {MIN_RATE:g} requests/s (a mean gap of at "
                         f"most 11.6 days), as --rate")
    if key == "weight" and not MIN_WEIGHT <= value <= MAX_WEIGHT:
        raise ValueError(f"tenant {name!r}: weight={text} must be from {MIN_WEIGHT:g} to {MAX_WEIGHT:g} (a share "
                         f"relative to the other tenants')")
    return value


def check_tenants(tenants) -> tuple[TenantStream, ...]:
    """A spec string or a sequence of TenantStream (or Tenant), as a tuple with distinct names."""
    if isinstance(tenants, str):
        return parse_tenants(tenants)
    streams = tuple(TenantStream(t) if isinstance(t, Tenant) else t for t in tenants)
    if not streams or not all(isinstance(s, TenantStream) for s in streams):
        raise ValueError(f"tenants must be a spec string like {EXAMPLE} or a non-empty sequence of TenantStream, "
                         f"got {tenants!r}")
    names = [s.name for s in streams]
    if len(set(names)) != len(names):
        raise ValueError(f"tenant names must be distinct, got {names}")
    return streams


def tenant_spec(streams: Sequence[TenantStream]) -> str:
    """The one-line spec of ``streams`` (``parse_tenants`` reads it back to the same streams)."""
    parts = []
    for s in check_tenants(streams):
        t = s.tenant
        fields = [s.name] + ([f"rate={s.rate!r}"] if s.rate is not None else []) + \
            ([f"weight={t.weight!r}"] if t.weight != 1.0 else []) + \
            ([f"workload={s.workload}"] if s.workload else []) + \
            ([f"priority={t.priority}"] if t.priority is not None else [])
        parts.append(":".join(fields))
    return ",".join(parts)


def total_rate(streams: Sequence[TenantStream]) -> float:
    """The tenants' rates added up: the run's offered rate."""
    streams = check_tenants(streams)
    missing = [s.name for s in streams if s.rate is None]
    if missing:
        raise ValueError(f"tenant {missing[0]!r} needs rate=R (requests/s): each tenant is its own arrival stream, "
                         f"e.g. --tenants {EXAMPLE}")
    return math.fsum(s.rate for s in streams)


def scaled_tenants(streams: Sequence[TenantStream], total: float) -> str:
    """The spec of ``streams`` with every rate scaled by one factor so that they add up to ``total``: the same
    mix of tenants at another load (a capacity search's probe)."""
    streams = check_tenants(streams)
    factor = total / total_rate(streams)
    return tenant_spec([dataclasses.replace(s, rate=s.rate * factor) for s in streams])


def tenant_seed(seed: int, name: str) -> int:
    """The seed of a tenant's stream: from the run's seed and the tenant's name (not its place in the spec)."""
    state = np.random.SeedSequence([check_seed(seed), zlib.crc32(name.encode())]).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(1))


def tenant_workloads(streams: Sequence[TenantStream], lengths_of: Callable[[str | None], object],
                     num_requests: int | None = None, duration: float | None = None, arrival: str = "poisson",
                     cv: float | None = None, tiers: Sequence[Tier] | str = (DEFAULT_TIER,),
                     max_total_tokens: int | None = None, seed: int = 0,
                     shape: RateShape | None = None) -> "TenantMerge":
    """Each tenant's own open loop (``lengths_of(workload)`` gives its length distribution), merged.

    With ``num_requests`` the run takes the first ``num_requests`` arrivals of the merged streams; with
    ``duration`` every arrival before it. With a rate ``shape`` (a rate schedule) the shape is the run's total
    rate over time and the tenants split it in proportion to their rates: tenant i's stream has rate
    ``shape(t) * rate_i / sum(rates)`` (the superposition of the streams has the shape's rate)."""
    streams = check_tenants(streams)
    total = total_rate(streams)
    if shape is None:
        workloads = [generated_workload(lengths_of(s.workload), s.rate, num_requests=num_requests,
                                        duration=duration, arrival=arrival, cv=cv, tiers=tiers,
                                        max_total_tokens=max_total_tokens, seed=tenant_seed(seed, s.name))
                     for s in streams]
    else:
        workloads = [Workload(scheduled_arrivals(shape.scaled(s.rate / total), arrival, cv),
                              lengths_of(s.workload), num_requests=num_requests, duration=duration, tiers=tiers,
                              max_total_tokens=max_total_tokens, seed=tenant_seed(seed, s.name))
                     for s in streams]
    return TenantMerge(workloads, [s.tenant for s in streams], num_requests)


class TenantMerge(LazyOpenLoop):
    """Several open loops, one per tenant, merged by arrival time (a tie goes to the tenant given first); request
    ids 0..n-1 in merged order. Each stream is drawn in chunks as the run reaches it."""

    def __init__(self, workloads: Sequence[Workload], tenants: Sequence[Tenant], limit: int | None = None,
                 chunk: int = CHUNK):
        self.sources = [w.source(chunk) for w in workloads]
        self.tenants = list(tenants)
        self.length_caps = tuple(c for s in self.sources for c in s.length_caps)
        total = sum(len(s) for s in self.sources)
        self.n = total if limit is None else min(limit, total)

    def initial(self):
        streams = [tagged(s.initial(), t) for s, t in zip(self.sources, self.tenants)]
        for i, (r, tenant) in enumerate(heapq.merge(*streams, key=arrival_of)):
            if i == self.n:
                return
            yield Request(i, r.arrival, r.prompt_len, r.output_len, r.tier, tenant)


class TraceTenants(LazyOpenLoop):
    """A trace replay whose rows name their tenant: request i is the i-th row's, with that tenant's weight and
    priority."""

    def __init__(self, source: StreamedOpenLoop, names: Sequence[str], tenants: dict[str, Tenant]):
        self.source = source
        self.names = names
        self.by_name = tenants
        self.length_caps = source.length_caps

    @property
    def n(self) -> int:
        return len(self.source)

    @property
    def arrival_times(self) -> np.ndarray:
        return self.source.arrival_times

    @property
    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        return self.source.lengths

    def initial(self):
        names, by_name = self.names, self.by_name
        for r in self.source.initial():
            yield Request(r.id, r.arrival, r.prompt_len, r.output_len, r.tier, by_name[names[r.id % len(names)]])


def check_trace_streams(streams: Sequence[TenantStream], where: str = "") -> None:
    """Tenants of a trace give weight and priority only: a rate or workload of their own is an error (``where``:
    where they were given, said first), as the trace gives every tenant's arrivals and lengths."""
    for s in streams:
        for key in ("rate", "workload"):
            if getattr(s, key) is not None:
                raise ValueError(f"{where}{': ' if where else ''}tenant {s.name!r}: {key}= does not apply with "
                                 f"--trace: the trace's tenant column says whose each request is and the trace "
                                 f"gives its arrivals and lengths; give weight= and priority= only")


def trace_tenants(source: StreamedOpenLoop, names: Sequence[str], streams: Sequence[TenantStream] | None,
                  where: str) -> TraceTenants:
    """The trace's tenant column ``names`` (one per row, in order) joined to the configured tenants (None: each
    name a tenant of weight 1). A configured tenant with a rate or workload of its own is an error: the trace
    gives every tenant's arrivals and lengths."""
    used = list(dict.fromkeys(names[:len(source)]))  # a tiled trace's later copies repeat these
    if streams is None:
        return TraceTenants(source, names, {n: Tenant(n) for n in used})
    check_trace_streams(streams)
    by_name = {s.name: s.tenant for s in streams}
    unknown = [n for n in used if n not in by_name]
    if unknown:
        row = names.index(unknown[0])
        raise ValueError(f"{where}: request {row} names tenant {unknown[0]!r}, which --tenants does not give "
                         f"(it gives {', '.join(by_name)}); add it to --tenants or leave --tenants out to weigh "
                         f"every tenant of the trace 1")
    return TraceTenants(source, names, by_name)


def tagged(requests, tenant: Tenant):
    for r in requests:
        yield r, tenant


def arrival_of(item) -> float:
    return item[0].arrival

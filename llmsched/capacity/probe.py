"""A probe: the deployment at one arrival rate (or one concurrency), over one or more seeds, and its verdict.

A probe offers ``DEFAULT_DURATION`` seconds of arrivals to a named workload unless the config sets
``duration`` or ``num_requests`` (a trace offers its requests, rescaled to the rate); the run stops at the last
arrival, or ``GRACE_S`` after the last measured arrival if that is later (short probes: no request is a miss
only for lack of time), and ``verdict.measure`` judges the window inside it. Over several seeds a probe meets its SLOs only if
every seed does, and reports the worst value of each metric (a latency's largest, an attainment's smallest).
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field


from ..experiment import RunConfig, build_replicas, build_source, simulate_config
from ..workload.tenants.streams import scaled_tenants, total_rate
from ..workload.workload import OpenLoop
from .slo import RATIOS, SLO
from .stability import worst
from .verdict import evaluate, failed_at_every_rate, measure, window

DEFAULT_DURATION = 600.0  # seconds of arrivals per probe of a named workload
DEFAULT_CLOSED_REQUESTS = 1000
GRACE_S = 60.0  # every measured request has at least this long (and the cool-down) to finish
MIN_PROBE_REQUESTS = 50  # a probe of a fixed duration offers at least this many requests on average


def check_base(base: RunConfig) -> None:
    """Options a capacity search sets itself, or cannot honour, are errors rather than silently overridden."""
    if base.horizon is not None:
        raise ValueError("capacity: a probe stops at its last arrival; drop horizon (set duration or "
                         "num_requests to size the probe)")
    if base.rate_schedule:
        raise ValueError("capacity: rate_schedule fixes the rates; capacity searches the rate itself, drop it")
    if not base.keep_gaps:
        raise ValueError("capacity needs every inter-token gap; drop --sketch")


def probe_config(base: RunConfig, x: float, seed: int) -> RunConfig:
    """``base`` at rate ``x`` req/s (``at_rate``; concurrency ``x`` in a closed loop) and ``seed``."""
    if base.concurrency is not None:
        return dataclasses.replace(base, concurrency=int(x), seed=seed,
                                   num_requests=base.num_requests or DEFAULT_CLOSED_REQUESTS)
    changes = {"seed": seed}
    if not base.trace and base.duration is None and base.num_requests is None:
        changes["duration"] = DEFAULT_DURATION
    return dataclasses.replace(at_rate(base, x), **changes)


def at_rate(base: RunConfig, x: float) -> RunConfig:
    """``base`` offering ``x`` req/s: its rate, or with tenants their total, every tenant's rate scaled by one
    factor (the same mix, as a deployment's tenants grow together)."""
    if base.tenants and not base.trace:
        return dataclasses.replace(base, tenants=scaled_tenants(base.tenants.value, float(x)))
    return dataclasses.replace(base, rate=float(x))


def start_rate(base: RunConfig) -> float | None:
    """The rate (concurrency) the config itself offers, where a search starts: with tenants, their total rate."""
    if base.concurrency is not None:
        return base.concurrency
    if base.tenants and not base.trace:
        return total_rate(base.tenants.value)
    return base.rate


def min_rate(base: RunConfig) -> float:
    """The lowest rate worth probing: one that still offers MIN_PROBE_REQUESTS in a fixed-duration probe."""
    if base.concurrency is not None:
        return 1.0
    if base.trace or base.num_requests is not None:
        return 0.0  # the probe's size is a request count, whatever the rate
    return MIN_PROBE_REQUESTS / (base.duration or DEFAULT_DURATION)


def measure_point(cfg: RunConfig) -> dict:
    """Simulate one probe config and return its JSON-clean record (see ``verdict.measure``)."""
    fleet = cfg.runs_as_fleet  # pools of their own
    replicas = None if fleet else build_replicas(cfg)
    source = build_source(cfg)
    horizon = None
    if isinstance(source, OpenLoop) and len(source):
        arrivals = source.arrival_times
        _, end = window(arrivals, cfg.warmup, cfg.cooldown)
        horizon = max(float(arrivals.max()), end + GRACE_S) or None
    if fleet:  # each probe runs the fleet's pools, scale events and autoscaler at its rate
        from ..fleet_setup import simulate_fleet_config
        result, _ = simulate_fleet_config(cfg, source, horizon=horizon, keep_gaps=True)
    else:
        result = simulate_config(cfg, source, replicas, horizon=horizon, keep_gaps=True)
    return json.loads(json.dumps(measure(result, cfg.warmup, cfg.cooldown)))


@dataclass
class Probe:
    rate: float  # req/s, or the concurrency of a closed loop
    seeds: tuple
    verdict: str  # stable | backlogged | overloaded (the worst over seeds)
    values: dict  # per SLO key: the worst value over seeds
    meets: bool
    failed: list[str]
    throughput_rps: float  # served requests/s in the window, mean over seeds
    records: list[dict] = field(repr=False, default_factory=list)
    # SLOs that the requests no rate can serve fail on their own (a seed's floor, verdict.floor): failed at every rate
    hopeless: list[str] = field(default_factory=list)

    def to_dict(self, records: bool = True) -> dict:
        d = {"rate": self.rate, "seeds": list(self.seeds), "verdict": self.verdict, "meets": self.meets,
             "failed": self.failed, "values": self.values, "throughput_rps": self.throughput_rps}
        if self.hopeless:
            d["failed_at_every_rate"] = self.hopeless
        if records:
            d["records"] = self.records
        return d


def make_probe(x: float, seeds, records: list[dict], slos: list[SLO]) -> Probe:
    outcomes = [evaluate(r, slos) for r in records]
    failed = list(dict.fromkeys(f for _, fs in outcomes for f in fs))
    values = {}
    for slo in slos:
        vals = [r["metrics"][slo.key] for r in records]
        pick = min if slo.metric in RATIOS else max
        values[slo.key] = math.nan if any(math.isnan(v) for v in vals) else pick(vals)
    # a rate meets only if every seed does: one seed's floor failing an SLO fails it at every rate, this one too
    # (a probe's own stability verdict can miss the growth its never-served requests cause: verdict.py)
    hopeless = list(dict.fromkeys(f for r in records for f in failed_at_every_rate(r, slos)))
    failed += [f for f in hopeless if f not in failed]
    return Probe(rate=x, seeds=tuple(seeds), verdict=worst(r["stability"]["verdict"] for r in records),
                 values=values, meets=not failed, failed=failed,
                 throughput_rps=sum(r["throughput"]["requests_per_s"] for r in records) / len(records),
                 records=records, hopeless=hopeless)


def measure_all(configs: list[RunConfig], executor=None, cache=None) -> list[dict]:
    """Records for ``configs`` in order: from the cache where present, the rest through ``executor``."""
    records: list = [cache.get(c) if cache is not None else None for c in configs]
    todo = [i for i, r in enumerate(records) if r is None]
    if todo:
        todo_cfgs = [configs[i] for i in todo]
        fresh = executor.map(measure_point, todo_cfgs) if executor is not None else \
            [measure_point(c) for c in todo_cfgs]
        for i, rec in zip(todo, fresh):
            records[i] = rec
            if cache is not None:
                cache.put(configs[i], rec)
    return records


def run_probe(cfg: RunConfig, slos: list[SLO], seeds=(0,), executor=None, cache=None) -> Probe:
    """``cfg`` at its own rate (or concurrency) over ``seeds``."""
    check_base(cfg)
    x = cfg.concurrency if cfg.concurrency is not None else cfg.rate
    if x is None:
        raise ValueError("run_probe: the config needs a rate (or a concurrency)")
    records = measure_all([probe_config(cfg, x, s) for s in seeds], executor, cache)
    return make_probe(x, seeds, records, slos)

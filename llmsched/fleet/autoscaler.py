"""An autoscaler: a controller of one pool (``FleetState``'s controllers) that looks at the pool on its own clock and
sets its size through ``FleetState.scale``, within ``[min_replicas, max_replicas]``.

A policy (hpa.py, kpa.py, dynamo_sla.py, saturation.py, predictive.py) is a subclass with its name, the source it
follows, its parameters' defaults (``PARAMS``, checked by name and type like a scheduler's) and ``decide(now)``,
which returns the pool's new size (or None: no change). What it reads of the pool is what a real controller reads
of its pods: the replicas serving (their queues and KV use, as vLLM's metrics report them), the replicas still
starting (pods not ready) and the size it asked for (the Deployment's replica count: starting and serving replicas;
draining ones are being deleted and count for nothing).

Scale-down gives up replicas as ``FleetState.scale`` does (starting ones first, then the newest serving); a serving
replica given up drains: it finishes every request it holds, however long that takes. This is a choice, not vLLM's
default: vLLM 0.32 aborts its in-flight requests on SIGTERM unless ``--shutdown-timeout SECONDS`` lets it drain for
up to that long (vllm/v1/engine/core.py ``_handle_shutdown``; vllm-project/vllm#36666), and Kubernetes kills the pod
after ``terminationGracePeriodSeconds`` (30 s by default; KServe's LLM services set 60 s, a 15-s preStop and a 45-s
drain: kserve/kserve#5496). Here the drain is unbounded and nothing migrates: a deployment that sets the drain
longer than any request's remaining time, so every request of a scaled-down replica finishes where it started and
the replica is billed until it does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .lifecycle import SERVING, START_PHASES


@dataclass
class ScalingContext:
    """What a policy may know beyond the pool itself: the run's arrival-rate forecast (a RateShape, or a constant
    rate; None for a trace at its own pace), the SLO targets of the run's tiers (seconds, None: no target), the mean
    input and output lengths of the run's requests where known before it starts, and how many pools share this
    pool's role (a pool sized from the role's load takes its share)."""

    forecast: object = None
    ttft: float | None = None
    tpot: float | None = None
    isl: float | None = None
    osl: float | None = None
    role_pools: int = 1


@dataclass
class RoleLoad:
    """A role's requests as the fleet routed them (arrivals, their prompt tokens) and as they left it (finished,
    their output tokens): what a planner reads off the front end's counters."""

    arrived: int = 0
    prompt_tokens: int = 0
    finished: int = 0
    output_tokens: int = 0


class Autoscaler:
    name = ""
    summary = ""
    source = ""
    PARAMS: dict = {}
    DURATIONS: tuple = ()  # parameters that are seconds > 0 (windows, periods)
    POSITIVE: tuple = ()   # other parameters that must be > 0
    CHOICES: dict = {}     # parameter -> its valid values

    def __init__(self, pool: str, min_replicas: int, max_replicas: int, params: dict | None = None,
                 context: ScalingContext | None = None):
        if not 1 <= min_replicas <= max_replicas:
            raise ValueError(f"--min-replicas {min_replicas} and --max-replicas {max_replicas}: give 1 <= min <= max")
        self.pool = pool
        self.min_replicas, self.max_replicas = min_replicas, max_replicas
        self.params = {**self.PARAMS, **self.checked(params or {})}
        self.context = context or ScalingContext()
        self.fleet = self.schedule = None
        self.decisions = self.ups = self.downs = 0
        self.history: list[tuple[float, int]] = []  # (time, size asked for) at every change

    @classmethod
    def checked(cls, params: dict) -> dict:
        """``params`` checked by name and type against ``PARAMS``, windows > 0 and choices among their values; an
        error names the option."""
        out = {}
        for key, value in params.items():
            if key not in cls.PARAMS:
                raise ValueError(f"--autoscaler-param {key}: autoscaler {cls.name!r} has no parameter {key!r}; its "
                                 f"parameters are: {', '.join(sorted(cls.PARAMS))}")
            given = value
            value = typed(key, value, cls.PARAMS[key], cls.name)
            out[key] = value
            if key in cls.DURATIONS and not value > 0:
                raise ValueError(f"--autoscaler-param {key}={given!r}: the {key} of autoscaler {cls.name!r} is a "
                                 f"window or period in seconds and must be > 0")
            if key in cls.POSITIVE and not value > 0:
                raise ValueError(f"--autoscaler-param {key}={given!r}: the {key} of autoscaler {cls.name!r} must be > 0")
            if key in cls.CHOICES and value not in cls.CHOICES[key]:
                raise ValueError(f"--autoscaler-param {key}={value!r}: autoscaler {cls.name!r} knows no {key} "
                                 f"{value!r}; give one of {', '.join(map(str, cls.CHOICES[key]))}")
        return out

    # --- the controller's life ----------------------------------------------
    def start(self, fleet, schedule) -> None:
        self.fleet, self.schedule = fleet, schedule
        self.begin(0.0)

    def begin(self, now: float) -> None:
        """Schedule the first tick (a policy with a clock of its own overrides this)."""
        self.schedule(now + self.period, self.tick)

    @property
    def period(self) -> float:
        raise NotImplementedError

    def tick(self, now: float) -> None:
        self.act(self.decide(now), now)
        self.schedule(now + self.period, self.tick)

    def act(self, desired: int | None, now: float) -> None:
        """Set the pool to ``desired`` (clamped to the bounds) when it differs from the size asked for."""
        self.decisions += 1
        if desired is None:
            return
        n = min(self.max_replicas, max(self.min_replicas, int(desired)))
        current = self.size
        if n != current:
            self.fleet.scale(self.pool, n, now)
            self.ups += n > current
            self.downs += n < current
            self.history.append((now, n))

    def decide(self, now: float) -> int | None:
        raise NotImplementedError

    # --- what it reads of its pool ---------------------------------------------
    @property
    def state(self):
        return self.fleet.pools[self.pool]

    @property
    def size(self) -> int:
        """The replicas asked for: starting and serving (the Deployment's replica count)."""
        return len(self.state.active())

    def serving(self) -> list:
        """The pool's serving replicas (ready pods: they report metrics)."""
        pool = self.state
        return [rep for life, rep in zip(pool.lives, pool.replicas) if life.state == SERVING]

    def starting(self) -> int:
        """Replicas asked for that do not serve yet (pods not ready)."""
        return sum(1 for life in self.state.lives if life.state in START_PHASES)

    def load(self) -> RoleLoad:
        return self.fleet.role_load[self.state.spec.role]

    def describe(self) -> dict:
        return {"policy": self.name, "pool": self.pool, "min_replicas": self.min_replicas,
                "max_replicas": self.max_replicas, "params": dict(self.params), "source": self.source,
                "decisions": self.decisions, "scale_ups": self.ups, "scale_downs": self.downs,
                "sizes": [{"t": t, "replicas": n} for t, n in self.history]}


class ScrapingAutoscaler(Autoscaler):
    """A policy that decides from metrics sampled every ``scrape`` seconds (its parameter) on a clock apart from its
    decisions', as a metrics server or a queue-proxy reports them: the first sample at the start, before the first
    decision; ``take_sample(now)`` is one scrape of the policy's metric."""

    def begin(self, now: float) -> None:
        self.schedule(now, self.scrape)
        super().begin(now)

    def scrape(self, now: float) -> None:
        self.take_sample(now)
        self.schedule(now + self.params["scrape"], self.scrape)

    def take_sample(self, now: float) -> None:
        raise NotImplementedError


def typed(key: str, value, default, name: str):
    """``value`` as its default's type (an int for a float is a float); else a ValueError naming the option."""
    kind = type(default)
    ok = (isinstance(value, bool) if kind is bool else
          isinstance(value, str) if kind is str else
          isinstance(value, int) and not isinstance(value, bool) if kind is int else
          isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value))
    if not ok:
        what = {bool: "true or false", str: "a name", int: "an integer", float: "a finite number"}[kind]
        raise ValueError(f"--autoscaler-param {key}={value!r}: the {key} of autoscaler {name!r} must be {what} "
                         f"(default {default!r})")
    return float(value) if kind is float else value


def metric_of(rep, metric: str) -> float:
    """A serving replica's metric as vLLM's /metrics reports it: ``queue`` num_requests_waiting (with those waiting
    for their KV from a tier below the GPU: vLLM keeps them in its waiting queue), ``running``
    num_requests_running, ``kv`` gpu_cache_usage_perc (0-1), ``concurrency`` requests in flight (waiting, running,
    swapped: what a Knative queue-proxy counts)."""
    if metric == "queue":
        return float(len(rep.waiting) + len(rep.loading))
    if metric == "running":
        return float(len(rep.running))
    if metric == "kv":
        return float(rep.kv.utilisation)
    if metric == "concurrency":
        return float(rep.num_outstanding)
    raise ValueError(f"unknown metric {metric!r}")


def ceil(x: float) -> int:
    """math.ceil that forgives a float's last bits (3.0000000000000004 replicas are 3)."""
    return math.ceil(x - 1e-9)


@dataclass
class Samples:
    """Timed samples of a value, kept for ``span`` seconds (a metric's window)."""

    span: float
    items: list = field(default_factory=list)

    def add(self, t: float, value) -> None:
        self.items.append((t, value))
        cut = t - self.span
        k = 0
        while k < len(self.items) and self.items[k][0] <= cut:
            k += 1
        if k:
            del self.items[:k]

    def within(self, now: float, seconds: float) -> list:
        return [v for t, v in self.items if t > now - seconds]

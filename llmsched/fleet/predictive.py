"""``predictive``: this project's own autoscaler, which scales ahead of its cold start from the run's rate forecast
(no cited system; what a planner that knows the day's schedule can do).

Every ``interval`` seconds (30) it looks at the forecast rate over the time a replica asked for now could still
matter, ``[now, now + cold start + 2 x interval]`` (a replica asked for at the next tick serves from then + its cold
start), takes the highest rate there (the pool's share of it, when several pools serve its role), and asks for

    replicas = ceil(highest rate / (capacity a replica x utilization))

``capacity`` (requests/s a replica carries within the SLOs) is given (``capacity=``, e.g. a capacity search's or a
plan's measured figure), or else estimated from the replica's batch-time model (replica_sizing.py: its time split
between prefills and decodes at the ITL target ``itl``, default the run's TPOT target, else 0.05 s) at the workload's
mean input and output lengths: the run's requests' where the source holds them (a forecast of the lengths as the
schedule is of the rate), else those observed so far (the output lengths of the requests that finished: short ones
first, so an early estimate runs high). ``utilization``
(0.8) leaves headroom for the arrivals' burstiness. The forecast is the run's ``--rate-schedule`` (its bursts
included: a schedule is known in advance) or its constant ``--rate``; a trace replayed at its own pace has none,
and this autoscaler refuses it.
"""
from __future__ import annotations

import numpy as np

from .autoscaler import Autoscaler, ceil
from .dynamo_sla import DYNAMO_ITL
from .replica_sizing import request_rate

GRID = 1.0  # seconds between the forecast's samples


class Predictive(Autoscaler):
    name = "predictive"
    summary = "ours: the rate forecast over the next cold start + 2 intervals, over a replica's capacity"
    source = "this project (docs/autoscaling.md)"
    PARAMS = {"interval": 30.0, "utilization": 0.8, "capacity": 0.0, "itl": 0.0}
    DURATIONS = ("interval",)
    POSITIVE = ("utilization",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        p = self.params
        if p["utilization"] > 1 or p["capacity"] < 0 or p["itl"] < 0:
            raise ValueError("--autoscaler-param utilization must be in (0, 1], capacity >= 0 req/s and itl >= 0 s")
        if self.context.forecast is None:
            raise ValueError("--autoscaler predictive scales from the run's rate forecast: give --rate-schedule (or a "
                             "constant --rate); a trace replayed at its own pace has none")

    @property
    def period(self) -> float:
        return self.params["interval"]

    def begin(self, now: float) -> None:
        self.schedule(now, self.tick)  # sized for the forecast from the start

    def forecast_peak(self, now: float) -> float:
        lead = self.state.spec.durations.cold_start + 2 * self.params["interval"]
        forecast = self.context.forecast
        if isinstance(forecast, (int, float)):
            return float(forecast)
        times = np.arange(now, now + lead + GRID, GRID)
        return float(np.max(forecast.rate(times)))

    def capacity(self) -> float | None:
        if self.params["capacity"] > 0:
            return self.params["capacity"]
        load, ctx = self.load(), self.context
        isl = ctx.isl if ctx.isl is not None else load.prompt_tokens / load.arrived if load.arrived else None
        osl = ctx.osl if ctx.osl is not None else load.output_tokens / load.finished if load.finished else None
        if isl is None or osl is None:
            return None
        itl = self.params["itl"] or ctx.tpot or DYNAMO_ITL
        return request_rate(self.state.replicas[0], isl, osl, itl)

    def decide(self, now: float) -> int | None:
        capacity = self.capacity()
        if not capacity:
            return None
        peak = self.forecast_peak(now) / self.context.role_pools
        return ceil(peak / (capacity * self.params["utilization"]))


POLICY = Predictive

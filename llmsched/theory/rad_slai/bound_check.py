"""Simulated check of the capacity bound: does the number of pending requests stay bounded or grow?"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...batchtime.base import BatchTimeModel
from ...engine.replica import Replica, ReplicaConfig
from ...metrics.steps import StepLog
from ...routing.registry import make_router
from ...schedulers.registry import create_scheduler
from ...sim.simulator import simulate
from ...workload.arrivals.processes import Poisson
from ...workload.lengths.distributions import LengthDist
from ...workload.workload import Workload


@dataclass(frozen=True)
class QueueTrace:
    """Pending requests Q(t) (arrived, not finished) at evenly spaced times over a run."""

    times: np.ndarray
    pending: np.ndarray
    rate: float
    throughput: float  # finished requests per second over the run

    def slope(self, start_fraction: float = 0.5) -> float:
        """Least-squares growth of Q(t) in requests/s over the run's last part."""
        keep = self.times >= self.times[-1] * start_fraction
        return float(np.polyfit(self.times[keep], self.pending[keep], 1)[0])


def queue_trace(model: BatchTimeModel, lengths: LengthDist, rate: float, duration: float, scheduler: str = "rad",
                params: dict | None = None, replicas: int = 1, router: str = "random", num_blocks: int = 10**6,
                max_num_seqs: int = 1024, seed: int = 0, points: int = 200) -> QueueTrace:
    """Poisson(rate) arrivals for ``duration`` seconds through ``replicas`` replicas; Q(t) until the last arrival.

    The KV cache is made large (``num_blocks``), as Assumption 4 asks, so that only compute limits the rate.
    """
    reqs = Workload(Poisson(rate), lengths, duration=duration, seed=seed).requests()
    config = ReplicaConfig(num_blocks=num_blocks, max_num_seqs=max_num_seqs, max_model_len=1 << 20)
    steps = StepLog()
    reps = [Replica(i, create_scheduler(scheduler, **(params or {})), model, config, steps) for i in range(replicas)]

    class Source:
        def initial(self):
            return reqs

        def on_done(self, req, now):
            return []

    simulate(Source(), reps, make_router(router), horizon=duration, seed=seed)
    arrival = np.array([r.arrival for r in reqs])
    finish = np.array([r.finish if r.status.name == "FINISHED" else np.inf for r in reqs])
    times = np.linspace(duration / points, duration, points)
    pending = np.searchsorted(np.sort(arrival), times, side="right") - \
        np.searchsorted(np.sort(finish), times, side="right")
    return QueueTrace(times, pending.astype(float), rate, float(np.isfinite(finish).sum() / duration))


class TiledPrompts(LengthDist):
    """Assumption 3's workload: ``dist``'s prompts rounded up to a multiple of t*_lcm (outputs unchanged)."""

    def __init__(self, dist: LengthDist, t_lcm: int):
        if t_lcm < 1:
            raise ValueError(f"t_lcm must be >= 1, got {t_lcm}")
        self.dist, self.t_lcm = dist, int(t_lcm)

    def sample(self, n, rng):
        prompts, outputs = self.dist.sample(n, rng)
        return -(-prompts // self.t_lcm) * self.t_lcm, outputs

    def describe(self) -> dict:
        return {"kind": "tiled-prompts", "t_lcm": self.t_lcm, "of": self.dist.describe()}

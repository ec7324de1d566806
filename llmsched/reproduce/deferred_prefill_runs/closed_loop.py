"""Mohanty et al.'s experiment (Mohanty et al. §4) in the simulator: an always-backlogged closed loop and its measurements.

The client keeps ``concurrency`` requests outstanding (≥ 2C keeps at least C queued), so the server
refills to C at every phase. Throughput is measured over the backlogged stretch only: from the C-th completion
(warm-up) to the completion that issues the last request, after which the queue drains. Completion time runs
from first admission to finish (queue time excluded, §4.4), also normalised by the request's output tokens.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...batchtime.base import BatchTimeModel
from ...engine.replica import Replica
from ...experiment import RunConfig, build_replicas
from ...request import Status
from ...sim.simulator import RunResult, simulate
from ...workload.lengths.distributions import LengthDist
from ...workload.workload import ClosedLoop


@dataclass(frozen=True)
class Measured:
    K: int
    throughput: float          # requests/s over the backlogged window
    completions: int           # in that window
    mean_completion: float     # s, first admission → finish
    mean_normalised: float     # s per output token
    p95_normalised: float
    mean_running: float        # time-averaged batch occupancy over the window
    steps: int
    wall_s: float

    def as_dict(self) -> dict:
        return self.__dict__.copy()


def run_closed_loop(cfg: RunConfig, lengths: LengthDist, num_requests: int, concurrency: int | None = None,
                    seed: int = 0, batch_time: BatchTimeModel | None = None) -> RunResult:
    """Simulate ``cfg``'s replicas (scheduler, model, limits) under a closed loop of ``lengths``;
    ``batch_time`` replaces the config's batch-time model (one not in the registry, e.g. measured step times)."""
    replicas = build_replicas(cfg)
    if batch_time is not None:  # the same replicas on the given model (whether it folds decode runs is its own)
        replicas = [Replica(r.index, r.scheduler, batch_time, r.config, r.steps) for r in replicas]
    C = cfg.max_num_seqs
    M = concurrency or 2 * C
    if M < C:
        raise ValueError(f"concurrency {M} is below the batch size {C}: the paper's client is always backlogged "
                         f"(use >= 2C)")
    source = ClosedLoop(M, lengths, num_requests, seed=seed)
    result = simulate(source, replicas, seed=seed)
    result.meta = {"concurrency": M, "num_requests": num_requests, "scheduler": replicas[0].scheduler.describe()}
    return result


def measure(result: RunResult, K: int, C: int) -> Measured:
    cols = result.requests.cols
    status = np.asarray(cols["status"])
    finish = np.asarray(cols["finish"])
    done = status == int(Status.FINISHED)
    if np.any(~done):
        raise ValueError(f"{int(np.sum(~done))} requests did not finish; first reason: "
                         f"{next(iter(result.requests.reasons.values()), '?')}")
    M, N = result.meta["concurrency"], result.meta["num_requests"]
    order = np.sort(finish)
    first, last = min(C, N - 1), N - M - 1
    if last - first < 10:
        raise ValueError(f"num_requests {N} leaves too few backlogged completions to measure; use more than "
                         f"concurrency + C + 10 = {M + C + 10}")
    t0, t1 = order[first], order[last]
    window = done & (finish > t0) & (finish <= t1)
    completion = (finish - np.asarray(cols["first_scheduled"]))[window]
    normalised = completion / np.asarray(cols["output_len"])[window]
    steps = result.steps
    start, dur = steps.column("start"), steps.column("duration")
    running = steps.column("num_running")
    sel = (start >= t0) & (start < t1)
    mean_running = float(np.sum(running[sel] * dur[sel]) / dur[sel].sum()) if dur[sel].sum() > 0 else float("nan")
    return Measured(K=K, throughput=(last - first) / (t1 - t0), completions=int(window.sum()),
                    mean_completion=float(completion.mean()), mean_normalised=float(normalised.mean()),
                    p95_normalised=float(np.percentile(normalised, 95)), mean_running=mean_running,
                    steps=len(steps), wall_s=result.wall_time)


def sweep(cfg: RunConfig, lengths: LengthDist, Ks, num_requests: int, concurrency: int | None = None,
          seed: int = 0, batch_time: BatchTimeModel | None = None, **params) -> list[Measured]:
    """One closed-loop run of ``deferred-prefill`` per K (C = cfg.max_num_seqs)."""
    out = []
    for K in Ks:
        run_cfg = replace(cfg, scheduler="deferred-prefill",
                          scheduler_params={"K": int(K), "batch_size": cfg.max_num_seqs, **params})
        out.append(measure(run_closed_loop(run_cfg, lengths, num_requests, concurrency, seed, batch_time), int(K),
                           cfg.max_num_seqs))
    return out

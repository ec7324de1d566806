"""The discrete-event loop: a heap of (time, seq, kind, payload) and a clock, nothing more."""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..engine.replica import Replica
from ..metrics.requests import RequestLog
from ..metrics.steps import StepLog
from ..request import Status
from ..routers import RoundRobin, Router

ARRIVAL, STEP_END, WAKE = 0, 1, 2


@dataclass
class RunResult:
    requests: RequestLog  # every request that entered, each finished, rejected or unfinished
    steps: StepLog
    end_time: float  # simulated seconds at the last event
    wall_time: float  # seconds the simulation took
    meta: dict = field(default_factory=dict)
    replica_stats: list[dict] = field(default_factory=list)


def simulate(source, replicas: list[Replica], router: Router | None = None, horizon: float | None = None,
             seed: int = 0, progress: bool = False, keep_gaps: bool = True) -> RunResult:
    """Run ``source``'s requests through ``replicas`` until all leave, or until ``horizon``.

    ``source`` has ``initial() -> list[Request]`` and ``on_done(req, now) -> list[Request]``.
    Requests still in flight at the horizon end UNFINISHED; requests a scheduler leaves
    waiting with nothing left to happen end REJECTED with the scheduler named.
    ``keep_gaps=False`` keeps inter-token gaps only as per-tier quantile sketches.
    """
    if not replicas:
        raise ValueError("simulate needs at least one replica")
    if horizon is not None and not horizon > 0:
        raise ValueError(f"horizon must be a positive number of seconds, got {horizon}")
    router = router or RoundRobin()
    rng = np.random.default_rng(seed)
    wall0 = time.perf_counter()
    heap: list = []
    seq = 0
    log = RequestLog(keep_gaps)
    entered = 0

    def push_arrivals(reqs):
        nonlocal seq, entered
        entered += len(reqs)
        for r in reqs:
            heapq.heappush(heap, (r.arrival, seq, ARRIVAL, r))
            seq += 1

    push_arrivals(source.initial())
    bar = _progress(progress, entered)
    now = 0.0
    on_done = source.on_done
    shared_steps = replicas[0].steps
    for rep in replicas:
        if rep.steps is not shared_steps:
            raise ValueError("all replicas of a run must share one StepLog")

    def drain(rep: Replica, t: float):
        done = rep.completed
        if done:
            rep.completed = []
            if bar is not None:
                bar.update(len(done))
            for r in done:
                log.record(r)
                more = on_done(r, t)
                if more:
                    push_arrivals(more)
                    if bar is not None:
                        bar.total += len(more)

    def start(rep: Replica, t: float):
        """Ask ``rep`` for a step; requests its policy rejected leave now (their callbacks may refill a loop)."""
        nonlocal seq
        d = rep.start_step(t, heap[0][0] if heap else math.inf, horizon)
        if d is not None:
            heapq.heappush(heap, (rep.step_end, seq, STEP_END, rep))
            seq += 1
        elif rep.wake_at is not None:
            heapq.heappush(heap, (rep.wake_at, seq, WAKE, rep))
            seq += 1
        drain(rep, t)

    heappop = heapq.heappop
    while heap:
        t, _, kind, x = heappop(heap)
        if horizon is not None and t > horizon:
            heapq.heappush(heap, (t, -1, kind, x))
            break
        now = t
        if kind == STEP_END:
            x.end_step(t)
            drain(x, t)
            start(x, t)
        elif kind == ARRIVAL:
            rep = replicas[router.route(x, replicas, rng)]
            rep.add(x, t)
            drain(rep, t)
            if not rep.busy and heap and heap[0][0] == t:
                # more events at this instant: decide once they are all in (a burst forms one batch)
                heapq.heappush(heap, (t, seq, WAKE, rep))
                seq += 1
            elif not rep.busy:
                start(rep, t)
        elif not x.busy:  # WAKE
            start(x, t)
    if bar is not None:
        bar.close()

    stop_time = horizon if horizon is not None and heap else now
    for rep in replicas:
        rep.now = stop_time
        if horizon is not None and heap:
            left = rep.stop(f"unfinished at the horizon t={horizon:g}s", Status.UNFINISHED)
        else:
            left = rep.stop(f"{rep.scheduler.name}: left unscheduled with no event left (the scheduler stalled): "
                            f"replica {rep.index} had {len(rep.waiting)} waiting, {len(rep.running)} running, "
                            f"{len(rep.swapped)} swapped, {rep.kv.free} of {rep.kv.total} KV blocks free")
        for r in left + rep.completed:
            log.record(r)
        rep.completed = []
    stats = [{"replica": rep.index, "steps": rep.num_steps, "busy_time": rep.busy_time,
              "preemptions": rep.num_preemptions, "swap_fallbacks": rep.swap_fallbacks} for rep in replicas]
    return RunResult(log, shared_steps, stop_time, time.perf_counter() - wall0, {}, stats)


def _progress(enabled: bool, total: int):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="req", desc="simulating", mininterval=0.5, leave=False)

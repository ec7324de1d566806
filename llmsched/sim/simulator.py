"""The discrete-event loop: a heap of (time, seq, kind, payload) and a clock, nothing more."""
from __future__ import annotations

import heapq
import time
from dataclasses import dataclass, field
from heapq import heappush
from math import inf

import numpy as np

from ..engine.replica import Replica
from ..metrics.requests import RequestLog
from ..metrics.steps import StepLog
from ..request import Status
from ..routing.base import Router
from ..routing.simple import RoundRobin
from .lanes import run_lanes

ARRIVAL, STEP_END, WAKE, ABORT = 0, 1, 2, 3
DONE = (Status.FINISHED, Status.REJECTED, Status.ABORTED, Status.UNFINISHED)


@dataclass
class RunResult:
    requests: RequestLog  # every request that entered, each finished, rejected or unfinished
    steps: StepLog
    end_time: float  # simulated seconds at the last event
    wall_time: float  # seconds the simulation took
    meta: dict = field(default_factory=dict)
    replica_stats: list[dict] = field(default_factory=list)
    fleet: dict | None = None  # a fleet run's pools: replicas over time, billing, busy time (fleet/state.py)


def simulate(source, replicas: list[Replica], router: Router | None = None, horizon: float | None = None,
             seed: int = 0, progress: bool = False, keep_gaps: bool = True, log: RequestLog | None = None,
             lanes: bool = True, client_timeout: float | None = None, abort_delay: float = 0.0) -> RunResult:
    """Run ``source``'s requests through ``replicas`` until all leave, or until ``horizon``.

    ``source`` has ``initial()`` (a list, or any iterable in arrival order, consumed lazily: a request is
    built only when the run reaches it) and ``on_done(req, now) -> list[Request]``. A source whose ``on_done``
    may add requests (a closed loop) pushes them as events.
    Requests still in flight at the horizon end UNFINISHED; requests a scheduler leaves
    waiting with nothing left to happen end REJECTED with the scheduler named.
    ``keep_gaps=False`` keeps inter-token gaps only as per-tier quantile sketches.
    ``log``: the request log to record into (default a new ``RequestLog(keep_gaps)``); a ``RequestStream``, with
    the replicas sharing a ``StepStream``, writes both logs during the run and keeps only totals (flat memory).
    ``lanes``: run the replicas one at a time (sim/lanes.py) where that cannot change a result: several replicas,
    a router that routes ahead and a source whose completions add no request; False runs the one event loop
    (``--no-lanes``; the reference the tests compare lanes with).
    ``client_timeout``: a request not finished ``client_timeout`` seconds after its send (``Request.sent``) is
    aborted by its client; the abort reaches the engine ``abort_delay`` later and takes effect between steps (a
    step in flight ends first), the request leaving ABORTED with its KV freed.
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
    if log is None:
        log = RequestLog(keep_gaps)

    def push_arrivals(reqs):
        nonlocal seq
        for r in reqs:
            heappush(heap, (r.arrival, seq, ARRIVAL, r))
            seq += 1

    # the initial arrivals stay outside the heap, in arrival order, and come before any heap event at the same
    # time (as if pushed first, with the lowest sequence numbers)
    arrivals = initial_arrivals(source)
    pending = next(arrivals, None)
    bar = progress_bar(progress, source)
    now = 0.0
    on_done = source.on_done
    for rep in replicas:  # completions that add no event let a replica fold decode runs past them
        rep.set_quiet_finishes(not getattr(source, "done_adds_requests", True))
    for i, rep in enumerate(replicas):  # a router answers a position; requests and logs carry the index
        if rep.index != i:
            raise ValueError(f"replicas[{i}] has index {rep.index}: give simulate replicas indexed 0..n-1 in order")
    shared_steps = replicas[0].steps
    for rep in replicas:
        if rep.steps is not shared_steps:
            raise ValueError("all replicas of a run must share one StepLog")
    stream = getattr(log, "streamed", False)
    if stream != getattr(shared_steps, "streamed", False):
        raise ValueError("a streamed run needs both a RequestStream log and replicas sharing a StepStream")

    if hasattr(router, "begin"):  # a Router; a bare object with route() alone is told nothing
        router.begin(replicas)
    router_left = getattr(router, "left", _nothing)

    def out_of_order(nxt, t):
        """Called when ``nxt`` arrives before ``t``, the arrival before it."""
        raise ValueError(f"source {type(source).__name__}: initial() must give requests in arrival "
                         f"order; request {nxt.id} arrives at {nxt.arrival} after one at {t}")

    # vLLM's async scheduling: a request arriving during a step is queued at its end and first scheduled in the
    # step after the next (batchtime/vllm_v1.py); such arrivals wait here, per replica, until their step ends
    held = [[] for _ in replicas] if any(rep.batch_time.async_admission for rep in replicas) else None
    # client timeouts: the aborts that reached a busy replica, applied when its step ends
    aborting = [[] for _ in replicas] if client_timeout is not None else None
    timeout_reason = (f"aborted: no answer {client_timeout:g} s after the client sent it (client timeout)"
                      if client_timeout is not None else "")
    if (lanes and len(replicas) > 1 and getattr(router, "routes_ahead", False) and replicas[0].quiet_finishes
            and aborting is None):
        now, cut = run_lanes(arrivals, pending, replicas, router, rng, horizon, log, on_done, router_left, bar,
                             shared_steps, stream, out_of_order)
        return finish_run(replicas, log, shared_steps, stream, horizon if cut else None, now, bar, wall0)

    def drain(rep: Replica, t: float):
        """Record the requests ``rep`` completed (callers check ``rep.completed`` first: the common case is none)."""
        done = rep.take_completed()
        if done:
            router_left(rep.index, len(done))
            if bar is not None:
                bar.update(len(done))
            for r in done:
                log.record(r)
                more = on_done(r, t)
                if more:
                    push_arrivals(more)

    def next_event() -> float:
        """The next event's time: a replica fast-forwards no step that would start at or after it."""
        t_arrival = pending.arrival if pending is not None else inf
        return min(t_arrival, heap[0][0]) if heap else t_arrival

    def start(rep: Replica, t: float, until: float | None = None):
        """Ask ``rep`` for a step; requests its policy rejected leave now (their callbacks may refill a loop)."""
        nonlocal seq
        d = rep.start_step(t, next_event() if until is None else until, horizon)
        if d is not None:
            heappush(heap, (rep.step_end, seq, STEP_END, rep))
            seq += 1
        elif rep.wake_at is not None:
            heappush(heap, (rep.wake_at, seq, WAKE, rep))
            seq += 1
        if rep.completed:
            drain(rep, t)

    def apply_aborts(rep: Replica, t: float):
        """The aborts that reached ``rep`` during its step, applied now that it ended."""
        for r in aborting[rep.index]:
            if r.status not in DONE:
                rep.abort(r, timeout_reason, t)
        aborting[rep.index].clear()
        if rep.completed:
            drain(rep, t)

    def abort(r, t: float):
        """``r``'s abort reaches the engine at ``t``: held, it never joins; on a busy replica, when the step ends."""
        if r.status in DONE:
            return
        if r.replica < 0:  # held (async admission): it never joins its replica
            rep = next(rep for rep in replicas if r in held[rep.index])
            held[rep.index].remove(r)
            r.replica = rep.index
            r.status, r.reject_reason, r.finish = Status.ABORTED, timeout_reason, t
            rep.completed.append(r)
            drain(rep, t)
            return
        rep = replicas[r.replica]
        if rep.busy:
            aborting[rep.index].append(r)
            return
        rep.abort(r, timeout_reason, t)
        drain(rep, t)
        if not rep.busy:
            start(rep, t)

    def admit_held(rep: Replica, t: float):
        """The arrivals held during ``rep``'s step that ended at ``t`` join it, queued at ``t``: after the next
        step was planned without them. An idle replica starts at once."""
        waiting = held[rep.index]
        for r in waiting:
            r.arrival = t
            rep.add(r, t)
        waiting.clear()
        if rep.completed:
            drain(rep, t)
        if not rep.busy:
            start(rep, t)

    heappop, heapreplace = heapq.heappop, heapq.heapreplace
    while heap or pending is not None:
        if pending is not None and (not heap or pending.arrival <= heap[0][0]):
            t, kind, x = pending.arrival, ARRIVAL, pending
            if horizon is not None and t > horizon:
                break
            pending = next(arrivals, None)
            if pending is not None and pending.arrival < t:
                out_of_order(pending, t)
        else:
            top = heap[0]
            t = top[0]
            if horizon is not None and t > horizon:
                break
            kind, x = top[2], top[3]
            if kind == STEP_END and (aborting is None or not aborting[x.index]) and x.end_and_repeat(t):
                # the commonest event: a step ends and the same plan starts again, nothing to decide. It folds
                # the steps after it when the new one ends before the next event (next_event(), inline: the
                # pending arrival or a child of the heap's root, which this event still is; the children are
                # checked first, as with many replicas one of them nearly always comes first: computing the
                # bound before comparing measured 5% slower on 32 replicas). The new end
                # replaces the root in one sift (the same order as a pop and a push: every key is unique).
                now = t
                end = x.step_end
                size = len(heap)
                waiting = held is not None and held[x.index]
                if (not waiting and (size < 2 or end < heap[1][0]) and (size < 3 or end < heap[2][0])
                        and (pending is None or end < pending.arrival)):
                    until = pending.arrival if pending is not None else inf
                    if size > 1 and heap[1][0] < until:
                        until = heap[1][0]
                    if size > 2 and heap[2][0] < until:
                        until = heap[2][0]
                    x.fold(until, horizon)
                heapreplace(heap, (x.step_end, seq, STEP_END, x))
                seq += 1
                if x.completed:
                    drain(x, t)  # requests a fold past finishes completed
                if waiting:
                    admit_held(x, t)
                if stream and shared_steps.full:
                    shared_steps.flush(log.end_max)
                continue
            heappop(heap)
        now = t
        if kind == STEP_END:
            x.end_step(t)
            if x.completed:
                drain(x, t)
            if aborting is not None and aborting[x.index]:
                apply_aborts(x, t)
            if held is not None and held[x.index]:
                start(x, t, t)  # no fast-forward: the held arrivals join after this step is planned
                admit_held(x, t)
            else:
                start(x, t)
            if stream and shared_steps.full:
                shared_steps.flush(log.end_max)
        elif kind == ARRIVAL:
            rep = replicas[router.route(x, replicas, rng)]
            if aborting is not None:
                heappush(heap, (max(x.sent + client_timeout + abort_delay, t), seq, ABORT, x))
                seq += 1
            if held is not None and rep.busy:
                held[rep.index].append(x)
                continue
            rep.add(x, t)
            if rep.completed:
                drain(rep, t)
            if not rep.busy and ((heap and heap[0][0] == t) or (pending is not None and pending.arrival == t)):
                # more events at this instant: decide once they are all in (a burst forms one batch)
                heappush(heap, (t, seq, WAKE, rep))
                seq += 1
            elif not rep.busy:
                start(rep, t)
        elif kind == ABORT:
            abort(x, t)
        elif not x.busy:  # WAKE
            start(x, t)
    cut = horizon is not None and (heap or pending is not None)
    if held is not None:  # arrivals held when the horizon cut the run leave it unfinished
        for rep in replicas:
            for r in held[rep.index]:
                rep.add(r, r.arrival)
    return finish_run(replicas, log, shared_steps, stream, horizon if cut else None, now, bar, wall0)


def finish_run(replicas: list[Replica], log, shared_steps, stream: bool, cut_at: float | None, now: float, bar,
               wall0: float, recorded=None) -> RunResult:
    """End the run at the horizon ``cut_at`` (requests in flight end unfinished) or, with None, at ``now``, the
    last event (requests left end rejected: the scheduler stalled). ``recorded(r)``: the request recorded for
    ``r`` (a fleet's: the client's request for a stage's copy), default ``r``."""
    if bar is not None:
        bar.close()
    stop_time = now if cut_at is None else cut_at
    for rep in replicas:
        if cut_at is not None:
            left = rep.stop(f"unfinished at the horizon t={cut_at:g}s", Status.UNFINISHED, at=stop_time)
        else:
            left = rep.stop(f"{rep.scheduler.name}: left unscheduled with no event left (the scheduler stalled): "
                            f"replica {rep.index} had {len(rep.waiting)} waiting, {len(rep.running)} running, "
                            f"{len(rep.swapped)} swapped, {rep.kv.free} of {rep.kv.total} KV blocks free",
                            at=stop_time)
        for r in left + rep.take_completed():
            log.record(r if recorded is None else recorded(r))
    if stream:
        log.close()
        shared_steps.close(log.arrival_min, log.span_end(stop_time))
    stats = [{"replica": rep.index, "steps": rep.num_steps, "busy_time": rep.busy_time,
              "preemptions": rep.num_preemptions, "swap_fallbacks": rep.swap_fallbacks} for rep in replicas]
    for rep, row in zip(replicas, stats):
        policy = getattr(rep.scheduler, "stats", None)
        figures = policy() if policy is not None else None
        if figures:
            row["policy"] = figures  # the policy's own figures (Scheduler.stats), summed in the summary
        if rep.caching:  # every admission's hits, re-admissions after preemption included
            row["cached_tokens"] = rep.kv.hit_tokens
            if rep.kv.tiers is not None:  # the KV tiers below the GPU (engine/kv_tiers.py)
                row["kv_offload"] = rep.kv.tiers.stats(stop_time)
    return RunResult(log, shared_steps, stop_time, time.perf_counter() - wall0, {}, stats)


def initial_arrivals(source):
    """``source``'s initial requests as an iterator in arrival order (a list is sorted; any other iterable is taken
    lazily, as it comes)."""
    first = source.initial()
    return iter(sorted(first, key=_arrival) if isinstance(first, list) else first)


def _arrival(req) -> float:
    return req.arrival


def _nothing(*args) -> None:
    return None


def progress_bar(enabled: bool, source):
    if not enabled:
        return None
    from tqdm import tqdm
    total = len(source) if hasattr(source, "__len__") else None
    return tqdm(total=total, unit="req", desc="simulating", mininterval=0.5, leave=False)

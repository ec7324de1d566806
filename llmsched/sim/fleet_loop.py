"""The event loop of a fleet that changes while it runs: replicas join after their start-up phases and drain when
given up, and a request may be served in several stages (sim/simulator.py's ``simulate`` runs a fleet that does
neither, as it runs a plain run).

Its events are those of ``simulate`` (arrivals, step ends, wake-ups), handled the same way (a step that repeats its
plan folds the steps after it up to the next event; arrivals during a step of an engine with vLLM's async
scheduling wait for its end), and two more:

* a fleet action at its time (``FleetState.begin``'s ``schedule``: a start-up phase ending, a scripted scale
  event, an autoscaler's tick), run before the other events of its instant, so a scale event at t applies to the
  arrivals at t; a step folds no further than the next action, so whatever the action reads (an autoscaler, a
  replica's queue) is as of its time;
* a stage's request ready for the next stage of its path (``Path.handoffs``), routed then like an arrival;
* a disaggregated fleet's KV transfer changing (``FleetState.transfers``, fleet/kv_transfers.py): a stage that
  ``receives_kv`` hands its request to the replica without the prompt's KV (``engine/remote_kv.py``); when the
  replica reserves its blocks, at a scheduling point, the transfer starts; when it ends, the request joins the
  replica's queue with its prompt computed (held for the step in flight, as an arrival is, under vLLM's async
  scheduling).

A request that finds no replica of its stage serving (the pool scaled to 0, or every replica still starting) is
rejected at once with that reason. A draining replica that holds nothing (none waiting, running, swapped, nor held
for its step's end) is gone. Actions still queued when no request is left to serve are not run: the run ends with
its last request, as a plain run does, and replicas are billed up to then.
"""
from __future__ import annotations

import time
from heapq import heappop, heappush
from math import inf

import numpy as np

from ..fleet.state import FleetState
from ..metrics.requests import RequestLog
from ..request import Status
from .simulator import RunResult, finish_run, initial_arrivals, progress_bar

ARRIVAL, STEP_END, WAKE, STAGE, TRANSFER = 0, 1, 2, 3, 4
ADD, RECEIVE, LOAD = 0, 1, 2  # what a request held for a step in flight does when the step ends
FINISHED, REJECTED, UNFINISHED = Status.FINISHED, Status.REJECTED, Status.UNFINISHED


def join_held(rep, r, how: int, t: float) -> None:
    """``r``, held for ``rep``'s step in flight, joins it at ``t``: an arrival is queued (``t`` its arrival at the
    engine), a decode request is received, a landed transfer's request waits with its prompt computed."""
    if how == ADD:
        r.arrival = t
        rep.add(r, t)
    elif how == RECEIVE:
        rep.receive(r, t)
    else:
        rep.loaded(r, t)


def simulate_fleet(source, fleet: FleetState, horizon: float | None = None, seed: int = 0, progress: bool = False,
                   keep_gaps: bool = True, log: RequestLog | None = None) -> RunResult:
    """Run ``source``'s requests through ``fleet`` until all leave, or until ``horizon``: the contract of
    ``simulate`` (every request leaves finished, rejected with a reason, or unfinished at the horizon; ``log`` a
    request log or a stream), with the fleet's lifecycle and paths (module docstring). ``result.fleet`` is the
    fleet's accounting (``FleetState.summary``)."""
    if horizon is not None and not horizon > 0:
        raise ValueError(f"horizon must be a positive number of seconds, got {horizon}")
    replicas = fleet.replicas
    if not replicas:
        raise ValueError("simulate_fleet needs a fleet with at least one replica at the start")
    rng = np.random.default_rng(seed)
    wall0 = time.perf_counter()
    log = RequestLog(keep_gaps) if log is None else log
    steps = replicas[0].steps
    if any(rep.steps is not steps for rep in replicas):
        raise ValueError("all replicas of a fleet must share one StepLog")
    stream = getattr(log, "streamed", False)
    if stream != getattr(steps, "streamed", False):
        raise ValueError("a streamed run needs both a RequestStream log and replicas sharing a StepStream")
    heap: list = []  # (time, seq, kind, payload): step ends, wake-ups, requests between stages
    actions: list = []  # (time, seq, action): the fleet's
    seq = 0
    arrivals = initial_arrivals(source)
    pending = next(arrivals, None)
    bar = progress_bar(progress, source)
    on_done = source.on_done
    choose = fleet.fleet.paths
    staged = any(len(path.stages) > 1 for path in choose.paths)
    stage_of: dict[int, tuple] = {}  # request id -> (its path, the stage it is in): paths of several stages only
    draining = fleet.draining
    # held arrivals of engines with vLLM's async scheduling (see simulate), by replica index: (request, ADD, RECEIVE
    # or LOAD)
    held = {} if any(rep.batch_time.async_admission for rep in replicas) else None
    transfers = fleet.transfers  # a disaggregated fleet's KV transfers (None: none)
    transfer_event = 0  # the transfers' latest event (an older one in the heap is stale)
    begin = getattr(choose, "begin", None)
    if begin is not None:  # a chooser that reads the fleet (a decider reading the decode pool's caches)
        begin(fleet)

    def schedule(t: float, action) -> None:
        nonlocal seq
        heappush(actions, (t, seq, action))
        seq += 1

    # a stage's end that hands a request on is an event: no fold may pass it
    fleet.begin(schedule, quiet=not getattr(source, "done_adds_requests", True) and not staged)

    def push(t: float, kind: int, payload) -> None:
        nonlocal seq
        heappush(heap, (t, seq, kind, payload))
        seq += 1

    def next_event() -> float:
        t = pending.arrival if pending is not None else inf
        if heap and heap[0][0] < t:
            t = heap[0][0]
        if actions and actions[0][0] < t:
            t = actions[0][0]
        return t

    def client_request(r):
        """The client's request for ``r``, a stage's request that leaves (``Path.report`` before the last stage)."""
        at = stage_of.pop(r.id, None) if staged else None
        if at is not None:
            path, stage = at
            if stage + 1 < len(path.stages):
                if path.report is not None:
                    return path.report(r)
            elif path.finish is not None:
                return path.finish(r)
        return r

    def leave(r, t: float) -> None:
        """``r`` leaves the run (finished, or rejected in any stage)."""
        r = client_request(r)
        if bar is not None:
            bar.update(1)
        log.record(r)
        more = on_done(r, t)
        if more:
            for m in more:
                push(m.arrival, ARRIVAL, m)  # a closed loop's next request

    def start_transfers(rep, t: float) -> None:
        """The transfers of the requests ``rep`` reserved blocks for start now."""
        settle_transfers(t)
        for r in rep.take_reserved():
            transfers.start(r, rep.index, t)
        push_transfer()

    def push_transfer() -> None:
        nonlocal transfer_event
        t = transfers.next_event()
        transfer_event += 1
        if t is not None:
            push(t, TRANSFER, transfer_event)

    def settle_transfers(t: float) -> None:
        """The transfers finished by ``t`` land on their decode replicas."""
        for r, _ in transfers.advance(t):
            rep = replicas[r.replica]
            if held is not None and rep.busy:
                held.setdefault(rep.index, []).append((r, LOAD))
                continue
            rep.loaded(r, t)
            if rep.completed:
                drain(rep, t)
            if not rep.busy:
                wake_or_start(rep, t)

    def wake_or_start(rep, t: float) -> None:
        if (heap and heap[0][0] == t) or (pending is not None and pending.arrival == t):
            push(t, WAKE, rep)  # more events at this instant: decide once they are all in
        else:
            start(rep, t)

    def empty(rep) -> bool:
        return not (rep.busy or rep.num_outstanding or rep.completed or (held is not None and held.get(rep.index)))

    def drain(rep, t: float) -> None:
        done = rep.take_completed()
        fleet.left(rep, done)
        for r in done:
            if staged:
                at = stage_of.get(r.id)
                if at is not None and r.status is FINISHED and at[1] + 1 < len(at[0].stages):
                    del stage_of[r.id]
                    path, stage = at
                    nxt, ready = path.handoffs[stage](r, t)
                    if not ready >= t:
                        raise ValueError(f"path handoff {path.handoffs[stage]!r}: request {r.id} ready at {ready}, "
                                         f"before its stage ended at {t}")
                    push(ready, STAGE, (nxt, path, stage + 1))
                    continue
            leave(r, t)
        if rep.index in draining and empty(rep):
            fleet.idle(rep, t)

    def start(rep, t: float, until: float | None = None) -> None:
        d = rep.start_step(t, next_event() if until is None else until, horizon)
        if d is not None:
            push(rep.step_end, STEP_END, rep)
        elif rep.wake_at is not None:
            push(rep.wake_at, WAKE, rep)
        if rep.reserved:
            start_transfers(rep, t)
        if rep.completed:
            drain(rep, t)

    def admit_held(rep, t: float) -> None:
        waiting = held[rep.index]
        for r, how in waiting:
            join_held(rep, r, how, t)
        waiting.clear()
        if rep.completed:
            drain(rep, t)
        if not rep.busy:
            start(rep, t)

    def enter(req, path, stage: int, t: float) -> None:
        """``req`` enters ``stage`` of ``path`` at ``t``: routed to a replica serving that stage's role."""
        if stage == 0 and path.begin is not None:
            req = path.begin(req)
        if staged:
            stage_of[req.id] = (path, stage)
        role = path.stages[stage].role
        rep = fleet.route(req, rng, role)
        if rep is None:
            req.replica = -1
            req.status = REJECTED
            req.reject_reason = (f"no replica of the fleet's {role!r} pools was serving at t={t:g}s (each one "
                                 f"starting up, draining or scaled away)")
            req.finish = t
            leave(req, t)
            return
        receives = path.stages[stage].receives_kv
        if held is not None and rep.busy:
            held.setdefault(rep.index, []).append((req, RECEIVE if receives else ADD))
            return
        if receives:
            rep.receive(req, t)
        else:
            rep.add(req, t)
        if rep.completed:
            drain(rep, t)
        if not rep.busy:
            wake_or_start(rep, t)

    now = 0.0
    cut = False
    while heap or pending is not None:
        while heap and heap[0][2] == TRANSFER and heap[0][3] != transfer_event:
            heappop(heap)  # a stale transfer event: the transfers changed since it was pushed
        if not heap and pending is None:
            break
        t_work = pending.arrival if pending is not None else inf
        if heap and heap[0][0] < t_work:
            t_work = heap[0][0]
        if actions and actions[0][0] <= t_work:  # the fleet acts first at its instant
            t, _, action = heappop(actions)
            if horizon is not None and t > horizon:
                cut = True
                break
            now = t
            action(t)
            for i in [i for i in draining if empty(replicas[i])]:
                fleet.idle(replicas[i], t)
            continue
        if horizon is not None and t_work > horizon:
            cut = True
            break
        if pending is not None and (not heap or pending.arrival <= heap[0][0]):
            x = pending
            t = x.arrival
            pending = next(arrivals, None)
            if pending is not None and pending.arrival < t:
                raise ValueError(f"source {type(source).__name__}: initial() must give requests in arrival order; "
                                 f"request {pending.id} arrives at {pending.arrival} after one at {t}")
            now = t
            enter(x, choose(x), 0, t)
            continue
        t, _, kind, x = heappop(heap)
        now = t
        if kind == STEP_END:
            waiting = held is not None and held.get(x.index)
            if x.end_and_repeat(t):  # the same plan again: fold the steps before the next event
                if x.reserved:
                    start_transfers(x, t)
                if not waiting and not x.receiving and x.step_end < next_event():
                    x.fold(next_event(), horizon)
                push(x.step_end, STEP_END, x)
                if x.completed:
                    drain(x, t)
                if waiting:
                    admit_held(x, t)
            else:
                x.end_step(t)
                if x.completed:
                    drain(x, t)
                start(x, t, t if waiting else None)  # held arrivals: no fast-forward, they join once it is planned
                if waiting:
                    admit_held(x, t)
            if stream and steps.full:
                steps.flush(log.end_max)
        elif kind == WAKE:
            if not x.busy:
                start(x, t)
        elif kind == STAGE:
            req, path, stage = x
            enter(req, path, stage, t)
        elif kind == TRANSFER:
            if x == transfer_event:
                settle_transfers(t)
                push_transfer()
        else:  # ARRIVAL: a closed loop's next request
            enter(x, choose(x), 0, t)
    cut = cut and bool(heap or pending is not None)
    if cut:
        for _, _, kind, x in heap:  # requests between two stages when the horizon cut the run
            if kind == STAGE:
                req = x[0]
                req.status = UNFINISHED
                req.reject_reason = f"unfinished at the horizon t={horizon:g}s (between two stages of its path)"
                req.finish = horizon
                log.record(req)
    if held is not None:  # arrivals held when the horizon cut the run leave it unfinished
        for i, waiting in held.items():
            for r, how in waiting:
                if how != LOAD:  # (a landed transfer's request is still in transfer there)
                    join_held(replicas[i], r, how, r.arrival)
    result = finish_run(replicas, log, steps, stream, horizon if cut else None, now, bar, wall0,
                        client_request if staged else None)
    result.fleet = fleet.summary(result.end_time)
    return result

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
* a disaggregated fleet's KV transfer landing (``FleetState.transfers``, fleet/kv_transfers.py): a stage that
  ``receives_kv`` hands its request to the replica without the prompt's KV (``engine/remote_kv.py``); when the
  replica reserves its blocks, at a scheduling point, the transfer starts; when it ends, the request joins the
  replica's queue with its prompt computed (held for the step in flight, as an arrival is, under vLLM's async
  scheduling).

With a client timeout, each request's abort waits in a queue of its own and ends the request wherever it is then:
in the proxy's hop between two stages or held for a step in flight at once, on a replica between its steps
(``Replica.abort``; a request whose KV is still arriving keeps its blocks until the transfer lands, as vLLM
delays their free).

A request that finds no replica of its stage serving (the pool scaled to 0, or every replica still starting) is
rejected at once with that reason. A draining replica that holds nothing (none waiting, running, swapped, nor held
for its step's end) is gone; a draining prefill replica also stays until the decode side has read every prompt's KV
it sent (the transfer ended) or that request has left: vLLM's prefill instance holds those blocks until the decode
instance's connector has read them (NixlConnector's ``request_finished`` delays their free), so the instance cannot
go before. Under a policy that plans from the KV manager's free blocks (disagg_config.sending), those blocks stay
taken on the prefill replica until then (``Replica.read_sent``), which wakes it if it is idle with work its free
blocks may now let in.
Every request leaves by the run's end, so no replica drains for ever. Actions still queued when no request is left
to serve are not run: the run ends with its last request, as a plain run does, and replicas are billed up to then.
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
FINISHED, REJECTED, UNFINISHED, ABORTED = Status.FINISHED, Status.REJECTED, Status.UNFINISHED, Status.ABORTED


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
                   keep_gaps: bool = True, log: RequestLog | None = None, client_timeout: float | None = None,
                   abort_delay: float = 0.0) -> RunResult:
    """Run ``source``'s requests through ``fleet`` until all leave, or until ``horizon``: the contract of
    ``simulate`` (every request leaves finished, rejected with a reason, aborted by its client's timeout, or
    unfinished at the horizon; ``log`` a request log or a stream), with the fleet's lifecycle and paths (module
    docstring). ``result.fleet`` is the fleet's accounting (``FleetState.summary``)."""
    return FleetLoop(source, fleet, horizon, seed, progress, keep_gaps, log, client_timeout, abort_delay).run()


class FleetLoop:
    """One run of the fleet loop: its event queues, and a method for each way an event reaches the fleet. A class
    (fleet_loop.pxd declares it), not closures, so that a compiled run calls its handlers in C and reads its
    replicas' fields and clocks as struct slots."""

    def __init__(self, source, fleet: FleetState, horizon: float | None, seed: int, progress: bool, keep_gaps: bool,
                 log: RequestLog | None, client_timeout: float | None = None, abort_delay: float = 0.0):
        if horizon is not None and not horizon > 0:
            raise ValueError(f"horizon must be a positive number of seconds, got {horizon}")
        self.source = source
        self.fleet = fleet
        self.horizon = horizon
        self.replicas = replicas = fleet.replicas
        if not replicas:
            raise ValueError("simulate_fleet needs a fleet with at least one replica at the start")
        self.rng = np.random.default_rng(seed)
        self.wall0 = time.perf_counter()
        self.log = log = RequestLog(keep_gaps) if log is None else log
        self.steps = steps = replicas[0].steps
        if any(rep.steps is not steps for rep in replicas):
            raise ValueError("all replicas of a fleet must share one StepLog")
        self.stream = stream = getattr(log, "streamed", False)
        if stream != getattr(steps, "streamed", False):
            raise ValueError("a streamed run needs both a RequestStream log and replicas sharing a StepStream")
        self.heap = []  # (time, seq, kind, payload): step ends, wake-ups, requests between stages
        self.actions = []  # (time, seq, action): the fleet's
        self.seq = 0
        self.arrivals = initial_arrivals(source)
        self.pending = next(self.arrivals, None)
        self.bar = progress_bar(progress, source)
        self.on_done = source.on_done
        self.choose = choose = fleet.fleet.paths
        self.staged = any(len(path.stages) > 1 for path in choose.paths)
        self.stage_of = {}  # request id -> (its path, the stage it is in): paths of several stages only
        self.draining = fleet.draining
        # held arrivals of engines with vLLM's async scheduling (see simulate), by replica index: (request, ADD,
        # RECEIVE or LOAD)
        self.held = {} if any(rep.batch_time.async_admission for rep in replicas) else None
        self.transfers = fleet.transfers  # a disaggregated fleet's KV transfers (None: none)
        self.transfer_event = 0  # the transfers' latest event (an older one in the heap is stale)
        # a disaggregated fleet's prompts whose KV a prefill replica sent and no decode replica has read yet:
        # request id -> that replica's index, and per replica index how many (a draining one stays while any)
        self.unread = {}
        self.unread_of = {}
        # client timeouts: each request's abort (time, seq, request id) in a queue of its own, so that the aborts of
        # requests that already left keep neither the run nor the fleet's actions going; the request each id is at
        # now (a stage's copy), the ids between two stages (-> their path and next stage), and per replica index
        # the ids whose abort reached it during a step (applied when the step ends)
        self.client_timeout = client_timeout
        self.abort_delay = abort_delay
        self.timeout_reason = (f"aborted: no answer {client_timeout:g} s after the client sent it (client timeout)"
                               if client_timeout is not None else "")
        self.aborts = []
        self.live = {} if client_timeout is not None else None
        self.hopping = {}
        self.aborting = {}
        begin = getattr(choose, "begin", None)
        if begin is not None:  # a chooser that reads the fleet (a decider reading the decode pool's caches)
            begin(fleet)
        # a stage's end that hands a request on is an event: no fold may pass it (a last stage's finish, with an
        # open-loop source, adds none: its replicas fold past finishes as a plain run's do)
        handing = frozenset(s.role for path in choose.paths for s in path.stages[:-1])
        fleet.begin(self.schedule, quiet=not getattr(source, "done_adds_requests", True), handing=handing)

    def schedule(self, t: float, action) -> None:
        heappush(self.actions, (t, self.seq, action))
        self.seq += 1

    def push(self, t: float, kind: int, payload) -> None:
        heappush(self.heap, (t, self.seq, kind, payload))
        self.seq += 1

    def next_event(self) -> float:
        pending = self.pending
        t = pending.arrival if pending is not None else inf
        heap = self.heap
        if heap and heap[0][0] < t:
            t = heap[0][0]
        actions = self.actions
        if actions and actions[0][0] < t:
            t = actions[0][0]
        aborts = self.aborts
        if aborts and aborts[0][0] < t:
            t = aborts[0][0]
        return t

    def client_request(self, r):
        """The client's request for ``r``, a stage's request that leaves (``Path.report`` before the last stage)."""
        at = self.stage_of.pop(r.id, None) if self.staged else None
        if at is not None:
            path, stage = at
            if stage + 1 < len(path.stages):
                if path.report is not None:
                    return path.report(r)
            elif path.finish is not None:
                return path.finish(r)
        return r

    def leave(self, r, t: float) -> None:
        """``r`` leaves the run (finished, or rejected or aborted in any stage)."""
        if self.live is not None:
            self.live.pop(r.id, None)
        r = self.client_request(r)
        if self.unread:  # rejected before its KV was read: vLLM's decode side tells the prefill side to free it
            self.read(r.id, t)
        if self.bar is not None:
            self.bar.update(1)
        self.log.record(r)
        more = self.on_done(r, t)
        if more:
            for m in more:
                self.push(m.arrival, ARRIVAL, m)  # a closed loop's next request

    def start_transfers(self, rep, t: float) -> None:
        """The transfers of the requests ``rep`` reserved blocks for start now."""
        self.settle_transfers(t)
        transfers = self.transfers
        for r in rep.take_reserved():
            transfers.start(r, rep.index, t)
        self.push_transfer()

    def push_transfer(self) -> None:
        t = self.transfers.next_event()
        self.transfer_event += 1
        if t is not None:
            self.push(t, TRANSFER, self.transfer_event)

    def settle_transfers(self, t: float) -> None:
        """The transfers finished by ``t`` land on their decode replicas."""
        held = self.held
        for r, _ in self.transfers.advance(t):
            self.read(r.id, t)
            rep = self.replicas[r.replica]
            if held is not None and rep.clock.busy:
                held.setdefault(rep.index, []).append((r, LOAD))
                continue
            rep.loaded(r, t)
            if rep.completed:
                self.drain(rep, t)
            if not rep.clock.busy:
                self.wake_or_start(rep, t)

    def wake_or_start(self, rep, t: float) -> None:
        heap = self.heap
        if (heap and heap[0][0] == t) or (self.pending is not None and self.pending.arrival == t):
            self.push(t, WAKE, rep)  # more events at this instant: decide once they are all in
        else:
            self.start(rep, t, None)

    def read(self, rid: int, t: float) -> None:
        """Request ``rid``'s KV was read (its transfer ended), or it left before: its prefill replica frees the blocks
        it kept for it (woken if idle with work: they may be what its queue waits for), and is gone at ``t`` if it
        drains and holds nothing else."""
        src = self.unread.pop(rid, None)
        if src is None:
            return
        sender = self.replicas[src]
        if sender.read_sent(rid) and not sender.clock.busy and sender.num_outstanding:
            self.push(t, WAKE, sender)
        left = self.unread_of[src] - 1
        if left:
            self.unread_of[src] = left
            return
        del self.unread_of[src]
        rep = self.replicas[src]
        if src in self.draining and self.empty(rep):
            self.fleet.idle(rep, t)

    def empty(self, rep) -> bool:
        held = self.held
        return not (rep.clock.busy or rep.num_outstanding or rep.completed
                    or (held is not None and held.get(rep.index)) or rep.index in self.unread_of)

    def drain(self, rep, t: float) -> None:
        done = rep.take_completed()
        self.fleet.left(rep, done)
        staged = self.staged
        stage_of = self.stage_of
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
                    self.push(ready, STAGE, (nxt, path, stage + 1))
                    if self.live is not None:  # in the hop: an abort now ends it there
                        self.live[r.id] = nxt
                        self.hopping[r.id] = (path, stage + 1)
                    if path.stages[stage + 1].receives_kv:  # its KV stays on rep until a decode replica reads it
                        self.unread[r.id] = rep.index
                        self.unread_of[rep.index] = self.unread_of.get(rep.index, 0) + 1
                    continue
            self.leave(r, t)
        if rep.index in self.draining and self.empty(rep):
            self.fleet.idle(rep, t)

    def start(self, rep, t: float, until) -> None:
        d = rep.start_step(t, self.next_event() if until is None else until, self.horizon)
        clock = rep.clock
        if d is not None:
            self.push(clock.step_end, STEP_END, rep)
        elif clock.wake_at is not None:
            self.push(clock.wake_at, WAKE, rep)
        if rep.reserved:
            self.start_transfers(rep, t)
        if rep.completed:
            self.drain(rep, t)
        elif d is None and rep.index in self.draining and self.empty(rep):
            # emptied with nothing completing now: a request its client gave up while its KV was arriving, whose
            # blocks went when the transfer (or a tier's load) landed
            self.fleet.idle(rep, t)

    def admit_held(self, rep, t: float) -> None:
        waiting = self.held[rep.index]
        for r, how in waiting:
            join_held(rep, r, how, t)
        waiting.clear()
        if rep.completed:
            self.drain(rep, t)
        if not rep.clock.busy:
            self.start(rep, t, None)

    def enter(self, req, path, stage: int, t: float) -> None:
        """``req`` enters ``stage`` of ``path`` at ``t``: routed to a replica serving that stage's role."""
        live = self.live
        if live is not None:
            if stage == 0:  # the client gives up client_timeout after its send; the engine hears abort_delay later
                heappush(self.aborts, (max(req.sent + self.client_timeout + self.abort_delay, t), self.seq, req.id))
                self.seq += 1
            else:
                self.hopping.pop(req.id, None)
        if stage == 0 and path.begin is not None:
            req = path.begin(req)
        if live is not None:
            live[req.id] = req
        if self.staged:
            self.stage_of[req.id] = (path, stage)
        role = path.stages[stage].role
        rep = self.fleet.route(req, self.rng, role)
        if rep is None:
            req.replica = -1
            req.status = REJECTED
            req.reject_reason = (f"no replica of the fleet's {role!r} pools was serving at t={t:g}s (each one "
                                 f"starting up, draining or scaled away)")
            req.finish = t
            self.leave(req, t)
            return
        receives = path.stages[stage].receives_kv
        held = self.held
        if held is not None and rep.clock.busy:
            held.setdefault(rep.index, []).append((req, RECEIVE if receives else ADD))
            return
        if receives:
            rep.receive(req, t)
        else:
            rep.add(req, t)
        if rep.completed:
            self.drain(rep, t)
        if not rep.clock.busy:
            self.wake_or_start(rep, t)

    def abort(self, rid: int, t: float, ending=None) -> None:
        """The abort of request ``rid``'s client reaches the fleet at ``t``: wherever the request is now, it leaves
        ABORTED. In the hop between two stages (vLLM's proxy holds it) or held for a step in flight before it
        joined its replica, at once; on a replica, between its steps (``Replica.abort``: vLLM's engine core reads
        an abort with its inputs), so at the end of the step in flight if there is one. ``ending``: the replica
        whose step ends now (``apply_aborts``), which plans its next step itself."""
        r = self.live.get(rid)
        if r is None:  # it left already
            return
        at = self.hopping.pop(rid, None)
        if at is not None:
            if self.staged:
                self.stage_of[rid] = at
            r.status, r.reject_reason, r.finish = ABORTED, self.timeout_reason, t
            self.leave(r, t)
            return
        held = self.held
        if held is not None:
            for i, waiting in held.items():
                for k, (q, how) in enumerate(waiting):
                    if q is r and how != LOAD:  # queued or received at the step's end: it never joins
                        del waiting[k]
                        rep = self.replicas[i]
                        r.replica = i
                        r.status, r.reject_reason, r.finish = ABORTED, self.timeout_reason, t
                        rep.completed.append(r)
                        self.drain(rep, t)
                        return
        rep = self.replicas[r.replica]
        if rep.clock.busy:
            self.aborting.setdefault(rep.index, []).append(rid)
            return
        rep.abort(r, self.timeout_reason, t)
        self.drain(rep, t)
        if rep is not ending and not rep.clock.busy:
            self.start(rep, t, None)

    def apply_aborts(self, rep, t: float) -> None:
        """The aborts that reached ``rep`` during its step that ended at ``t``, each where its request is now (it
        may have finished, or gone on to its next stage)."""
        for rid in self.aborting.pop(rep.index):
            self.abort(rid, t, rep)

    def step_ended(self, rep, t: float) -> None:
        """``rep``'s step in flight ends at ``t``."""
        held = self.held
        waiting = held is not None and held.get(rep.index)
        aborted = self.aborting.get(rep.index) if self.live is not None else None
        if not aborted and rep.end_and_repeat(t):  # the same plan again: fold the steps before the next event
            if rep.reserved:
                self.start_transfers(rep, t)
            if not waiting and not rep.receiving:
                until = self.next_event()
                if rep.clock.step_end < until:
                    rep.fold(until, self.horizon)
            self.push(rep.clock.step_end, STEP_END, rep)
            if rep.completed:
                self.drain(rep, t)
            if waiting:
                self.admit_held(rep, t)
        else:
            rep.end_step(t)
            if rep.completed:
                self.drain(rep, t)
            if aborted:
                self.apply_aborts(rep, t)
            self.start(rep, t, t if waiting else None)  # held arrivals: no fast-forward, they join once planned
            if waiting:
                self.admit_held(rep, t)
        if self.stream and self.steps.full:
            self.steps.flush(self.log.end_max)

    def run(self) -> RunResult:
        heap, actions, replicas, horizon = self.heap, self.actions, self.replicas, self.horizon
        choose, draining, fleet = self.choose, self.draining, self.fleet
        now = 0.0
        cut = False
        aborts, live = self.aborts, self.live
        while heap or self.pending is not None or aborts:
            while heap and heap[0][2] == TRANSFER and heap[0][3] != self.transfer_event:
                heappop(heap)  # a stale transfer event: the transfers changed since it was pushed
            while aborts and aborts[0][2] not in live:
                heappop(aborts)  # the abort of a request that left
            pending = self.pending
            if not heap and pending is None and not aborts:
                break
            t_work = pending.arrival if pending is not None else inf
            if heap and heap[0][0] < t_work:
                t_work = heap[0][0]
            if aborts and aborts[0][0] < t_work:
                t_work = aborts[0][0]
            if actions and actions[0][0] <= t_work:  # the fleet acts first at its instant
                t, _, action = heappop(actions)
                if horizon is not None and t > horizon:
                    cut = True
                    break
                now = t
                action(t)
                for i in [i for i in draining if self.empty(replicas[i])]:
                    fleet.idle(replicas[i], t)
                continue
            if horizon is not None and t_work > horizon:
                cut = True
                break
            if aborts and aborts[0][0] == t_work and (pending is None or t_work < pending.arrival) and (
                    not heap or t_work < heap[0][0]):  # a client gives up (after the other events of its instant)
                t, _, rid = heappop(aborts)
                now = t
                self.abort(rid, t)
                continue
            if pending is not None and (not heap or pending.arrival <= heap[0][0]):
                x = pending
                t = pending.arrival
                self.pending = pending = next(self.arrivals, None)
                if pending is not None and pending.arrival < t:
                    raise ValueError(f"source {type(self.source).__name__}: initial() must give requests in arrival "
                                     f"order; request {pending.id} arrives at {pending.arrival} after one at {t}")
                now = t
                self.enter(x, choose(x), 0, t)
                continue
            t, _, kind, x = heappop(heap)
            now = t
            if kind == STEP_END:
                self.step_ended(x, t)
            elif kind == WAKE:
                rep = x
                if not rep.clock.busy:
                    self.start(rep, t, None)
            elif kind == STAGE:
                req, path, stage = x
                if req.status is not ABORTED:  # (else its client gave up during the hop)
                    self.enter(req, path, stage, t)
            elif kind == TRANSFER:
                if x == self.transfer_event:
                    self.settle_transfers(t)
                    self.push_transfer()
            else:  # ARRIVAL: a closed loop's next request
                self.enter(x, choose(x), 0, t)
        cut = cut and bool(heap or self.pending is not None or aborts)
        log = self.log
        if cut:
            for _, _, kind, x in heap:  # requests between two stages when the horizon cut the run
                if kind == STAGE and x[0].status is not ABORTED:
                    req = x[0]
                    req.status = UNFINISHED
                    req.reject_reason = f"unfinished at the horizon t={horizon:g}s (between two stages of its path)"
                    req.finish = horizon
                    log.record(req)
        if self.held is not None:  # arrivals held when the horizon cut the run leave it unfinished
            for i, waiting in self.held.items():
                for r, how in waiting:
                    if how != LOAD:  # (a landed transfer's request is still in transfer there)
                        join_held(replicas[i], r, how, r.arrival)
        result = finish_run(replicas, log, self.steps, self.stream, horizon if cut else None, now, self.bar,
                            self.wall0, self.client_request if self.staged else None)
        result.fleet = fleet.summary(result.end_time)
        return result

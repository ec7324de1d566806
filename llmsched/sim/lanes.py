"""Replicas run one at a time, each on its own events, when nothing one replica does can change another.

With a router that routes ahead (``Router.routes_ahead``: round-robin, random; it reads no replica state) and an
open-loop source (a finish adds no request), a replica's steps depend only on the arrivals routed to it. The one
event loop of ``simulate`` then only interleaves independent replicas, and every step of another replica ends a
replica's fast-forward: with 32 replicas almost none folds. Here the arrivals are routed in windows (in arrival
order, so the router and its random draws see what they see in the event loop), each replica ("lane") runs its own
events up to the window's end, folding decode runs up to its own next event, and the logs of the window are merged.

Same rows, same values as the event loop; the order differs only where two replicas end something at the same
instant. The event loop orders by event time, then by the order the events were queued; here a window's step rows
are merged by end time (``start + duration``), its requests by ``finish`` (the event loop records both in
nondecreasing order of those: a fold stops before the next event), each time tie going to the lower replica index.
A summary's float sums over requests tied across replicas may then differ in the last digit.
"""
from __future__ import annotations

import heapq
from collections import deque
from heapq import heappop, heappush, heapreplace
from math import inf
from operator import attrgetter

import numpy as np

from ..engine.replica import Replica
from ..metrics.steps import StepLog

STEP_END, WAKE = 1, 2
WINDOW = 2048  # arrivals routed per window (at least PER_LANE per replica): a window's rows are held until it ends
PER_LANE = 64  # so that a window's merge, a pass over the replicas, is paid for by their steps
FINISH = attrgetter("finish")


class Lane:
    """One replica's own events: the arrivals routed to it, its step end and its wake-ups."""

    __slots__ = ("rep", "arrivals", "heap", "seq", "done", "last", "steps", "held")

    def __init__(self, rep: Replica):
        self.rep = rep
        self.arrivals: deque = deque()
        # vLLM's async scheduling (batchtime/vllm_v1.py): arrivals during a step wait for its end, as in simulate
        self.held: list | None = [] if rep.batch_time.async_admission else None
        self.heap: list = []  # (time, seq, kind): the step in flight's end, wake-ups (a stale one stays queued)
        self.seq = 0
        self.done: list = []  # requests that left in this window, in the order they left
        self.last = -inf  # time of the last event run
        self.steps = StepLog()  # this window's step rows

    def run(self, before: float, horizon: float | None) -> None:
        """Run every event earlier than ``before`` (and by ``horizon``), arrivals first at an instant, as the
        event loop does."""
        rep, arrivals, heap = self.rep, self.arrivals, self.heap
        while True:
            t_arrival = arrivals[0].arrival if arrivals else inf
            if heap and heap[0][0] < t_arrival:
                t = heap[0][0]
                arrival = None
            else:
                t = t_arrival
                arrival = True
            if t >= before or (horizon is not None and t > horizon):
                return
            self.last = t
            if arrival:
                if self.held is not None and rep.busy:
                    self.held.append(arrivals.popleft())
                    continue
                rep.add(arrivals.popleft(), t)
                if rep.completed:
                    self.drain()
                if not rep.busy:
                    if (heap and heap[0][0] == t) or (arrivals and arrivals[0].arrival == t):
                        self.push(t, WAKE)  # more events at this instant: decide once they are all in
                    else:
                        self.start(t, before, horizon)
                continue
            kind = heap[0][2]
            if kind == STEP_END and rep.end_and_repeat(t):
                waiting = self.held
                until = self.next_event(before, past_root=True)
                if rep.step_end < until and not waiting:
                    rep.fold(until, horizon)
                heapreplace(heap, (rep.step_end, self.seq, STEP_END))
                self.seq += 1
                if rep.completed:
                    self.drain()
                if waiting:
                    self.admit_held(t, before, horizon)
                continue
            heappop(heap)
            if kind == STEP_END:
                rep.end_step(t)
                if rep.completed:
                    self.drain()
                if self.held:
                    self.start(t, t, horizon)  # no fast-forward: the held arrivals join after this step is planned
                    self.admit_held(t, before, horizon)
                else:
                    self.start(t, before, horizon)
            elif not rep.busy:  # WAKE
                self.start(t, before, horizon)

    def next_event(self, before: float, past_root: bool = False) -> float:
        """This lane's next event, at most ``before`` (an arrival not yet routed may come then); ``past_root``:
        the heap's root is being replaced, its children come next."""
        t = self.arrivals[0].arrival if self.arrivals else before
        heap = self.heap
        if past_root:
            for i in (1, 2):
                if i < len(heap) and heap[i][0] < t:
                    t = heap[i][0]
        elif heap and heap[0][0] < t:
            t = heap[0][0]
        return t if t < before else before

    def admit_held(self, t: float, before: float, horizon: float | None) -> None:
        """The arrivals held during the step that ended at ``t`` join, queued at ``t`` (simulate's admit_held)."""
        rep = self.rep
        for r in self.held:
            r.arrival = t
            rep.add(r, t)
        self.held.clear()
        if rep.completed:
            self.drain()
        if not rep.busy:
            self.start(t, before, horizon)

    def start(self, t: float, before: float, horizon: float | None) -> None:
        rep = self.rep
        if rep.start_step(t, self.next_event(before), horizon) is not None:
            self.push(rep.step_end, STEP_END)
        elif rep.wake_at is not None:
            self.push(rep.wake_at, WAKE)
        if rep.completed:
            self.drain()

    def push(self, t: float, kind: int) -> None:
        heappush(self.heap, (t, self.seq, kind))
        self.seq += 1

    def drain(self) -> None:
        self.done.extend(self.rep.take_completed())

    @property
    def idle(self) -> bool:
        return not self.arrivals and not self.heap and not self.held


def run_lanes(arrivals, pending, replicas: list[Replica], router, rng, horizon: float | None, log, on_done,
              router_left, bar, shared_steps, stream: bool, out_of_order) -> tuple[float, bool]:
    """Run ``replicas`` as lanes; ``arrivals`` (an iterator in arrival order) and ``pending`` (its first request,
    or None) as in ``simulate``. Returns the time of the last event run and whether the horizon cut the run."""
    lanes = [Lane(rep) for rep in replicas]
    window = max(WINDOW, PER_LANE * len(lanes))
    for lane in lanes:  # the replicas record into their lane's log during a window
        lane.rep.log_steps_to(lane.steps)
    try:
        while True:
            # route the window's arrivals (and every later one at the same instant as its last)
            routed = 0
            last = None
            while pending is not None and (horizon is None or pending.arrival <= horizon):
                if routed >= window and pending.arrival != last:
                    break
                req = pending
                last = req.arrival
                lanes[router.route(req, replicas, rng)].arrivals.append(req)
                routed += 1
                pending = next(arrivals, None)
                if pending is not None and pending.arrival < last:
                    out_of_order(pending, last)
            routable = pending is not None and (horizon is None or pending.arrival <= horizon)
            before = pending.arrival if routable else inf
            for lane in lanes:
                lane.run(before, horizon)
            _merge(lanes, shared_steps, log, on_done, router_left, bar)
            if stream and shared_steps.full:
                shared_steps.flush(log.end_max)
            if not routable:  # every lane ran all its events by the horizon
                break
    finally:
        for lane in lanes:
            lane.rep.log_steps_to(shared_steps)
    now = max(lane.last for lane in lanes)
    cut = pending is not None or not all(lane.idle for lane in lanes)
    for lane in lanes:  # arrivals held when the horizon cut the run leave it unfinished, as in simulate
        for r in lane.held or ():
            lane.rep.add(r, r.arrival)
    return (now if now > -inf else 0.0), cut


def _merge(lanes: list[Lane], shared_steps: StepLog, log, on_done, router_left, bar) -> None:
    """Append the window's step rows and requests to the run's logs: rows by end, requests by finish, ties in
    replica order."""
    stepped = [lane.steps for lane in lanes if len(lane.steps)]
    if stepped:
        arrays = [steps.arrays() for steps in stepped]
        cols = {name: np.concatenate([a[name] for a in arrays]) for name in stepped[0].fields}
        del arrays  # views pin their arrays: gone before the logs are cleared
        end = cols["start"] + cols["duration"]
        at = 0
        for steps in stepped:  # a lane's rows stay in its order (a zero-length step may round its end below the last)
            n = len(steps)
            np.maximum.accumulate(end[at:at + n], out=end[at:at + n])
            at += n
        order = np.argsort(end, kind="stable")
        shared_steps.extend({name: col[order] for name, col in cols.items()})
        for steps in stepped:
            steps.clear()
    for lane in lanes:
        if lane.done:
            router_left(lane.rep.index, len(lane.done))
            if bar is not None:
                bar.update(len(lane.done))
    done = [lane.done for lane in lanes if lane.done]
    for r in (heapq.merge(*done, key=FINISH) if len(done) > 1 else done[0] if done else ()):
        log.record(r)
        if on_done(r, r.finish):
            raise RuntimeError(f"source's on_done added requests after request {r.id} though it declares "
                               f"done_adds_requests = False: declare it True")
    for lane in lanes:
        lane.done = []


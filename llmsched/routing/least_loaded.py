"""The routers that read each replica's load: ``least-outstanding`` (requests) and ``least-load`` (the scheduler's
estimate)."""
from __future__ import annotations

from heapq import heapify, heappop, heappush, heapreplace

from .base import Router
from .registry import register_router


@register_router
class LeastOutstanding(Router):
    """The replica with the fewest requests waiting, running or swapped, the lowest index among equals.

    An index instead of a scan: the counts are kept from what this router sends and what the simulator reports
    leaving (``left``), in a heap of (count, replica) entries whose stale ones (a count since changed) are dropped
    when they reach the top, so an arrival costs O(log replicas) rather than a pass over every replica. A request
    preempted or swapped stays outstanding, so arrivals and departures are the only changes."""

    name = "least-outstanding"
    summary = "fewest requests waiting, running or swapped (ties to the lowest index)"

    def __init__(self):
        self.counts: list[int] = []
        self.heap: list[tuple[int, int]] = []

    def begin(self, replicas):
        self.counts = [r.num_outstanding for r in replicas]
        self._rebuild()

    def joined(self, replicas, position):
        """Counts kept, not read again: a replica's ``num_outstanding`` leaves out the requests sent to it and
        held for its step in flight, which the kept count holds."""
        self.counts.insert(position, replicas[position].num_outstanding)
        self._rebuild()

    def leaving(self, replicas, position):
        del self.counts[position]
        self._rebuild()

    def _rebuild(self):
        self.heap = [(c, i) for i, c in enumerate(self.counts)]
        heapify(self.heap)

    def route(self, req, replicas, rng):
        counts, heap = self.counts, self.heap
        if len(counts) != len(replicas):
            raise RuntimeError(f"router {self.name}: begin() was given {len(counts)} replicas, route() "
                               f"{len(replicas)}; call begin(replicas) when a run starts")
        while heap[0][0] != counts[heap[0][1]]:  # stale: that replica's count changed since
            heappop(heap)
        c, i = heap[0]
        # the router's count also holds the arrivals the simulator keeps for a step in flight (vLLM's async
        # admission, sim/simulator.py): sent to the replica, not yet in its queue; it no longer holds an aborted
        # request whose KV still arrives there (``num_serving``)
        assert replicas[i].num_serving <= c, f"router {self.name}: count of replica {i} out of date"
        counts[i] = c + 1
        heapreplace(heap, (c + 1, i))
        return i

    def left(self, index, count):
        c = self.counts[index] = self.counts[index] - count
        heap = self.heap
        heappush(heap, (c, index))
        if len(heap) > 4 * len(self.counts) + 64:  # stale entries below the top: rebuild from the counts
            self._rebuild()


@register_router
class LeastLoad(Router):
    """The replica whose scheduler estimates the least load (``Scheduler.load``), the lowest index among equals.

    A load its policy declares ``load_from_state`` (it reads the replica's queues and requests, not the clock) is
    kept with the replica's ``version`` and computed again only after the replica changed: with many replicas
    most have not run a step since the last arrival."""

    name = "least-load"
    summary = "lowest load estimate from each replica's scheduler (Scheduler.load)"

    def __init__(self):
        self.loads: list[float] = []
        self.versions: list[int | None] = []  # None: computed at every arrival (a load that reads the clock)
        self.kept: list[bool] = []

    def begin(self, replicas):
        self.loads = [0.0] * len(replicas)
        self.versions = [None] * len(replicas)
        self.kept = [getattr(rep.scheduler, "load_from_state", False) for rep in replicas]

    def route(self, req, replicas, rng):
        if len(self.loads) != len(replicas):
            self.begin(replicas)
        loads, versions, kept = self.loads, self.versions, self.kept
        for i, rep in enumerate(replicas):
            v = rep.version
            if versions[i] != v:
                loads[i] = rep.scheduler.load(rep.view)
                if kept[i]:
                    versions[i] = v
        return min(range(len(replicas)), key=loads.__getitem__)

"""Routers: which replica takes each arrival (the cluster-level, 'global' scheduler)."""
from __future__ import annotations

import heapq
from typing import Callable

import numpy as np

from .engine.replica import Replica
from .routing.base import Router, router_defaults
from .routing.prefix_affinity import PrefixAffinity
from .routing.prefix_hash import PrefixHash


class RandomRouter(Router):
    name = "random"
    summary = "uniformly random replica (Bari et al. §4.1: with RAD, throughput-optimal)"
    routes_ahead = True

    def route(self, req, replicas, rng):
        return int(rng.integers(len(replicas)))


class RoundRobin(Router):
    name = "round-robin"
    summary = "every r-th request to the same replica (Bari et al.'s multi-replica script)"
    routes_ahead = True

    def __init__(self):
        self.next = 0

    def route(self, req, replicas, rng):
        i = self.next
        self.next = (i + 1) % len(replicas)
        return i

    def joined(self, replicas, position):
        if position <= self.next and len(replicas) > 1:
            self.next += 1  # the same replica is next

    def leaving(self, replicas, position):
        if position < self.next:
            self.next -= 1  # the replica that was next stays next (the successor of one leaving while next)
        self.next = self.next % len(replicas) if replicas else 0


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
        self.heap = [(c, i) for i, c in enumerate(self.counts)]
        heapq.heapify(self.heap)

    def route(self, req, replicas, rng):
        counts, heap = self.counts, self.heap
        if len(counts) != len(replicas):
            raise RuntimeError(f"router {self.name}: begin() was given {len(counts)} replicas, route() "
                               f"{len(replicas)}; call begin(replicas) when a run starts")
        while heap[0][0] != counts[heap[0][1]]:  # stale: that replica's count changed since
            heapq.heappop(heap)
        c, i = heap[0]
        # the router's count also holds the arrivals the simulator keeps for a step in flight (vLLM's async
        # admission, sim/simulator.py): sent to the replica, not yet in its queue
        assert replicas[i].num_outstanding <= c, f"router {self.name}: count of replica {i} out of date"
        counts[i] = c + 1
        heapq.heapreplace(heap, (c + 1, i))
        return i

    def left(self, index, count):
        c = self.counts[index] = self.counts[index] - count
        heap = self.heap
        heapq.heappush(heap, (c, index))
        if len(heap) > 4 * len(self.counts) + 64:  # stale entries below the top: rebuild from the counts
            heap[:] = [(c, i) for i, c in enumerate(self.counts)]
            heapq.heapify(heap)


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


ROUTERS: dict[str, Callable[[], Router]] = {
    cls.name: cls for cls in (RandomRouter, RoundRobin, LeastOutstanding, LeastLoad, PrefixAffinity, PrefixHash)}


def register_router(cls: type[Router]) -> type[Router]:
    if cls.name in ROUTERS:
        raise ValueError(f"router name {cls.name!r} registered twice")
    ROUTERS[cls.name] = cls
    return cls


def make_router(name: str, params: dict | None = None) -> Router:
    """Router ``name`` with ``params`` (its constructor's keyword parameters, checked by ``router_params``)."""
    if name not in ROUTERS:
        raise ValueError(f"unknown router {name!r}; known routers: {', '.join(sorted(ROUTERS))}")
    return ROUTERS[name](**(params or {}))


def router_params(name: str) -> dict:
    """Router ``name``'s parameters and their defaults (empty for an unknown name: the name's own check says so)."""
    cls = ROUTERS.get(name)
    return router_defaults(cls) if cls is not None else {}


@register_router
class PABRouter(Router):
    """Lyu et al. §3.4 PAB-LB: each replica reports its Prefill Admission Budget; the router sends a
    request to a replica whose budget covers its prompt and decrements its view of that budget.

    ``selection``: ``max_pab`` (most headroom), ``first_fit`` or ``best_fit`` (least
    headroom that fits). With no replica fitting, the one with most budget takes it (a gap in the paper; our resolution: no
    rejection). ``report_delay`` (s): a replica's report is refreshed only that long after the last
    one, the dispatches in between only decrement it (0: fresh at every arrival; vLLM's DP coordinator
    publishes every 0.1 s). Replicas whose scheduler has no ``pab(view, now)`` (non-FairBatching) are
    measured with Lyu et al.'s default SLOs.

    Against the paper (§3.4, §4, §5.3, §5.5; re-read line by line):
    * Which node: "a suitable node with sufficient budget", rule not given; ``max_pab`` is our choice.
    * No node fits: not said. §5.3 has FB-PAB engines "reject new requests, directing the global
      scheduler to route them to other nodes", so the paper's full system may reject; here the router
      never rejects, and PAB-LB with ``fairbatching-pab`` engines is the rejecting variant (the engine
      refuses exactly when the router's best replica does not fit: with ``report_delay`` 0 both see the
      same PAB). ``reproduce fairbatching-ablation --cluster-systems`` measures both.
    * Refresh: the paper's engines report "for each batch" and the view "will soon be updated in the
      next batch", i.e. as of the end of the last step; ``report_delay`` 0 reads it at the arrival
      instant (fresher than the paper), ``pab-delayed`` 0.1 s (staler, vLLM's publication period).
    * SLOs: the paper's PAB uses the "global SLO targets", one TTFT/TPOT pair for the cluster; here each
      replica's scheduler uses its own ``ttft_slo``/``tpot_slo`` (the same on every replica in every
      experiment), not per-request targets.
    """

    name = "pab"
    summary = "Lyu et al. PAB-LB: the replica with the most prefill admission budget that covers the prompt"
    selection = "max_pab"

    def __init__(self, report_delay: float = 0.0):
        if not report_delay >= 0:
            raise ValueError(f"router {self.name}: report_delay must be >= 0 seconds, got {report_delay!r}")
        self.report_delay = report_delay
        self.budget: list[float] = []
        self.reported: list[float] = []
        self._fallback: dict = {}

    def begin(self, replicas):
        self.budget = []  # every replica reports afresh at the next arrival
        self.reported = []

    def pab(self, replica: Replica, now: float) -> float:
        pab = getattr(replica.scheduler, "pab", None)
        if pab is not None:
            return pab(replica.view, now)
        from .schedulers.fairbatching.envelope import DEFAULT_TPOT, DEFAULT_TTFT
        from .schedulers.fairbatching.pab import compute_pab, node_requests
        from .schedulers.fairbatching.predictor import StepPredictor
        p = self._fallback.get(replica.index)
        if p is None:
            p = self._fallback[replica.index] = StepPredictor.fit_to(replica.batch_time)
        return compute_pab(node_requests(replica.view), now, DEFAULT_TTFT, DEFAULT_TPOT, p.a, p.b, p.c)

    def route(self, req, replicas, rng):
        now = req.arrival
        if len(self.budget) != len(replicas):
            self.budget = [0.0] * len(replicas)
            self.reported = [-float("inf")] * len(replicas)
        for k, rep in enumerate(replicas):
            if now - self.reported[k] >= self.report_delay:
                self.budget[k] = self.pab(rep, now)
                self.reported[k] = now
        k = self.pick(req.prompt_len)
        self.budget[k] -= req.prompt_len
        return k

    def pick(self, prompt: int) -> int:
        budget = self.budget
        fit = [k for k, b in enumerate(budget) if b >= prompt]
        if fit and self.selection == "first_fit":
            return fit[0]
        if fit and self.selection == "best_fit":
            return min(fit, key=lambda k: (budget[k], k))
        return max(fit or range(len(budget)), key=lambda k: (budget[k], -k))


@register_router
class PABFirstFit(PABRouter):
    name = "pab-first-fit"
    summary = "Lyu et al. PAB-LB, first replica (by index) whose prefill admission budget covers the prompt"
    selection = "first_fit"


@register_router
class PABBestFit(PABRouter):
    name = "pab-best-fit"
    summary = "Lyu et al. PAB-LB, the replica with the least prefill admission budget that still covers the prompt"
    selection = "best_fit"


@register_router
class PABDelayed(PABRouter):
    name = "pab-delayed"
    summary = "Lyu et al. PAB-LB (max budget) with reports refreshed every 0.1 s, as vLLM's DP coordinator publishes"

    def __init__(self, report_delay: float = 0.1):
        super().__init__(report_delay)


@register_router
class VLLMDataParallel(Router):
    """vLLM v0.10's data-parallel load balancer (DPLBAsyncMPClient.get_core_engine_for_request; Lyu et al.
    §3.4): the lowest 4·waiting + running, scanning from a rotating start with strict ``<``;
    the chosen engine's local waiting count is incremented at once, and the counts are refreshed from
    the engines every ``publish_interval`` seconds (the coordinator's 100 ms)."""

    name = "vllm-dp"
    summary = "vLLM's data-parallel balancer: min 4·waiting + running, counts published every 0.1 s"

    def __init__(self, publish_interval: float = 0.1, waiting_weight: int = 4):
        if not publish_interval >= 0:
            raise ValueError(f"router {self.name}: publish_interval must be >= 0 seconds, got {publish_interval!r}")
        self.publish_interval = publish_interval
        self.waiting_weight = waiting_weight
        self.counts: list[list[int]] = []
        self.published = -float("inf")
        self.start = 0

    def begin(self, replicas):
        self.counts = []  # the next arrival reads fresh counts
        self.start = self.start % len(replicas) if replicas else 0

    def route(self, req, replicas, rng):
        n = len(replicas)
        if len(self.counts) != n or req.arrival - self.published >= self.publish_interval:
            self.counts = [[len(r.view.waiting), r.view.num_running + len(r.view.swapped)] for r in replicas]
            self.published = req.arrival
        best, best_score = -1, None
        for j in range(n):
            k = (self.start + j) % n
            w, r = self.counts[k]
            score = self.waiting_weight * w + r
            if best_score is None or score < best_score:
                best, best_score = k, score
        self.start = (self.start + 1) % n
        self.counts[best][0] += 1
        return best


@register_router
class VLLMDataParallelFresh(VLLMDataParallel):
    """vLLM's DP balancer with the counts read at every arrival instead of every 0.1 s: the report-lag
    control for ``pab`` (which also reads fresh), so a router comparison is not a staleness comparison."""

    name = "vllm-dp-fresh"
    summary = "vLLM's data-parallel balancer with counts fresh at every arrival (no 0.1 s publication lag)"

    def __init__(self):
        super().__init__(publish_interval=0.0)


@register_router
class VLLMDataParallel019(VLLMDataParallel):
    """vLLM v0.19's DP balancer (the shared RTX PRO 6000 runs): the lowest 4·waiting + running, every scan from
    the same first engine (strict ``<``: ties go to engine 0; the rotating start came with vLLM PR #47420, July
    2026), the chosen engine's waiting count raised at once, counts republished every 0.1 s."""

    name = "vllm-dp-0.19"
    summary = "vLLM v0.19's DP balancer: min 4·waiting + running from engine 0, counts published every 0.1 s"

    def route(self, req, replicas, rng):
        self.start = 0
        return super().route(req, replicas, rng)


@register_router
class VLLMDataParallelLatest(Router):
    """vLLM's DP balancer since PR #49204 (July 2026; vllm/v1/engine/core_client.py,
    ``DPLBAsyncMPClient.get_core_engine_for_request``, v0.32.0): score = max(in-flight, waiting + running), plus
    6·waiting·max(0, KV use − 0.5) when requests wait; the lowest score from a rotating start (strict ``<``).
    In-flight is the client's exact count of its unfinished requests on the engine (one client here); waiting,
    running and KV use are the coordinator's snapshot, republished every 0.1 s, and the chosen engine's waiting
    count is raised at once between snapshots."""

    name = "vllm-dp-latest"
    summary = "vLLM's current DP balancer: min max(in-flight, waiting + running) + KV-pressure penalty, 0.1 s stats"

    def __init__(self, publish_interval: float = 0.1):
        self.publish_interval = publish_interval
        self.counts: list[list[float]] = []
        self.inflight: list[int] = []
        self.published = -float("inf")
        self.start = 0

    def begin(self, replicas):
        self.inflight = [0] * len(replicas)
        self.counts = []
        self.published = -float("inf")
        self.start = 0

    def route(self, req, replicas, rng):
        n = len(replicas)
        if len(self.inflight) != n:
            self.begin(replicas)
        if len(self.counts) != n or req.arrival - self.published >= self.publish_interval:
            self.counts = [[len(r.view.waiting), r.view.num_running + len(r.view.swapped), r.view.kv_utilisation]
                           for r in replicas]
            self.published = req.arrival
        best, best_score = 0, None
        for j in range(n):
            k = (self.start + j) % n
            waiting, running, kv = self.counts[k]
            score = max(self.inflight[k], waiting + running)
            if waiting:
                score += waiting * 6.0 * max(0.0, kv - 0.5)
            if best_score is None or score < best_score:
                best, best_score = k, score
        self.counts[best][0] += 1
        self.start = (self.start + 1) % n
        self.inflight[best] += 1
        return best

    def left(self, index, count):
        if self.inflight:
            self.inflight[index] -= count

    def joined(self, replicas, position):
        self.inflight.insert(position, 0)
        self.counts = []  # the coordinator's next snapshot includes it
        if position <= self.start and len(replicas) > 1:
            self.start += 1

    def leaving(self, replicas, position):
        del self.inflight[position]
        self.counts = []
        if position < self.start:
            self.start -= 1
        self.start = self.start % len(replicas) if replicas else 0

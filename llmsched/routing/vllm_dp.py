"""vLLM's data-parallel load balancers, release by release: ``vllm-dp``, ``vllm-dp-fresh``, ``vllm-dp-0.19``,
``vllm-dp-latest``."""
from __future__ import annotations

from .base import Router, check_param
from .registry import register_router


@register_router
class VLLMDataParallel(Router):
    """vLLM v0.10's data-parallel load balancer (DPLBAsyncMPClient.get_core_engine_for_request; Lyu et al.
    §3.4): the lowest 4·waiting + running, scanning from a rotating start with strict ``<``;
    the chosen engine's local waiting count is incremented at once, and the counts are refreshed from
    the engines every ``publish_interval`` seconds (the coordinator's 100 ms)."""

    name = "vllm-dp"
    summary = "vLLM's data-parallel balancer: min 4·waiting + running, counts published every 0.1 s"

    def __init__(self, publish_interval: float = 0.1, waiting_weight: int = 4):
        check_param(self, "publish_interval", publish_interval, publish_interval >= 0, ">= 0 seconds")
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

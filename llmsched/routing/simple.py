"""The routers that read no replica: ``random`` and ``round-robin``."""
from __future__ import annotations

from .base import Router
from .registry import register_router


@register_router
class RandomRouter(Router):
    name = "random"
    summary = "uniformly random replica (Bari et al. §4.1: with RAD, throughput-optimal)"
    routes_ahead = True

    def route(self, req, replicas, rng):
        return int(rng.integers(len(replicas)))


@register_router
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

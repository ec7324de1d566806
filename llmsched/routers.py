"""Routers: which replica takes each arrival (the cluster-level, 'global' scheduler)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .engine.replica import Replica
from .request import Request


class Router:
    name = "?"
    summary = ""

    def route(self, req: Request, replicas: list[Replica], rng: np.random.Generator) -> int:
        raise NotImplementedError


class RandomRouter(Router):
    name = "random"
    summary = "uniformly random replica (seed 000 §4.1: with RAD, throughput-optimal)"

    def route(self, req, replicas, rng):
        return int(rng.integers(len(replicas)))


class RoundRobin(Router):
    name = "round-robin"
    summary = "every r-th request to the same replica (seed 000's multi-replica script)"

    def __init__(self):
        self.next = 0

    def route(self, req, replicas, rng):
        i = self.next
        self.next = (i + 1) % len(replicas)
        return i


class LeastOutstanding(Router):
    name = "least-outstanding"
    summary = "fewest requests waiting, running or swapped (ties to the lowest index)"

    def route(self, req, replicas, rng):
        return min(range(len(replicas)), key=lambda i: replicas[i].num_outstanding)


class LeastLoad(Router):
    name = "least-load"
    summary = "lowest load estimate from each replica's scheduler (Scheduler.load)"

    def route(self, req, replicas, rng):
        return min(range(len(replicas)), key=lambda i: replicas[i].scheduler.load(replicas[i].view))


ROUTERS: dict[str, Callable[[], Router]] = {
    cls.name: cls for cls in (RandomRouter, RoundRobin, LeastOutstanding, LeastLoad)}


def register_router(cls: type[Router]) -> type[Router]:
    if cls.name in ROUTERS:
        raise ValueError(f"router name {cls.name!r} registered twice")
    ROUTERS[cls.name] = cls
    return cls


def make_router(name: str) -> Router:
    if name not in ROUTERS:
        raise ValueError(f"unknown router {name!r}; known routers: {', '.join(sorted(ROUTERS))}")
    return ROUTERS[name]()

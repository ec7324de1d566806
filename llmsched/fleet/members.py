"""The serving replicas of one role, and the router that routes over them while they change.

A router sees a plain list of replicas, as in a run without a fleet, and answers a position in it. When a replica
joins (it is appended) or begins draining (it is removed, later positions move down by one) the router is told
(``Router.joined``, ``Router.leaving``), so a router that keeps per-replica figures keeps them in step; the
requests a draining replica still holds are not reported to it. A replica keeps its index, unique across the
fleet, in requests and logs; only its position in the router's list changes.
"""
from __future__ import annotations

from ..engine.replica import Replica


class Members:
    def __init__(self, role: str, router):
        self.role = role
        self.router = router
        self.replicas: list[Replica] = []
        self.position: dict[int, int] = {}  # replica index -> its position in ``replicas``
        self.started = False

    def begin(self) -> None:
        """The run starts: the router begins over the replicas serving then."""
        self.started = True
        if hasattr(self.router, "begin"):  # a Router; a bare object with route() alone is told nothing
            self.router.begin(self.replicas)

    def join(self, rep: Replica) -> None:
        self.position[rep.index] = len(self.replicas)
        self.replicas.append(rep)
        if self.started and hasattr(self.router, "joined"):
            self.router.joined(self.replicas, len(self.replicas) - 1)

    def leave(self, rep: Replica) -> None:
        at = self.position.pop(rep.index)
        del self.replicas[at]
        for later in self.replicas[at:]:
            self.position[later.index] -= 1
        if self.started and hasattr(self.router, "leaving"):
            self.router.leaving(self.replicas, at)

    def route(self, req, rng) -> Replica | None:
        """The replica the router picks for ``req``; None when no replica of the role serves now."""
        replicas = self.replicas
        if not replicas:
            return None
        return replicas[self.router.route(req, replicas, rng)]

    def left(self, rep: Replica, count: int) -> None:
        """``count`` requests left ``rep``: its router hears of them while ``rep`` is one of its replicas."""
        at = self.position.get(rep.index)
        if at is not None:
            left = getattr(self.router, "left", None)
            if left is not None:
                left(at, count)

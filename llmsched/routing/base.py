"""The router interface: which replica takes each arrival (the cluster-level, 'global' scheduler), and a router's
parameters, read from its constructor's keyword defaults (so ``--router-param`` checks names and types there)."""
from __future__ import annotations

import inspect

import numpy as np

from ..engine.replica import Replica
from ..request import Request


class Router:
    name = "?"
    summary = ""
    # route() reads no replica state (only the request, its own counter and the run's random draws, in arrival
    # order): the simulator may then route arrivals before the replicas reach them and run each replica alone
    routes_ahead = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "route" in cls.__dict__ and "routes_ahead" not in cls.__dict__:
            cls.routes_ahead = False  # a new rule must declare it again

    def begin(self, replicas: list[Replica]) -> None:
        """A run over ``replicas`` starts (the simulator calls it before the first arrival)."""

    def route(self, req: Request, replicas: list[Replica], rng: np.random.Generator) -> int:
        raise NotImplementedError

    def joined(self, replicas: list[Replica], position: int) -> None:
        """In a fleet, a replica began serving: it is ``replicas[position]`` (the list routed over from now on).
        By default the router begins again over the new list, which is right for a router whose figures are read
        from the replicas themselves; one that keeps figures of its own per position keeps them in step here."""
        self.begin(replicas)

    def leaving(self, replicas: list[Replica], position: int) -> None:
        """In a fleet, the replica at ``position`` of the list routed over so far began draining: it takes no new
        request, ``replicas`` is the list without it (the later positions one lower), and the requests it still
        holds are not reported to ``left``. By default the router begins again over the new list."""
        self.begin(replicas)

    def left(self, index: int, count: int) -> None:
        """``count`` requests left replica ``index`` (finished or rejected): the simulator reports every request
        that leaves, so a router may keep its own per-replica counts instead of scanning the replicas."""


def router_defaults(cls: type[Router]) -> dict:
    """A router's parameters and their defaults: its constructor's keyword arguments."""
    params = inspect.signature(cls.__init__).parameters
    return {name: p.default for name, p in params.items()
            if name != "self" and p.default is not inspect.Parameter.empty}


def check_param(router: Router, name: str, value, ok: bool, must: str) -> None:
    """A router parameter's range check, in one wording for every router: unless ``ok``, a ValueError naming the
    router, the parameter, what it ``must`` be and the ``value`` given."""
    if not ok:
        raise ValueError(f"router {router.name}: {name} must be {must}, got {value!r}")


def least_outstanding(loads: list[int]) -> int:
    """The replica with the fewest requests outstanding, the lowest index among equals (``least-outstanding``'s
    choice, which the cache-aware routers fall back to)."""
    return loads.index(min(loads))

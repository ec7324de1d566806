"""A fleet: named pools of replicas, the paths requests take through them, and scale events scripted in time.

A plain run is one pool of always-on replicas (``Fleet.single``); a fleet file (``fleet_file.py``) gives several,
each overriding the run's fields (its own GPU, TP, scheduler, router). A stage of a path served by several pools
(two ``serve`` pools on different GPUs, say) is routed by one router over all their serving replicas, the fleet's
(``router``, ``router_params``; default the run's); a stage one pool serves is routed by that pool's router.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .path import OnePath, PathChooser
from .pool import Pool


@dataclass(frozen=True)
class ScaleEvent:
    """At ``at`` seconds, ``pool`` is set to ``replicas`` replicas (``FleetState.scale``, as an autoscaler would)."""

    at: float
    pool: str
    replicas: int

    def __post_init__(self):
        if not (isinstance(self.at, (int, float)) and not isinstance(self.at, bool) and 0 <= self.at < float("inf")):
            raise ValueError(f"scale event: at must be a finite time >= 0 seconds, got {self.at!r}")
        if not (isinstance(self.replicas, int) and not isinstance(self.replicas, bool) and self.replicas >= 0):
            raise ValueError(f"scale event: replicas must be an integer >= 0, got {self.replicas!r}")


@dataclass(frozen=True)
class Fleet:
    pools: tuple[Pool, ...]
    scale: tuple[ScaleEvent, ...] = ()
    router: dict = field(default_factory=dict)  # router / router_params for a stage several pools serve
    paths: PathChooser = field(default_factory=OnePath)
    source: str = "the fleet"  # where it was written (a fleet file's path), for messages

    def __post_init__(self):
        names = [p.name for p in self.pools]
        if not names:
            raise ValueError(f"{self.source}: a fleet needs at least one pool")
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"{self.source}: pool {twice[0]!r} is given twice; give each pool one name")
        for i, event in enumerate(self.scale, 1):
            if event.pool not in names:
                raise ValueError(f"{self.source}: scale event {i} (at {event.at:g} s) names pool {event.pool!r}, "
                                 f"which is no pool of the fleet ({', '.join(names)})")
        roles = {role for path in self.paths.paths for role in path.roles}
        for role in sorted(roles):
            if not self.pools_of(role):
                raise ValueError(f"{self.source}: no pool serves role {role!r}, which a request's path takes")
        for p in self.pools:
            if p.role not in roles:
                raise ValueError(f"{self.source}: pool {p.name!r} has role {p.role!r}, which no request's path "
                                 f"takes ({', '.join(sorted(roles))})")
        for role in sorted(roles):
            shared = self.pools_of(role)
            if len(shared) > 1:
                own = [p.name for p in shared if "router" in p.fields or "router_params" in p.fields]
                if own:
                    raise ValueError(f"{self.source}: pool {own[0]!r} sets its router, but pools "
                                     f"{', '.join(p.name for p in shared)} all serve {role!r} and one router "
                                     f"routes over them all: set router (and router_params) at the top of the file")

    @classmethod
    def single(cls, replicas: int = 1, name: str = "default") -> "Fleet":
        """Today's run: one pool of ``replicas`` always-on replicas with the run's own fields."""
        return cls((Pool(name, replicas),))

    def pool(self, name: str) -> Pool:
        for p in self.pools:
            if p.name == name:
                return p
        raise KeyError(f"{self.source}: no pool {name!r} ({', '.join(p.name for p in self.pools)})")

    def pools_of(self, role: str) -> list[Pool]:
        return [p for p in self.pools if p.role == role]

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles the pools serve, in the order their first pools are written."""
        return tuple(dict.fromkeys(p.role for p in self.pools))

    @property
    def is_static(self) -> bool:
        """No replica joins or leaves and every request is served in one stage: the replicas are those of a plain
        run (behind the stage's router), and the plain event loop runs them."""
        return (not self.scale and len(self.roles) == 1
                and all(len(path.stages) == 1 for path in self.paths.paths))

    @property
    def initial_replicas(self) -> int:
        return sum(p.replicas for p in self.pools)

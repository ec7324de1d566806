"""The fleet while a run goes: every replica it has made (indexed across the fleet), each one's life, the serving
replicas of each role behind their router, and ``scale``, the one way the fleet grows or shrinks.

``scale(pool, n, now)`` is what a scripted scale event calls and what an autoscaler calls: a pool below ``n``
provisions new replicas, which serve after their start-up phases; a pool above ``n`` gives up replicas, those not yet
serving first, the newest first among equals (Kubernetes' ReplicaSet order when it scales down: pods not yet ready
before ready ones, a more recently created pod before an older one; kubernetes.io, "ReplicaSet", "Scaling a
ReplicaSet"). A serving replica given up drains: the router stops sending it requests, it finishes what it holds,
and is gone when it holds nothing (``idle``, told by the event loop, which knows what is queued for it).

The event loop gives ``begin`` its ``schedule(t, action)``: the start-up phases' ends and the scripted scale events
are actions it runs at their time, ``action(now)``. What changes the fleet's size is a controller, told
``start(fleet_state, schedule)`` at ``begin``: the scripted events are one (``ScaleScript``); an autoscaler is another,
scheduling its own ticks, reading the pools' replicas and calling ``scale``.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

from ..engine.replica import Replica
from ..request import Status
from .autoscaler import RoleLoad
from .fleet import Fleet
from .lifecycle import DRAINING, GONE, SERVING, START_PHASES, STATES, Life, timeline
from .members import Members
from .pool import Pool


class PoolState:
    def __init__(self, spec: Pool, make: Callable[[int], Replica], gpus: int):
        self.spec = spec
        self.make = make  # a new replica of the pool, given its index in the fleet
        self.gpus = gpus  # GPUs a replica holds (its tensor parallelism)
        self.lives: list[Life] = []
        self.replicas: list[Replica] = []

    def active(self) -> list[Life]:
        """Replicas the pool counts toward its size: starting up or serving (not draining, not gone)."""
        return [life for life in self.lives if life.state not in (DRAINING, GONE)]


class ScaleScript:
    """The fleet's scripted scale events, a controller: each event is a call of ``scale`` at its time."""

    def __init__(self, events):
        self.events = tuple(events)

    def start(self, fleet: "FleetState", schedule) -> None:
        for event in self.events:
            schedule(event.at, partial(fleet.scale, event.pool, event.replicas))


class FleetState:
    def __init__(self, fleet: Fleet, makers: dict[str, Callable[[int], Replica]], routers: dict, gpus: dict[str, int],
                 controllers=()):
        """``makers``: per pool, a function that builds one of its replicas given its index in the fleet;
        ``routers``: per role, the router over the replicas serving it; ``gpus``: per pool, GPUs per replica;
        ``controllers``: what changes the fleet's size besides its scripted events (an autoscaler), each told
        ``start(fleet_state, schedule)`` when the run starts, to schedule its own actions (its ticks)."""
        self.fleet = fleet
        self.controllers = [ScaleScript(fleet.scale), *controllers]
        self.autoscalers = list(controllers)
        self.pools = {p.name: PoolState(p, makers[p.name], gpus[p.name]) for p in fleet.pools}
        self.members = {role: Members(role, routers[role]) for role in fleet.roles}
        self.replicas: list[Replica] = []  # by index in the fleet
        self.lives: list[Life] = []
        self.pool_index: list[int] = []  # each replica's pool, as its position in fleet.pools
        self.members_of: list[Members] = []
        self.draining: set[int] = set()
        self.unrouted = 0  # requests that found no serving replica
        self.transfers = None  # a disaggregated fleet's KV transfers (fleet/kv_transfers.py), set by its builder
        self.handoff = None  # and its prefill -> decode handoff (fleet/disagg.py)
        self.role_load = {role: RoleLoad() for role in fleet.roles}  # what an autoscaler reads of the front end
        self.scale_events = 0
        self.schedule = None
        self.quiet = False
        self.handing = frozenset()  # roles whose finishes hand requests on (begin)
        for pool in fleet.pools:  # the replicas of the run's start serve from t = 0
            for _ in range(pool.replicas):
                life = self.add_replica(self.pools[pool.name], SERVING, 0.0)
                self.members[pool.role].join(self.replicas[life.index])

    def begin(self, schedule: Callable[[float, Callable[[float], None]], None], quiet: bool = False,
              handing: frozenset = frozenset()) -> None:
        """The run starts: ``schedule(t, action)`` runs ``action(t)`` at time t; ``quiet``: a request's end adds no
        event (the source's completions add no request), so a replica may fold decode runs past finishes, unless
        its role is in ``handing``: a stage of that role hands its finished requests on (a prefill pool), and a
        handoff is an event at the finish's own time."""
        self.schedule = schedule
        self.quiet = quiet
        self.handing = handing
        for rep, members in zip(self.replicas, self.members_of):
            rep.set_quiet_finishes(quiet and members.role not in handing)
        for members in self.members.values():
            members.begin()
        for controller in self.controllers:
            controller.start(self, schedule)

    def add_replica(self, pool: PoolState, state: str, now: float) -> Life:
        index = len(self.replicas)
        try:
            rep = pool.make(index)
        except ValueError as e:
            raise ValueError(f"pool {pool.spec.name!r}: {e}") from None
        rep.set_quiet_finishes(self.quiet and pool.spec.role not in self.handing)
        life = Life(index, pool.spec.name, state, now)
        self.replicas.append(rep)
        self.lives.append(life)
        self.pool_index.append(self.fleet.pools.index(pool.spec))
        self.members_of.append(self.members[pool.spec.role])
        pool.lives.append(life)
        pool.replicas.append(rep)
        return life

    # --- the fleet's size ---------------------------------------------------
    def scale(self, pool: str, n: int, now: float) -> None:
        """Set ``pool`` to ``n`` replicas from ``now`` (module docstring)."""
        if pool not in self.pools:
            raise ValueError(f"scale: no pool {pool!r} in the fleet ({', '.join(self.pools)})")
        if not (isinstance(n, int) and n >= 0):
            raise ValueError(f"scale: pool {pool!r} to {n!r} replicas: give an integer >= 0")
        self.scale_events += 1
        state = self.pools[pool]
        active = state.active()
        for _ in range(n - len(active)):
            self.provision(state, now)
        if n < len(active):
            order = sorted(active, key=lambda life: (life.state == SERVING, -life.index))
            for life in order[:len(active) - n]:
                self.retire(life, now)

    def provision(self, pool: PoolState, now: float) -> None:
        life = self.add_replica(pool, START_PHASES[0], now)
        self.phase_started(life, now)

    def phase_started(self, life: Life, now: float) -> None:
        seconds = self.pools[life.pool].spec.durations.seconds(life.state)
        if seconds > 0:
            self.schedule(now + seconds, partial(self.phase_ended, life))
        else:
            self.phase_ended(life, now)

    def phase_ended(self, life: Life, now: float) -> None:
        """``life``'s start-up phase ends at ``now``: the next begins, or after the last it serves."""
        if life.state not in START_PHASES:
            return  # given up before it served
        at = START_PHASES.index(life.state)
        if at + 1 < len(START_PHASES):
            life.enter(START_PHASES[at + 1], now)
            self.phase_started(life, now)
        else:
            life.enter(SERVING, now)
            self.members_of[life.index].join(self.replicas[life.index])

    def retire(self, life: Life, now: float) -> None:
        """Give up a replica: one not yet serving is gone at once; a serving one drains."""
        if life.state == SERVING:
            life.enter(DRAINING, now)
            self.members_of[life.index].leave(self.replicas[life.index])
            self.draining.add(life.index)
        else:
            life.enter(GONE, now)

    def idle(self, rep: Replica, now: float) -> None:
        """The event loop's word that draining ``rep`` holds nothing any more: it is gone."""
        self.draining.discard(rep.index)
        self.lives[rep.index].enter(GONE, now)

    # --- requests ------------------------------------------------------------
    def route(self, req, rng, role: str = "serve") -> Replica | None:
        load = self.role_load[role]
        load.arrived += 1
        load.prompt_tokens += req.prompt_len
        rep = self.members[role].route(req, rng)
        if rep is None:
            self.unrouted += 1
        return rep

    def left(self, rep: Replica, done: list) -> None:
        """Requests ``done`` left ``rep``: its router hears of them, its role's counters count the finished."""
        members = self.members_of[rep.index]
        members.left(rep, len(done))
        load = self.role_load[members.role]
        for r in done:
            if r.status is Status.FINISHED:
                load.finished += 1
                load.output_tokens += r.num_generated

    def pool_of(self, rep: Replica) -> str:
        return self.fleet.pools[self.pool_index[rep.index]].name

    # --- accounting ------------------------------------------------------------
    def summary(self, end: float) -> dict:
        """Per pool, up to the run's ``end``: replicas over time by state, seconds billed (replica and GPU), busy
        time (its replicas' steps) and utilisation (busy over the seconds its replicas served or drained)."""
        pools = {}
        for name, pool in self.pools.items():
            billed = sum(life.billed(end) for life in pool.lives)
            serving = sum(life.seconds_in((SERVING, DRAINING), end) for life in pool.lives)
            busy = sum(rep.busy_time for rep in pool.replicas)
            rows = timeline(pool.lives, end)
            start = {"t": 0.0, **dict.fromkeys(STATES[:-1], 0), SERVING: pool.spec.replicas}
            if rows[0] != start:  # a controller changed the pool at t = 0: its starting replicas come first
                rows.insert(0, start)
            pools[name] = {
                "role": pool.spec.role, "gpus_per_replica": pool.gpus, "replicas_at_start": pool.spec.replicas,
                "replicas_made": len(pool.lives), "replicas_max": max(sum(v for k, v in row.items() if k != "t")
                                                                       for row in rows),
                "phases_s": {p: pool.spec.durations.seconds(p) for p in START_PHASES},
                "billed_replica_s": billed, "billed_gpu_s": billed * pool.gpus, "serving_replica_s": serving,
                "busy_s": busy, "utilisation": busy / serving if serving > 0 else float("nan"),
                "billed_utilisation": busy / billed if billed > 0 else float("nan"), "timeline": rows}
        out = {"billed_gpu_s": sum(p["billed_gpu_s"] for p in pools.values()),
               "busy_s": sum(p["busy_s"] for p in pools.values()), "scale_events": self.scale_events,
               "unrouted": self.unrouted, "pools": pools}
        if self.transfers is not None:
            out["kv_transfer"] = self.transfers.summary(end)
        if self.autoscalers:  # only a run that has them: a fleet's summary is otherwise what it was
            out["autoscalers"] = {a.pool: a.describe() for a in self.autoscalers if hasattr(a, "describe")}
        return out

"""A request's path through the fleet, as data: the stages it is served in, each by the pools of one role, and the
handoff between two stages.

Today every request takes ``SERVE``: one stage, served whole by the ``serve`` pools. A path of several stages is
what prefill/decode disaggregation is (prefill in one pool, its KV over a link, decode in another, as vLLM's
disaggregation proxy runs it); the simulator's hook for it is here and in ``sim/fleet_loop.py``: when a request
leaves a stage that is not its last, finished, the stage's ``Handoff`` gives the request the next stage serves and
the time it is ready there (after a transfer, say), and the fleet routes it to that stage then. A request rejected,
or still in flight at the horizon, in any stage leaves the run from there; only the last stage's request is
recorded as the one the client saw (``Path.report`` gives the client's request for one that leaves earlier). A
stage that ``receives_kv`` gets its request without the prompt's KV: the replica reserves its blocks and the fleet
moves the KV (``fleet/kv_transfers.py``) before the request can run.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from ..request import Request


@dataclass(frozen=True)
class Stage:
    role: str  # the pools of this role serve the stage
    # its request arrives without its prompt's KV, which a transfer brings (``engine/remote_kv.py``): the replica
    # receives it, reserves the prompt's blocks and waits for the KV instead of computing the prompt
    receives_kv: bool = False


class Handoff(Protocol):
    def __call__(self, req: Request, now: float) -> tuple[Request, float]:
        """``req`` finished its stage at ``now``: the request the next stage serves (a new one, as a disaggregated
        deployment sends the decode instance its own copy) and when it is ready there (>= ``now``)."""


@dataclass(frozen=True)
class Path:
    stages: tuple[Stage, ...]
    handoffs: tuple[Handoff, ...] = ()  # between stage i and stage i + 1
    # the request the first stage serves, given the client's (default: the client's own; a disaggregated path's
    # prefill serves a copy asking one token, as vLLM's proxy sends ``max_tokens=1``)
    begin: Callable[[Request], Request] | None = None
    # the client's request, as recorded, for a stage's request that leaves before the last stage (rejected, or
    # cut by the horizon): default the stage's request itself
    report: Callable[[Request], Request] | None = None
    # the client's request, as recorded, for the last stage's request when it leaves (default itself)
    finish: Callable[[Request], Request] | None = None

    def __post_init__(self):
        if not self.stages:
            raise ValueError("a path needs at least one stage")
        if len(self.handoffs) != len(self.stages) - 1:
            raise ValueError(f"a path of {len(self.stages)} stages needs {len(self.stages) - 1} handoff(s), got "
                             f"{len(self.handoffs)}")

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(s.role for s in self.stages)


SERVE = Path((Stage("serve"),))

class PathChooser(Protocol):
    """Which path a request takes (a disaggregation decider is one: short prompts straight to decode); ``paths``
    lists every path it may choose, so the fleet can check their roles before the run."""

    paths: tuple[Path, ...]

    def __call__(self, req: Request) -> Path: ...


class OnePath:
    """Every request takes ``path``."""

    def __init__(self, path: Path = SERVE):
        self.path = path
        self.paths = (path,)

    def __call__(self, req: Request) -> Path:
        return self.path

    def __repr__(self) -> str:
        return f"OnePath({self.path.roles})"

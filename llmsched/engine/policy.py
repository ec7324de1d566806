"""What the mechanism asks of a policy: the calls a replica makes, nothing else.

Schedulers (llmsched/schedulers/base.py) satisfy this protocol; the engine depends on it, never on them, so
imports run one way: mechanism -> view -> policy.
"""
from __future__ import annotations

from typing import Protocol

from ..request import Request
from .plan import BatchPlan
from .view import ReplicaView


class Policy(Protocol):
    name: str
    needs_oracle: bool
    recompute_only: bool
    steady_decodes: bool
    steady_after_finishes: bool
    plans_decode_group: bool
    looks_up_in_order: bool

    def schedule(self, view: ReplicaView) -> BatchPlan: ...

    def unservable(self, req: Request, view: ReplicaView) -> str | None: ...

    def on_arrival(self, req: Request, view: ReplicaView) -> str | None: ...

    def on_step_end(self, view: ReplicaView, plan: BatchPlan, duration: float) -> None: ...

    def promised_blocks(self, view: ReplicaView) -> int: ...

"""The policy side of the policy/mechanism split.

A scheduler reads a ``ReplicaView`` and returns a ``BatchPlan``; it never touches
blocks or request state. Its parameters are dataclass fields, so the registry can
list them with their defaults and build one from a config file or the CLI.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from ..request import Request


@dataclass
class Scheduler:
    name: ClassVar[str] = "?"
    source: ClassVar[str] = ""  # paper / system, seed and section
    needs_oracle: ClassVar[bool] = False  # decides from true output lengths (runs only with oracle=True)

    def schedule(self, view: ReplicaView) -> BatchPlan:
        raise NotImplementedError

    def on_arrival(self, req: Request, view: ReplicaView) -> str | None:
        """Admission control at arrival: a reason to reject ``req``, or None to queue it."""
        return None

    def on_step_end(self, view: ReplicaView, plan: BatchPlan, duration: float) -> None:
        """Called after every step with what ran and how long it took (observed, not predicted)."""

    def load(self, view: ReplicaView) -> float:
        """Load estimate for routers; default: tokens of work outstanding (prefill left + one per decode)."""
        pending = 0
        for r in view.waiting:
            pending += r.prompt_len + r.num_generated
        for r in view.running:
            pending += r.prompt_len + r.num_generated - r.num_computed
        for r in view.swapped:
            pending += 1
        return float(pending)

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def describe(self) -> dict:
        return {"name": self.name, "source": self.source, "params": self.params()}


"""What a scheduler returns: the content of the next engine step."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..request import Request


@dataclass(slots=True)
class BatchPlan:
    """One step's work.

    - ``decodes``: running requests that each compute one token (their last output).
    - ``prefills``: (request, tokens) chunks of prompt (or recompute) work; a waiting request
      listed here is admitted to the running set. A swapped request listed in either
      list is swapped back in first (its transfer time is added to the step).
    - ``preempt``: running requests to preempt before the step (recompute or swap, as the
      replica is configured), which frees their blocks.
    - ``reject``: (waiting request, reason) pairs the policy refuses for good.
    - ``wait_until``: with no work, the time to be asked again even if nothing arrives.
    - ``decode_group``: decode every member of the view's ``decode_group`` (every running request in decode
      phase) without listing them; ``decodes`` and ``preempt`` stay empty then, and ``num_tokens`` leaves the
      group's one token each out. A policy sets it only while the view has a group with members.
    """

    decodes: list[Request] = field(default_factory=list)
    prefills: list[tuple[Request, int]] = field(default_factory=list)
    preempt: list[Request] = field(default_factory=list)
    reject: list[tuple[Request, str]] = field(default_factory=list)
    wait_until: float | None = None
    decode_group: bool = False

    @property
    def num_tokens(self) -> int:
        return len(self.decodes) + sum(n for _, n in self.prefills)

    @property
    def has_work(self) -> bool:
        return bool(self.decodes or self.prefills or self.decode_group)

"""What WAIT and Nested WAIT decide alike (Ao et al.): the thresholds of a decision, fixed or drawn, and
the wake-up of an idle replica when a group that waited ``max_wait`` may run a partial cohort."""
from __future__ import annotations

from ...engine.plan import BatchPlan
from ..base import Scheduler


class ThresholdPolicy(Scheduler):
    """A policy that admits cohorts of n prompts per group (WAIT's types, Nested WAIT's segments). A subclass sets
    up ``n`` (and ``random_``, the per-decision draws of ``rule=fluid-random``, or None) in ``setup`` and forms a
    batch for given thresholds in ``decide``."""

    # a prompt a prefill instance sent waits in its group's queue holding its blocks; with nothing else planned it
    # runs whatever the group's threshold (CohortPlan.finish), and the cohorts' memory bound leaves its blocks out
    serves_transferred_kv = True

    def setup(self, view) -> None:
        raise NotImplementedError

    def decide(self, view, n: list[int]) -> BatchPlan:
        raise NotImplementedError

    def schedule(self, view) -> BatchPlan:
        if not hasattr(self, "n"):
            self.setup(view)
        n = self.draw(view)
        plan = self.decide(view, n)
        if not plan.has_work and 0 in n:  # a draw of 0 time-shares iterations; with none running, admit
            plan = self.decide(view, [max(1, x) for x in n])
        return plan

    def draw(self, view) -> list[int]:
        """This decision's thresholds: fixed, or drawn (an idle GPU time-shares nothing, so a 0 becomes 1)."""
        if self.random_ is None:
            return self.n
        n = self.random_.draw()
        return n if view.running else [max(1, x) for x in n]


def wake_when_late(plan: BatchPlan, since, wait: float, now: float) -> BatchPlan:
    """An idle ``plan`` wakes the replica when the first group that has waited since a time in ``since`` reaches
    ``wait`` seconds (0: never), so it runs its partial cohort then."""
    if not plan.has_work and wait:
        pending = [t + wait for t in since if now < t + wait < float("inf")]
        if pending:
            plan.wait_until = min(pending)
    return plan

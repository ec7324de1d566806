"""A replica's clock and the step it has in flight: the one owner of its times.

The replica, its decode-group path (group_steps.py) and the fast-forward of decode runs (decode_run.py) all move
time forward; they do it through these methods, so the times and the launched step (its plan, its step-log row, its
preemptions) are written in one place. ``now`` is the time of the last event the replica saw; a step launched at
``step_start`` ends at ``step_end``; ``last_end`` is when the step before ended (the idle time before a step, for a
wake-up cost); ``swap_time`` is host-to-GPU transfer time owed by the next step.
"""
from __future__ import annotations

import math


class StepClock:
    __slots__ = ("now", "busy", "plan", "row", "step_preempted", "step_start", "step_end", "last_end", "wake_at",
                 "swap_time")

    def __init__(self):
        self.now = 0.0
        self.busy = False  # a step is in flight
        self.plan = None  # the step in flight's BatchPlan
        self.row = (0, 0, 0, 0)  # the step in flight's prefill tokens, prefills, decodes, context sum
        self.step_preempted = 0  # preemptions and evictions the step in flight carries into its row
        self.step_start = 0.0
        self.step_end = math.nan  # when the step in flight ends
        self.last_end = 0.0  # end of the previous step (the clock origin before any)
        self.wake_at = None  # idle: when the policy asked to be asked again (None: at the next arrival)
        self.swap_time = 0.0  # host->GPU transfers done before the policy decided, charged to the next step

    def tick(self, now) -> None:
        """An event reaches the replica at ``now``."""
        self.now = now

    def asleep_until(self, wake_at) -> None:
        """Idle, the policy wants to be asked again at ``wake_at`` (None: at the next arrival)."""
        self.wake_at = wake_at

    def owe(self, seconds) -> None:
        """Transfer time the next step pays (a swap-in before the policy decided)."""
        self.swap_time += seconds

    def pay(self):
        """The transfer time owed, now charged to the step being launched."""
        owed = self.swap_time
        self.swap_time = 0.0
        return owed

    def launched(self, plan, row, preempted) -> None:
        """The step being launched: its plan, its step-log row figures and the preemptions it carries."""
        self.plan = plan
        self.row = row
        self.step_preempted = preempted

    def carries(self, preempted) -> None:
        """The step just launched also carries ``preempted`` preemptions into its row (those done for it before
        an overflow eviction cut its plan)."""
        self.step_preempted += preempted

    def listed(self, plan) -> None:
        """The step in flight, launched with the decode group, ends as ``plan``, which lists the decodes it runs
        (the group was settled while it ran)."""
        self.plan = plan

    def start(self, now, duration) -> None:
        """The launched step runs from ``now`` for ``duration``."""
        self.busy = True
        self.step_start = now
        self.step_end = now + duration

    def repeat(self, now) -> None:
        """The step in flight ended at ``now`` and the same plan starts at once (``GroupSteps.end_and_repeat``)."""
        self.now = self.last_end = now
        self.wake_at = None
        self.step_start = now

    def ended(self, now) -> None:
        """The step in flight's end is recorded (the replica is still busy with it until ``idle``)."""
        self.last_end = now

    def idle(self) -> None:
        """The step in flight has ended and left."""
        self.busy = False
        self.plan = None

    def folded(self, start, end, plan, row) -> None:
        """Decode steps were run at once (decode_run.py): the last of them, ``plan`` launched at ``start`` with
        ``row`` and no preemption, is in flight until ``end``."""
        self.now = self.step_start = start
        self.step_end = end
        self.plan = plan
        self.row = row
        self.step_preempted = 0

    def stretched(self, end) -> None:
        """The step in flight ends at ``end`` instead: a data-parallel rank waits for the group's slowest."""
        self.step_end = end

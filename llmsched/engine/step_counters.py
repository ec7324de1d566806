"""What a replica counts over a run: its steps, their busy time and the last step times a policy may read, and its
preemptions (swap fallbacks and overflow evictions among them). The replica's one owner of these figures: the
replica, its decode-group path, the fast-forward of decode runs (decode_run.py) and preemption (preemption.py)
report to it; the run's summary and the view read it.
"""
from __future__ import annotations

from collections import deque

RECENT = 64  # step times a policy sees (``ReplicaView.recent_step_times``)


class StepCounters:
    __slots__ = ("num_steps", "busy_time", "recent_steps", "num_preemptions", "swap_fallbacks", "num_evictions")

    def __init__(self):
        self.num_steps = 0
        self.busy_time = 0.0
        self.recent_steps: deque = deque(maxlen=RECENT)
        self.num_preemptions = 0
        self.swap_fallbacks = 0  # swap preemptions done by recompute: no host space left
        self.num_evictions = 0  # overflow evictions (also preemptions)

    def step(self, duration) -> None:
        """A step of ``duration`` seconds ended."""
        self.num_steps += 1
        self.busy_time += duration
        self.recent_steps.append(duration)

    def folded(self, steps, busy_time) -> None:
        """``steps`` more steps ended in a fast-forward, which appended their durations to ``recent_steps`` and
        summed them, one by one as ``step`` does, into ``busy_time``."""
        self.num_steps += steps
        self.busy_time = busy_time

    def preempted(self) -> None:
        self.num_preemptions += 1

    def swap_fell_back(self) -> None:
        """A swap preemption was done by recompute: no host space was left."""
        self.swap_fallbacks += 1

    def evicted(self) -> None:
        """An overflow eviction, which is also a preemption."""
        self.num_evictions += 1
        self.num_preemptions += 1

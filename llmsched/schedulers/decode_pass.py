"""The decode pass shared by vLLM-style policies: every running decode, FCFS, preempting the newest on block shortage;
and ``RunningWork``, the running requests split by phase, which plans that pass from the replica's decode group while
one is formed.

In the simulator the replica may keep its running requests in decode phase as one group (engine/decode_group.py):
their count, their block crossings and the other running requests (``partials``), without their own fields being
written at every step. A policy that reads the running requests through ``RunningWork`` gets that fast path without
writing it: the decodes are planned from the group (``BatchPlan.decode_group``) whenever the plan would take them
all, and anything else (a preemption, a cap that cuts the decodes) settles the group and runs the same pass over the
requests themselves. Both give the same plan; the vLLM plug-in's view has no group.
"""
from __future__ import annotations

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView


def split_running(running, block_size: int) -> tuple[list, list, int]:
    """One pass over ``running``: (requests in decode phase, the others, decodes crossing into a new block)."""
    ready, others, grow = [], [], 0
    for r in running:
        computed = r.num_computed
        if r.num_generated and computed + 1 == r.prompt_len + r.num_generated:
            ready.append(r)
            if computed >= r.num_blocks * block_size:
                grow += 1
        else:
            others.append(r)
    return ready, others, grow


def is_decode_phase(r) -> bool:
    """Whether ``r`` has computed every token but its last: its next step decodes."""
    return r.num_generated > 0 and r.num_computed + 1 == r.prompt_len + r.num_generated


def prompt_reserve(r, block_size: int) -> int:
    """The blocks ``r``'s unfinished prompt (or recompute) still needs beyond those it holds."""
    need = -(-(r.prompt_len + r.num_generated) // block_size) - r.num_blocks
    return need if need > 0 else 0


def add_decodes(view: ReplicaView, plan: BatchPlan, running=None, limit: int | None = None,
                reserve: int = 0, split: tuple[list, list, int] | None = None) -> int:
    """Add a decode for each decode-phase request of ``running`` (default: the view's, in order).

    When a decode needs a block and none is free, preempt from the tail of ``running``
    (the newest under FCFS), the request itself last. Stops after ``limit`` decodes.
    ``reserve``: the blocks the unfinished prompts of ``running`` still need (``prompt_reserve``), held back from
    the decodes; a preempted prompt gives its share back (as Sarathi frees a prompt's KV, allocated at admission).
    A decode that needs no new block runs whatever the reserve. Returns the KV blocks still free (beyond
    ``reserve``) after these decodes and preemptions. Requests not in decode phase are skipped.
    ``split`` is ``split_running(running, ...)`` when the caller has it already.
    """
    running = view.running if running is None else running
    bs = view.block_size
    free = view.free_blocks - reserve - sum(view.decode_blocks(r) for r in plan.decodes)
    ready, _, need = split if split is not None else split_running(running, bs)
    if need <= free and (limit is None or len(ready) <= limit):  # the common case: all fit
        plan.decodes.extend(ready)
        return free - need
    end = len(running)
    decodes = plan.decodes
    preempt = plan.preempt
    limit = end if limit is None else limit
    i = 0
    while i < end and len(decodes) < limit:
        r = running[i]
        if r.num_generated == 0 or r.num_computed + 1 != r.prompt_len + r.num_generated:
            i += 1
            continue
        need = 1 if r.num_computed + 1 > r.num_blocks * bs else 0
        while need > free and end > i:
            end -= 1
            victim = running[end]
            preempt.append(victim)
            free += view.preempt_frees(victim)
            if reserve and not is_decode_phase(victim):
                free += prompt_reserve(victim, bs)
        if end == i:
            break  # the request preempted itself
        free -= need
        decodes.append(r)
        i += 1
    return free


class RunningWork:
    """The running requests one step plans from: those in decode phase (``decodes``; while the replica's decode
    group is formed, ``group`` stands for them and none of them is read), the others (``partials``: prompts or
    recomputes not done) and the decodes that cross into a new KV block (``grow``), in the policy's ``order`` (a
    sort key; None: admission order)."""

    __slots__ = ("view", "order", "group", "running", "decodes", "partials", "grow")

    def __init__(self, view: ReplicaView, order=None):
        self.view = view
        self.order = order
        group = view.decode_group
        if group is None:
            self.group = None
            self.split()
        else:
            self.group = group
            self.running = self.decodes = None
            partials = group.partials
            self.partials = sorted(partials, key=order) if order is not None and partials else partials
            self.grow = group.blocks_needed

    def split(self) -> None:
        """List the running requests (reading ``view.running`` dissolves a formed group: the members' fields are
        exact again)."""
        running = self.view.running
        if self.order is not None:
            running = sorted(running, key=self.order)
        self.running = running
        self.decodes, self.partials, self.grow = split_running(running, self.view.block_size)
        self.group = None

    @property
    def num_decodes(self) -> int:
        group = self.group
        return group.size if group is not None else len(self.decodes)

    def decode_all(self, plan: BatchPlan, limit: int | None = None) -> None:
        """Every request in decode phase decodes (the blocks they take are the replica's to check); with more than
        ``limit`` (the step's token budget) the first ``limit`` do and the rest wait, as in vLLM v1."""
        group = self.group
        if group is not None and (limit is None or group.size <= limit):
            plan.decode_group = group.size > 0
            return
        if group is not None:
            self.split()
        plan.decodes.extend(self.decodes if limit is None else self.decodes[:limit])

    def add_decodes(self, plan: BatchPlan, reserve: int = 0, limit: int | None = None,
                    among_decodes: bool = False) -> int:
        """``add_decodes`` of the running requests in order: every decode when they all fit ``limit`` and the free
        blocks less ``reserve`` (from the group, when formed); else the newest preempted (from the decodes alone,
        ``among_decodes``) as the pass over the requests preempts them. Returns the blocks still free."""
        group = self.group
        if group is not None:
            free = self.view.free_blocks - reserve
            if self.grow <= free and (limit is None or group.size <= limit) and not plan.decodes:
                plan.decode_group = group.size > 0
                return free - self.grow
            self.split()
        if among_decodes:
            return add_decodes(self.view, plan, self.decodes, limit, reserve, (self.decodes, [], self.grow))
        return add_decodes(self.view, plan, self.running, limit, reserve, (self.decodes, self.partials, self.grow))

"""Running requests first, then admissions: the step of vLLM's v1 scheduler, Sarathi-Serve and Orca, with each
policy's rule stated once as hooks.

A ``RunningFirst`` policy serves its running requests in its ``running_order`` (a sort key; None: admission order):
each decode-phase request its one token, each unfinished prompt (or recompute) a chunk (``chunk``), under the step's
token budget (``step_budget``) and the free KV blocks, the newest in that order preempted when a block is short;
then, when nothing was preempted and requests wait, its ``admit`` hook admits them with what is left. Two forms:

* ``decodes_first`` (Sarathi-Serve, Orca): every decode before any chunk, never cut by the budget (a step holds at
  most max(budget, decodes) tokens); with ``reserves_prompts`` (Sarathi reserves a prompt's KV at admission) the
  blocks the unfinished prompts still need are held back from the decodes, so their chunks need no block of their
  own; without, a chunk that finds too few free blocks waits, and so do the ones after it.
* in admission order (vLLM v1, ``decodes_first = False``, no ``running_order``): decodes and chunks in one pass,
  each taking budget and blocks in turn, the pass ending when the budget is spent.

The plan is derived here, once, for both forms of the running requests the simulator may hand a policy: listed, or
(while the replica's decode group is formed, engine/decode_group.py) the decode-phase ones as one group. The group
is planned from its totals whenever the pass would take every decode without preempting (for the admission-order
form: every decode ahead of every unfinished prompt, within the budget); otherwise the group is settled and the
pass runs over the requests. Both give the same plan, so a policy written with these hooks alone gets the fast path
and its three properties (``steady_decodes``, ``steady_after_finishes``, ``plans_decode_group``) by construction:
with nothing waiting, the plan depends only on the running requests and the free blocks. Its hooks must keep that
so: decide from the queues and blocks, not the clock or step times (``admit`` is asked only while requests wait).
"""
from __future__ import annotations

from typing import ClassVar

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from ..request import Request
from .base import Scheduler
from .decode_pass import RunningWork, prompt_reserve


class RunningFirst(Scheduler):
    """Running requests in the policy's ``running_order``, then ``admit``; the plan (and its decode-group path)
    derived."""

    running_order: ClassVar = None  # sort key of the running requests (served, and preempted from the end, in it)
    decodes_first: ClassVar[bool] = True  # every decode before any prompt chunk; False: one pass in admission order
    reserves_prompts: ClassVar[bool] = False  # unfinished prompts' remaining KV held back from the decodes
    steady_decodes = True  # the rule reads queues and blocks only (the hooks' contract)
    steady_after_finishes = True  # after a finish, nothing waiting: every remaining decode is planned again
    plans_decode_group = True  # the running requests are read through RunningWork

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.decodes_first and cls.running_order is not None:
            raise TypeError(f"scheduler {cls.__name__}: a pass in admission order (decodes_first False) takes no "
                            f"running_order")

    # --- the hooks ----------------------------------------------------------------------------------------------
    def step_budget(self, view: ReplicaView) -> int:
        """Tokens one step may hold (decodes never cut by it when ``decodes_first``)."""
        return view.max_num_batched_tokens

    def chunk(self, r: Request, budget: int) -> int:
        """Tokens of running request ``r``'s unfinished prompt (or recompute) this step, with ``budget`` left
        (which may be spent: then <= 0, none). Default: as many as the budget holds."""
        n = r.prompt_len + r.num_generated - r.num_computed
        return n if n < budget else budget

    def admit(self, view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """Add waiting requests (``view.waiting``) to ``plan``: ``budget`` tokens and ``free`` KV blocks are left
        after the running requests' work, and ``room`` seats under ``max_num_seqs``."""
        raise NotImplementedError

    def promised_blocks(self, view: ReplicaView) -> int:
        """With ``reserves_prompts``: the blocks the unfinished prompts still need (held back from the decodes, so
        nothing else may take them either)."""
        if not self.reserves_prompts or not view.num_running:
            return 0
        return prompt_blocks_left(RunningWork(view).partials, view.block_size)

    # --- the plan -------------------------------------------------------------------------------------------------
    def schedule(self, view: ReplicaView) -> BatchPlan:
        plan = BatchPlan()
        if self.decodes_first:
            work = RunningWork(view, self.running_order)
            left = self._decodes_then_chunks(view, plan, work)
            if left is None:  # a chunk must preempt, which a plan of the decode group cannot: over the requests
                work.split()
                plan.decode_group = False
                plan.prefills.clear()
                left = self._decodes_then_chunks(view, plan, work)
            budget, free = left
        else:
            budget, free = self._in_admission_order(view, plan)
        if plan.preempt:
            return plan
        if view.waiting:
            self.admit(view, plan, budget, free, view.max_num_seqs - view.num_running)
        return plan

    def _decodes_then_chunks(self, view: ReplicaView, plan: BatchPlan, work: RunningWork):
        """Every decode (preempting the newest when a block is short), then the unfinished prompts' chunks in
        order: (budget, free) left; None when a chunk would preempt while ``work`` plans from the decode group."""
        partial = work.partials
        bs = view.block_size
        reserves = self.reserves_prompts
        free = work.add_decodes(plan, reserve=prompt_blocks_left(partial, bs) if reserves and partial else 0)
        if plan.preempt:
            gone = {r.id for r in plan.preempt}
            partial = [r for r in partial if r.id not in gone]
        budget = self.step_budget(view) - (work.num_decodes if plan.decode_group else len(plan.decodes))
        prefills = plan.prefills
        end = len(partial)
        i = 0
        while i < end:
            r = partial[i]
            i += 1
            n = self.chunk(r, budget)
            if n <= 0:
                continue
            if not reserves:
                need = -(-(r.num_computed + n) // bs) - r.num_blocks
                if need > free:  # the newest unfinished prompts make room, as vLLM preempts (itself last)
                    if plan.decode_group:
                        return None
                    while need > free and end >= i:
                        end -= 1
                        victim = partial[end]
                        plan.preempt.append(victim)
                        free += view.preempt_frees(victim)
                    if end < i:
                        break  # it preempted itself
                if need > 0:
                    free -= need
            prefills.append((r, n))
            budget -= n
        return budget, free

    def _in_admission_order(self, view: ReplicaView, plan: BatchPlan) -> tuple[int, int]:
        """The running requests' work in order, preempting from the back where the KV blocks run out. Over vLLM's
        windowed KV groups (engine/kv_windows.py; the replica then forms no decode group) a step takes
        ``view.extra_blocks``, and a negative count (blocks that left a window) frees them for the requests after
        it, as vLLM's ``allocate_slots`` frees them before it counts."""
        budget = self.step_budget(view)
        windowed = view.kv_windowed
        extra_blocks = view.extra_blocks
        group = view.decode_group
        if group is not None:
            partials = group.partials
            left = budget - group.size
            free = view.free_blocks - group.blocks_needed
            if (not partials or partials[0].order >= group.max_order) and left >= 0 and free >= 0:
                # every decode comes ahead of every unfinished prompt and fits: the group, then the chunks in order
                bs = view.block_size
                chunk = self.chunk
                prefills = plan.prefills
                short = False
                for r in partials:
                    if left <= 0:
                        break
                    n = chunk(r, left)
                    if n <= 0:
                        continue
                    need = -(-(r.num_computed + n) // bs) - r.num_blocks
                    if need > free:
                        short = True
                        break
                    if need > 0:
                        free -= need
                    left -= n
                    prefills.append((r, n))
                if not short:
                    plan.decode_group = group.size > 0
                    return left, free
                prefills.clear()  # a chunk finds too few free blocks: the pass over the requests preempts
        free = view.free_blocks
        bs = view.block_size
        running = view.running
        decodes, prefills = plan.decodes, plan.prefills
        end = len(running)
        i = 0
        while i < end and budget > 0:
            r = running[i]
            computed, known = r.num_computed, r.prompt_len + r.num_generated
            decode = computed + 1 == known and r.num_generated
            n = 1 if decode else self.chunk(r, budget)
            if n <= 0:
                i += 1
                continue
            if windowed:
                need = extra_blocks(r, computed + n)
            else:
                need = -(-(computed + n) // bs) - r.num_blocks  # extra KV blocks for this step's tokens
            while need > free and end > i:
                end -= 1
                victim = running[end]
                plan.preempt.append(victim)
                free += view.preempt_frees(victim)
            if end == i:
                break
            if need > 0 or windowed:
                free -= need
            budget -= n
            if decode:
                decodes.append(r)
            else:
                prefills.append((r, n))
            i += 1
        return budget, free


def prompt_blocks_left(partials, block_size: int) -> int:
    """The KV blocks ``partials`` (running requests whose prompt, or recompute, is not done) need beyond those they
    hold to finish it: a policy that reserves a prompt's KV at admission holds these back."""
    left = 0
    for r in partials:  # this runs at most steps
        left += prompt_reserve(r, block_size)
    return left

"""The naive FCFS policy Ao et al. shows failing (Example 2, Prop. 3): admit waiting prompts in arrival order
while their prompts fit the memory free now, and decode every running prompt, ignoring that decodes grow.

This reading reproduces Example 2 exactly (6 decodes holding 6 units, 4 arrivals: 4 prefills + 4 decodes run, 2
decodes are evicted); admitting every arrival regardless of memory would instead starve all decodes for good
once the queue outgrows M.

With ``fit=False`` the overflow is left to the replica, which must then run with ``overflow="evict-newest"``:
the most recently admitted prompts are evicted and restart from scratch, the paper's eviction cascade. With
``fit=True`` (default, so it runs on any replica) the policy preempts those same prompts itself, which the
replica handles by its preemption mode (recompute keeps their tokens).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.plan import BatchPlan
from .base import Scheduler
from .decode_pass import RunningWork
from .registry import register


@register
@dataclass
class FCFS(Scheduler):
    """Ao et al.'s naive FCFS: admit while prompts fit free memory, decode everything, evict on overflow.

    With a prefix cache: a prompt counts only its tokens after the cached prefix (``view.tokens_to_compute``,
    ``view.admission_blocks``).
    """

    name = "fcfs"
    family = "WAIT"
    steady_decodes = True  # a decode-only step repeats while nothing arrives, finishes or runs short of KV
    plans_decode_group = True  # when every decode and unfinished prompt fits, the plan is the group plus them
    source = "Ao et al. §1 Example 2 and Prop. 3: the FCFS baseline whose evictions cascade"
    chunks_prompts = False
    fit: bool = True  # preempt the newest running prompts so the plan fits; False: the replica evicts

    def schedule(self, view) -> BatchPlan:
        plan = BatchPlan()
        budget = view.max_num_batched_tokens
        seats = view.max_num_seqs - view.num_running
        need = 0
        for r in view.waiting:  # FCFS while the prompt fits the memory free now (decode growth unchecked)
            n = view.tokens_to_compute(r)  # after its cached prefix, with a prefix cache
            blocks = view.admission_blocks(r, n)
            if n > budget or seats < 1 or need + blocks > view.free_blocks:
                break
            plan.prefills.append((r, n))
            budget -= n
            seats -= 1
            need += blocks
        work = RunningWork(view)
        partial = work.partials
        if work.num_decodes + sum(r.remaining_prefill for r in partial) <= budget:
            # every running request fits the budget left: the pass below would take them all (decodes in running
            # order, unfinished prompts whole), so when their blocks fit too (or the replica evicts) that is the plan,
            # from the totals (the decode group's, while one is formed)
            grow = work.grow + sum(view.extra_blocks(r, r.prompt_len + r.num_generated) for r in partial)
            if not self.fit or need + grow <= view.free_blocks:
                work.decode_all(plan)
                plan.prefills.extend((r, r.remaining_prefill) for r in partial)
                return plan
        grow = {}
        for r in view.running:
            if budget < 1:
                break
            if r.is_decode:
                plan.decodes.append(r)
                grow[r] = view.decode_blocks(r)
                budget -= 1
            elif r.remaining_prefill <= budget:
                plan.prefills.append((r, r.remaining_prefill))
                grow[r] = view.extra_blocks(r, r.prompt_len + r.num_generated)
                budget -= r.remaining_prefill
        need += sum(grow.values())
        if not self.fit or need <= view.free_blocks:
            return plan
        free = view.free_blocks
        for r in reversed(view.running):  # newest admission first, as the replica's eviction does
            if need <= free:
                break
            plan.preempt.append(r)
            free += view.preempt_frees(r)
            need -= grow.get(r, 0)
        gone = set(plan.preempt)
        plan.decodes = [r for r in plan.decodes if r not in gone]
        plan.prefills = [(r, n) for r, n in plan.prefills if r not in gone]
        while need > free and plan.prefills:  # admissions alone overflow: admit fewer
            r, n = plan.prefills.pop()
            need -= view.extra_blocks(r, r.num_computed + n)
        if not plan.has_work:
            plan.preempt.clear()
        return plan

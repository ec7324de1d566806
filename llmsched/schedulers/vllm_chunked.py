"""vLLM's chunked-prefill mode (the v1 scheduler): running work first, then new prompts, under one token budget."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .base import Scheduler
from .registry import register
from .tunable import IntRange


@register
@dataclass
class VLLMChunked(Scheduler):
    """vLLM chunked prefill: running requests in order (decodes and prompt chunks), then FCFS admissions.

    Every running request gets ``min(remaining, budget left)`` tokens: one for a decode,
    a chunk for an unfinished prompt. When KV blocks run out the newest running request is
    preempted by recompute (itself last). If nothing was preempted, waiting requests are
    admitted FCFS with a chunk of what budget is left, stopping at the first that does
    not fit (head-of-line blocking). ``token_budget`` is vLLM's ``max_num_batched_tokens``.

    With a prefix cache, as vLLM v1: an admission's chunk counts only tokens after its cached prefix, and its blocks
    are the chunk's plus the cached blocks no request holds (``view.admission_blocks``).
    """

    name = "vllm-chunked"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks
    source = ("vLLM v1 scheduler with chunked prefill (vllm/v1/core/sched/scheduler.py); "
              "default max_num_batched_tokens 2048 for online serving; Lyu et al. baseline 'vLLM-vanilla'")
    steady_decodes = True  # decides from queues and blocks only
    steady_after_finishes = True  # after a finish, with nothing waiting, every remaining decode fits its budget
    plans_decode_group = True  # when the decodes come first in running order and all fit, they are the group
    token_budgets = ("token_budget",)
    token_budget: int = 2048
    # token_budget is vLLM's max_num_batched_tokens; max_num_seqs its seat cap
    tunable = {"token_budget": IntRange(64, 8192, log=True), "max_num_seqs": IntRange(16, 1024, log=True)}

    def __post_init__(self):
        if self.token_budget < 1:
            raise ValueError(f"vllm-chunked: token_budget must be >= 1, got {self.token_budget}")

    def schedule(self, view: ReplicaView) -> BatchPlan:
        group = view.decode_group
        if group is not None and group.size:
            plan = self._group_plan(view, group)
            if plan is not None:
                return plan
        plan = BatchPlan()
        decodes, prefills = plan.decodes, plan.prefills
        budget = min(self.token_budget, view.max_num_batched_tokens)
        free = view.free_blocks
        bs = view.block_size
        running = view.running
        end = len(running)
        i = 0
        while i < end and budget > 0:
            r = running[i]
            computed, known = r.num_computed, r.prompt_len + r.num_generated
            n = known - computed
            if n > budget:
                n = budget
            need = -(-(computed + n) // bs) - r.num_blocks  # extra KV blocks for this step's tokens
            while need > free and end > i:
                end -= 1
                victim = running[end]
                plan.preempt.append(victim)
                free += view.preempt_frees(victim)
            if end == i:
                break
            if need > 0:
                free -= need
            budget -= n
            if computed + 1 == known and r.num_generated:
                decodes.append(r)
            else:
                prefills.append((r, n))
            i += 1
        if plan.preempt:
            return plan
        self._admit(view, plan, budget, free, view.max_num_seqs - len(running))
        return plan

    def _group_plan(self, view: ReplicaView, group) -> BatchPlan | None:
        """The plan of ``schedule`` from the view's decode group, when every member precedes every unfinished
        prompt in running order and the members' decodes fit the budget and the free blocks; else None."""
        partials = group.partials
        if partials and partials[0].order < group.max_order:
            return None
        budget = min(self.token_budget, view.max_num_batched_tokens) - group.size
        free = view.free_blocks - group.blocks_needed
        if budget < 0 or free < 0:
            return None
        plan = BatchPlan(decode_group=True)
        bs = view.block_size
        for r in partials:
            if budget <= 0:
                break
            computed = r.num_computed
            n = r.prompt_len + r.num_generated - computed
            if n > budget:
                n = budget
            need = -(-(computed + n) // bs) - r.num_blocks
            if need > free:
                return None  # schedule preempts
            if need > 0:
                free -= need
            budget -= n
            plan.prefills.append((r, n))
        self._admit(view, plan, budget, free, view.max_num_seqs - view.num_running)
        return plan

    @staticmethod
    def _admit(view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """FCFS admission with a chunk of what budget is left, stopping at the first that does not fit."""
        for r in view.waiting:
            if budget <= 0 or room < 1:
                break
            n = min(r.prompt_len + r.num_generated - view.cached_tokens(r), budget)  # after its cached prefix
            need = view.admission_blocks(r, n)
            if need > free:
                break
            plan.prefills.append((r, n))
            free -= need
            budget -= n
            room -= 1

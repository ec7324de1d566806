"""Sarathi-Serve: stall-free batching under a token budget."""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .base import Scheduler
from .decode_pass import add_decodes, split_running
from .registry import register, register_variant
from .tunable import IntRange
from .watermark import WatermarkAdmission

ORDERS = ("fcfs", "spf")
ARRIVAL = attrgetter("arrival")


def prompt_left(r) -> int:
    """A waiting request's prompt tokens to compute: its whole prompt, or one if a prefill instance sent its KV."""
    return r.prompt_len - r.num_computed


@register
@dataclass
class Sarathi(WatermarkAdmission, Scheduler):
    """Sarathi-Serve: every running decode, then prompt chunks, within a token budget.

    Running requests in arrival order: each decode-phase request gets its token (the newest
    is preempted by recompute when a block is short), then unfinished prompts get chunks
    of ``min(remaining, budget left)``, then waiting requests are admitted (FCFS, or
    shortest prompt first with ``order="spf"``), each needing KV for its whole prompt
    above a 1% watermark, as Sarathi allocates the whole prompt at admission; the first
    that does not fit stops admission. Decodes are never left out, so the budget binds
    prompt tokens: a step holds at most ``max(token_budget, #decodes)`` tokens. A prompt
    needing more than the whole cache less the watermark is rejected (schedulers/watermark.py).

    With a prefix cache: an admission's chunk and the prompt it reserves count only tokens after its cached prefix
    (``view.tokens_to_compute``, ``view.admission_blocks``).
    """

    name = "sarathi"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks
    source = ("Sarathi-Serve (Agrawal et al., OSDI'24); normalised in Bari et al. Algorithm 4 / App. E.2 "
              "(token budget 512, max_num_seqs 128); Kim et al. §1.6 (SARATHI row)")
    steady_decodes = True  # decides from queues and blocks only
    steady_after_finishes = True  # after a finish, with nothing waiting, every remaining decode fits its budget
    plans_decode_group = True  # when every decode fits, the plan is the decode group plus prompt chunks
    token_budgets = ("token_budget",)
    token_budget: int = 512
    order: str = "fcfs"
    watermark: float = 0.01
    tunable = {"token_budget": IntRange(64, 4096, log=True), "max_num_seqs": IntRange(16, 1024, log=True)}

    def __post_init__(self):
        if self.token_budget < 1:
            raise ValueError(f"sarathi: token_budget must be >= 1, got {self.token_budget}")
        if self.order not in ORDERS:
            raise ValueError(f"sarathi: order must be one of {ORDERS}, got {self.order!r}")
        if not 0 <= self.watermark < 1:
            raise ValueError(f"sarathi: watermark must be in [0, 1), got {self.watermark}")

    def schedule(self, view: ReplicaView) -> BatchPlan:
        group = view.decode_group
        if group is not None and group.size:
            plan = self._group_plan(view, group)
            if plan is not None:
                return plan
        plan = BatchPlan()
        running = sorted(view.running, key=ARRIVAL)
        split = split_running(running, view.block_size)  # decodes, unfinished prompts, block crossings
        partial = split[1]
        # KV owed to admitted, unfinished prompts (Sarathi reserves whole prompts at admission): decodes may not
        # take it, or a later chunk of such a prompt would find no block.
        reserved = sum(view.extra_blocks(r, r.prompt_len + r.num_generated) for r in partial)
        free = add_decodes(view, plan, running, reserve=reserved, split=split)
        if plan.preempt:
            gone = {r.id for r in plan.preempt}
            running = [r for r in running if r.id not in gone]
            partial = [r for r in partial if r.id not in gone]
        budget = min(self.token_budget, view.max_num_batched_tokens) - len(plan.decodes)
        budget = self._chunks(plan, partial, budget)
        if plan.preempt:
            return plan
        self._admit(view, plan, budget, free, view.max_num_seqs - len(running))
        return plan

    def _group_plan(self, view: ReplicaView, group) -> BatchPlan | None:
        """The plan of ``schedule`` when every decode fits, from the view's decode group without a pass over the
        running requests; None when a decode would find no block (then ``schedule`` preempts)."""
        partial = group.partials
        reserved = 0
        if partial:
            partial = sorted(partial, key=ARRIVAL)
            bs = view.block_size
            for r in partial:  # view.extra_blocks, written out: this runs at most steps
                need = -(-(r.prompt_len + r.num_generated) // bs) - r.num_blocks
                if need > 0:
                    reserved += need
        free = view.free_blocks - reserved - group.blocks_needed
        if free < 0:
            return None
        plan = BatchPlan(decode_group=True)
        budget = self._chunks(plan, partial, min(self.token_budget, view.max_num_batched_tokens) - group.size)
        self._admit(view, plan, budget, free, view.max_num_seqs - view.num_running)
        return plan

    @staticmethod
    def _chunks(plan: BatchPlan, partial, budget: int) -> int:
        """Chunks of the unfinished prompts in order, within ``budget``; returns what is left of it."""
        for r in partial:
            n = min(r.prompt_len + r.num_generated - r.num_computed, budget)
            if n > 0:
                plan.prefills.append((r, n))
                budget -= n
        return budget

    def _admit(self, view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """Waiting requests in order while budget, seats and KV (above the watermark) last."""
        waiting = view.waiting
        if not waiting or budget <= 0:
            return
        free -= int(self.watermark * view.total_blocks)
        if self.order == "spf":  # a prompt a prefill instance sent has one token left: first
            waiting = sorted(waiting, key=prompt_left)
        for r in waiting:
            left = r.prompt_len + r.num_generated - view.cached_tokens(r)  # after its cached prefix
            n = min(left, budget)
            need = view.admission_blocks(r, left)
            if n <= 0 or room < 1 or (need and need > free):  # a sent prompt's rest may need no block
                break
            plan.prefills.append((r, n))
            budget -= n
            room -= 1
            free -= need


register_variant("sarathi-spf", Sarathi, "Sarathi-Serve with shortest-prompt-first admission (Bari et al. §7)",
                 order="spf")

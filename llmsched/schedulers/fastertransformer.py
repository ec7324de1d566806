"""FasterTransformer: static (request-level) batching."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from ..request import Status
from .base import Scheduler
from .decode_pass import RunningWork
from .registry import register
from .whole_prompt import too_long

WAITING = Status.WAITING


@register
@dataclass
class FasterTransformer(Scheduler):
    """FasterTransformer: admit a cohort only when nothing runs, then decode it until all finish.

    A cohort is up to ``batch_size`` waiting requests (FCFS; default the sequence cap),
    each reserving KV for ``max_model_len`` tokens. Their whole prompts run first, as many
    per step as the token budget allows, then the cohort decodes together; nothing else is
    admitted until every member has finished. A cohort larger than the token budget decodes its first
    members in order, as many as the budget holds; the rest wait (as decodes beyond the budget do in vLLM).

    With a prefix cache: plans as without one; the replica starts each admission after its cached blocks.
    """

    name = "fastertransformer"
    runs_beside_tier_loads = False  # a static batch lists requests a tier is still loading
    steady_decodes = True  # a decode-only step repeats while nothing arrives, finishes or runs short of KV
    plans_decode_group = True  # the cohort's decode step is every running request: the group, when formed
    source = ("NVIDIA FasterTransformer, request-level batching; Bari et al. Algorithm 3 (App. E.1, mode labels "
              "fixed); Kim et al. §1.6 (static batching, reserve max_model_len)")
    chunks_prompts = False
    batch_size: int | None = None
    _cohort: list = field(default_factory=list, init=False, repr=False)

    def __post_init__(self):
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"fastertransformer: batch_size must be >= 1, got {self.batch_size}")

    def params(self) -> dict:
        return {"batch_size": self.batch_size}

    def schedule(self, view: ReplicaView) -> BatchPlan:
        plan = BatchPlan()
        pending = [r for r in self._cohort if r.status is WAITING]
        if not pending and not view.num_running:
            pending = self._cohort = self._new_cohort(view, plan)
        if pending:  # the cohort's prompts, whole, as many per step as the budget holds
            tokens = 0
            for r in pending:
                n = r.prompt_len + r.num_generated
                if tokens + n > view.max_num_batched_tokens:
                    break
                plan.prefills.append((r, n))
                tokens += n
            return plan
        RunningWork(view).decode_all(plan, limit=view.max_num_batched_tokens)  # the cohort decodes; beyond the budget, wait
        return plan

    def _new_cohort(self, view: ReplicaView, plan: BatchPlan) -> list:
        cap = view.max_num_seqs if self.batch_size is None else min(self.batch_size, view.max_num_seqs)
        cap = max(1, min(cap, view.total_blocks // view.blocks_for(view.max_model_len)))  # one always fits
        cohort = []
        for r in view.waiting:
            if len(cohort) >= cap:
                break
            reason = too_long(view, r)
            if reason:
                plan.reject.append((r, reason))
            else:
                cohort.append(r)
        return cohort

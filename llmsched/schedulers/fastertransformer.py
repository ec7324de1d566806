"""FasterTransformer: static (request-level) batching."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .base import Scheduler
from .registry import register


@register
@dataclass
class FasterTransformer(Scheduler):
    """FasterTransformer: admit a cohort only when nothing runs, then decode it until all finish.

    A cohort is up to ``batch_size`` waiting requests (FCFS; default the sequence cap),
    each reserving KV for ``max_model_len`` tokens, whose whole prompts run as one
    prefill step within the token budget; nothing else is admitted until every member
    has finished.
    """

    name = "fastertransformer"
    source = ("NVIDIA FasterTransformer, request-level batching; seed 000 Algorithm 3 (App. E.1, mode labels "
              "fixed as in spec §2.3); seed 001 §1.6 (static batching, reserve max_model_len)")
    batch_size: int | None = None

    def __post_init__(self):
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"fastertransformer: batch_size must be >= 1, got {self.batch_size}")

    def schedule(self, view: ReplicaView) -> BatchPlan:
        plan = BatchPlan()
        if view.running:
            for r in view.running:
                if r.num_generated and r.num_computed + 1 == r.prompt_len + r.num_generated:
                    plan.decodes.append(r)
                else:
                    plan.prefills.append((r, r.prompt_len + r.num_generated - r.num_computed))
            return plan
        cap = view.max_num_seqs if self.batch_size is None else min(self.batch_size, view.max_num_seqs)
        cap = max(1, min(cap, view.total_blocks // view.blocks_for(view.max_model_len)))  # one always fits
        tokens = 0
        for r in view.waiting:
            n = r.prompt_len + r.num_generated
            if len(plan.prefills) >= cap or tokens + n > view.max_num_batched_tokens:
                break
            plan.prefills.append((r, n))
            tokens += n
        return plan

"""Orca: iteration-level batching with whole prompts mixed into decode steps."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .registry import register
from .running_first import RunningFirst
from .whole_prompt import too_long


@register
@dataclass
class Orca(RunningFirst):
    """Orca: every running request decodes each iteration; new requests join with their whole prompt.

    Orca reserves KV for a request's maximum length at admission (``max_model_len``
    tokens), so it never preempts; admission is FCFS while the reservation, the sequence
    cap and the token budget allow. Prefills and decodes share a step, unchunked.

    With a prefix cache: plans as without one; the replica starts each admission after its cached blocks.
    """

    name = "orca"
    source = ("Orca (Yu et al., OSDI'22), iteration-level scheduling; as set in Kim et al. §1.6 "
              "(Vidur's Orca: hybrid batches, no chunking, reserve max_model_len, no eviction)")
    chunks_prompts = False
    runs_beside_tier_loads = False  # its seats ignore the blocks a tier loaded for a waiting request

    def chunk(self, r, budget: int) -> int:
        return r.prompt_len + r.num_generated - r.num_computed  # whole (cannot happen unchunked, kept for safety)

    def admit(self, view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """Whole prompts FCFS while the seats of the ``max_model_len`` reservation and the token budget allow."""
        per_request = view.blocks_for(view.max_model_len)
        cap = max(1, min(view.max_num_seqs, view.total_blocks // per_request))  # one always fits alone
        seats = cap - view.num_running
        for r in view.waiting:
            n = r.prompt_len + r.num_generated
            if n > view.max_num_batched_tokens:
                plan.reject.append((r, too_long(view, r)))
                continue
            if seats < 1 or n > budget:
                break
            plan.prefills.append((r, n))
            budget -= n
            seats -= 1

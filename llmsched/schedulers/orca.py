"""Orca: iteration-level batching with whole prompts mixed into decode steps."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .base import Scheduler
from .registry import register
from .whole_prompt import too_long


@register
@dataclass
class Orca(Scheduler):
    """Orca: every running request decodes each iteration; new requests join with their whole prompt.

    Orca reserves KV for a request's maximum length at admission (``max_model_len``
    tokens), so it never preempts; admission is FCFS while the reservation, the sequence
    cap and the token budget allow. Prefills and decodes share a step, unchunked.

    With a prefix cache: plans as without one; the replica starts each admission after its cached blocks.
    """

    name = "orca"
    steady_decodes = True  # a decode-only step repeats while nothing arrives, finishes or runs short of KV
    plans_decode_group = True  # every decode-phase request decodes: the group, with the others' prompts
    source = ("Orca (Yu et al., OSDI'22), iteration-level scheduling; as set in Kim et al. §1.6 "
              "(Vidur's Orca: hybrid batches, no chunking, reserve max_model_len, no eviction)")
    chunks_prompts = False

    def schedule(self, view: ReplicaView) -> BatchPlan:
        plan = BatchPlan()
        group = view.decode_group
        if group is not None and group.size:  # the same plan, from the group's totals
            plan.decode_group = True
            others = group.partials
            tokens = group.size
        else:
            others = []
            for r in view.running:
                if r.num_generated and r.num_computed + 1 == r.prompt_len + r.num_generated:
                    plan.decodes.append(r)
                else:
                    others.append(r)
            tokens = len(plan.decodes)
        for r in others:  # admitted earlier, prompt left over (cannot happen unchunked, kept for safety)
            n = r.prompt_len + r.num_generated - r.num_computed
            plan.prefills.append((r, n))
            tokens += n
        per_request = view.blocks_for(view.max_model_len)
        cap = max(1, min(view.max_num_seqs, view.total_blocks // per_request))  # one always fits alone
        seats = cap - view.num_running
        for r in view.waiting:
            n = r.prompt_len + r.num_generated
            if n > view.max_num_batched_tokens:
                plan.reject.append((r, too_long(view, r)))
                continue
            if seats < 1 or tokens + n > view.max_num_batched_tokens:
                break
            plan.prefills.append((r, n))
            tokens += n
            seats -= 1
        return plan

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
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token; its blocks join its reservation
    runs_beside_tier_loads = False  # its seats ignore the blocks a tier loaded for a waiting request

    def chunk(self, r, budget: int) -> int:
        return r.prompt_len + r.num_generated - r.num_computed  # whole (cannot happen unchunked, kept for safety)

    def admit(self, view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """Whole prompts FCFS while the ``max_model_len`` reservations, the seats, the token budget and the free
        blocks allow.

        The reservations are a ledger of blocks: the cache less the blocks requests hold outside the running set
        (a prompt a prefill instance sent, or keeps until the decode side reads it) less one reservation per running
        request. A sent prompt brings the blocks it holds into its own reservation, and computes only its last
        token. Without such blocks this is Orca's seat count, ``total_blocks // blocks_for(max_model_len)``, and the
        free blocks never bind; beside them (a disaggregated fleet, where transfers take blocks as they start) a
        prompt waits for free blocks, and a decode short of a block preempts the newest (``RunningFirst``), as vLLM
        does. An idle replica admits the head of the queue whenever its blocks are free (one always fits alone)."""
        per_request = view.blocks_for(view.max_model_len)
        spare = view.total_blocks - view.blocks_held_waiting - view.num_running * per_request
        idle = not view.num_running
        limit = view.max_num_batched_tokens
        for r in view.waiting:
            n = r.prompt_len + r.num_generated - r.num_computed  # whole; a sent prompt: its last token
            if n > limit:
                plan.reject.append((r, too_long(view, r)))
                continue
            spare += r.num_blocks
            if room < 1 or n > budget or (spare < per_request and not (idle and not plan.prefills)):
                break
            need = view.admission_blocks(r, view.tokens_to_compute(r))  # what the replica takes (after a cache hit)
            if need > free:
                break
            plan.prefills.append((r, n))
            budget -= n
            free -= need
            spare -= per_request
            room -= 1

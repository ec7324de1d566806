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

    On a disaggregated decode instance, prompts a prefill instance sent wait holding their blocks, and transfers take
    blocks as they start, outside any reservation: the cohort leaves their blocks out of its ledger, a prompt waits
    for free blocks, and a decode short of a block preempts the newest member (prefilled again before the cohort
    goes on), as vLLM does. Without such blocks none of this binds.

    With a prefix cache: plans as without one; the replica starts each admission after its cached blocks.
    """

    name = "fastertransformer"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token; its blocks join its reservation
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
        idle = not view.num_running
        if idle and (not pending or not self._fits(view, pending[0])):
            # a new cohort, or (idle, its head not fitting) the cohort formed again: the blocks are held by prompts
            # a prefill instance sent (a disaggregated decode instance), which lead the queue; a member preempted
            # for them whose prompt and output outgrew the budget is rejected
            pending = self._cohort = self._new_cohort(view, plan)
        if pending:  # the cohort's prompts, whole, as many per step as the budget and the free blocks hold
            tokens, free = 0, view.free_blocks
            for r in pending:
                n, need = self._admission(view, r)
                if tokens + n > view.max_num_batched_tokens or need > free:
                    break
                plan.prefills.append((r, n))
                tokens += n
                free -= need
            if plan.prefills or idle:
                return plan
        return self._decode(view, plan)

    @staticmethod
    def _admission(view: ReplicaView, r) -> tuple[int, int]:
        """(tokens, free blocks) of waiting ``r``'s whole prompt: a sent prompt computes its last token; the blocks
        are what the replica takes, after a cache hit."""
        return r.prompt_len + r.num_generated - r.num_computed, view.admission_blocks(r, view.tokens_to_compute(r))

    def _fits(self, view: ReplicaView, r) -> bool:
        n, need = self._admission(view, r)
        return n <= view.max_num_batched_tokens and need <= view.free_blocks

    @staticmethod
    def _decode(view: ReplicaView, plan: BatchPlan) -> BatchPlan:
        """The cohort decodes; beyond the budget, the rest wait. A decode short of a block preempts the newest, as
        vLLM does: under the cohort's reservation that happens only beside blocks held outside it (transfers that
        land on a disaggregated decode instance), and a preempted member is prefilled again before the cohort
        goes on."""
        RunningWork(view).add_decodes(plan, limit=view.max_num_batched_tokens)
        return plan

    def _new_cohort(self, view: ReplicaView, plan: BatchPlan) -> list:
        """FCFS while the seats and the ``max_model_len`` reservations fit (one always does). The reservations are a
        ledger of blocks: the cache less the blocks held outside the running set by requests not in the cohort; a
        member that holds KV (a prompt a prefill instance sent) brings its blocks into its own reservation."""
        cap = view.max_num_seqs if self.batch_size is None else min(self.batch_size, view.max_num_seqs)
        per_request = view.blocks_for(view.max_model_len)
        spare = view.total_blocks - view.blocks_held_waiting
        cohort = []
        for r in view.waiting:
            if len(cohort) >= cap:
                break
            reason = too_long(view, r)
            if reason:
                plan.reject.append((r, reason))
                continue
            spare += r.num_blocks
            if cohort and spare < per_request:
                break
            cohort.append(r)
            spare -= per_request
        return cohort

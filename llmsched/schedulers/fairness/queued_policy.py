"""What vtc, wfq and priority share: the waiting requests kept in queues (by tenant or by class) in step with the
view, a ledger of their preemptions, and the plan of a step in which every running request decodes."""
from __future__ import annotations

from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ...request import Request
from ..base import Scheduler
from .preemption_ledger import PreemptionLedger
from .waiting_queues import WaitingQueues


class QueuedPolicy(Scheduler):
    """A chunked policy with a ``token_budget`` that admits from ``queues`` (set up by ``use_queues`` in its
    ``__post_init__``) and counts its preemptions in ``ledger``; ``last_victims`` are the requests its last plan
    preempted (the queues take them back at their tenant's front)."""

    token_budget: int
    family = "tenant policies"  # vtc, wfq, priority: drawn as their own family in compare's figures

    def use_queues(self, queues: WaitingQueues) -> None:
        if self.token_budget < 1:
            raise ValueError(f"{self.name}: token_budget must be >= 1, got {self.token_budget}")
        self.queues = queues
        self.ledger = PreemptionLedger()
        self.last_victims: list[Request] = []

    def on_arrival(self, req: Request, view: ReplicaView) -> str | None:
        self.queues.add(req)
        return None

    def start_step(self, view: ReplicaView) -> bool:
        """Settle the last plan's preemptions and bring the queues in step with the view. True when nothing waits
        and one step's budget holds a decode of every running request: a step that may be all decodes."""
        self.ledger.settle()
        self.queues.sync(view.waiting, self.last_victims)
        return not len(self.queues) and len(view.running) <= min(self.token_budget, view.max_num_batched_tokens)

    def stats(self) -> dict:
        return {"preemptions": self.ledger.stats()}


def all_decode(running: list[Request], bs: int, free: int) -> BatchPlan | None:
    """Every running request's decode, when each is in decode phase and their new blocks fit; else None."""
    need = 0
    for r in running:
        computed = r.num_computed
        if not (r.num_generated and computed + 1 == r.prompt_len + r.num_generated):
            return None
        if computed + 1 > r.num_blocks * bs:
            need += 1
    return BatchPlan(decodes=list(running)) if need <= free else None

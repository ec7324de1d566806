"""Virtual Token Counter (Sheng et al., "Fairness in Serving Large Language Models", OSDI 2024), chunked."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from ..request import Request
from .base import Scheduler
from .preemption_ledger import PreemptionLedger
from .registry import register
from .waiting_queues import WaitingQueues, tenant_key, tenant_weight


@register
@dataclass
class VTC(Scheduler):
    """VTC: admit from the backlogged tenant that has received the least weighted service, chunked under a budget.

    The paper's algorithm (its Algorithm 2 and the authors' S-LoRA code, ``vtc_req_queue.py``) on vLLM v1's
    chunked-prefill step. Each tenant ``u`` has a counter ``c_u`` of the service it received divided by its weight:
    every prompt (or recompute) token a plan computes for it adds ``input_weight / w_u``, every decode
    ``output_weight / w_u`` (1 and 2, as OpenAI prices them), charged when planned, as the paper charges a prompt at
    admission. A step first continues the running requests in running order (a decode, or a chunk of what is left
    of a prompt), then admits waiting requests one at a time, each the oldest of the backlogged tenant with the
    smallest counter, with a chunk of the budget left, until one does not fit (tokens, seats or KV blocks). A tenant
    whose queue turns non-empty has its counter lifted to the smallest counter of the other backlogged tenants, or,
    with none, to the counter of the tenant that left the queue last: credit for idling is not banked. When a
    running request needs a block and none is free, the request of the tenant with the largest counter is
    preempted (newest first; with one tenant, the newest: vllm-chunked's choice). Without tenants it decides as
    vllm-chunked.

    **Fairness bound** (the paper's Theorem 4.4, derived again for this token model). Let ``A = input_weight ·
    min(B, P)`` bound one admission's charge (``B`` the token budget, ``P`` the longest prefill a waiting request
    needs) and ``R_h`` the weighted work still owed, at an admission of tenant ``h``, to ``h``'s admitted requests
    (running or swapped: ``input_weight`` per prompt token left, ``output_weight`` per decode left; a recompute's
    last token may run as a decode). Let
    ``U = max_h (A + R_h) / w_h``. Then at every decision the counters of any two backlogged tenants differ by at
    most ``U``, and for two tenants ``f``, ``g`` backlogged throughout ``[t1, t2]``:

        | W_f(t1, t2) / w_f  -  W_g(t1, t2) / w_g |  <=  2 U

    (``W`` the service charged in the interval). Proof: the smallest backlogged counter ``m`` never decreases (a
    counter only grows; a newly backlogged tenant is lifted to at least ``m``; the first of a new busy period to at
    least the last one's). A tenant is admitted only when its counter is ``m``, and afterwards gains at most its
    chunk plus what its admitted requests still owe, so ``c_f - m <= U``. A tenant backlogged throughout is never
    lifted, so ``c_f(t2) - c_f(t1) = W_f(t1, t2) / w_f``, and two spreads of at most ``U`` give ``2 U``. The paper's
    ``2 max(w_p L_input, w_q M)`` bounds ``R_h`` by ``w_q M``, M the KV pool in tokens, because S-LoRA reserves
    each running request's whole ``max_new_tokens`` of KV; a paged cache reserves nothing, so here ``R_h`` is the
    owed work itself (at most ``max_num_seqs · (input_weight · max_model_len + output_weight · max_model_len)``).
    tests/test_fairness_bounds.py checks the spread at every decision and the interval bound on random workloads.
    """

    name = "vtc"
    source = ("Sheng et al., Fairness in Serving Large Language Models, OSDI 2024 (Algorithm 2, Theorem 4.4; "
              "github.com/Ying1123/VTC-artifact slora/server/router/vtc_req_queue.py), on vLLM v1's chunked step")
    family = "VTC"
    token_budget: int = 2048
    input_weight: float = 1.0
    output_weight: float = 2.0

    def __post_init__(self):
        if self.token_budget < 1:
            raise ValueError(f"{self.name}: token_budget must be >= 1, got {self.token_budget}")
        for key in ("input_weight", "output_weight"):
            value = getattr(self, key)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{self.name}: {key} must be a positive number, got {value}")
        self.counters: dict[str | None, float] = {}
        self.last_left: str | None = None  # the tenant whose queue emptied last
        self.queues = WaitingQueues(self._lift, self._left)
        self.ledger = PreemptionLedger()
        self._victims: list[Request] = []

    # --- counters ---------------------------------------------------------------------------------------------
    def _lift(self, key) -> None:
        """``key``'s queue turns non-empty: no credit for the time it was idle."""
        others = [self.counters[k] for k in self.queues.backlogged() if k != key]
        floor = min(others) if others else self.counters.get(self.last_left, 0.0)
        self.counters[key] = max(self.counters.get(key, 0.0), floor)

    def _left(self, key) -> None:
        self.last_left = key

    def _charge(self, r: Request, tokens: int, decode: bool) -> None:
        key = tenant_key(r)
        cost = self.output_weight if decode else self.input_weight * tokens
        self.counters[key] = self.counters.get(key, 0.0) + cost / tenant_weight(r)

    def known_tenants(self) -> list:
        return list(self.counters)

    def on_arrival(self, req: Request, view: ReplicaView) -> str | None:
        self.queues.add(req)
        return None

    # --- a step -----------------------------------------------------------------------------------------------
    def schedule(self, view: ReplicaView) -> BatchPlan:
        self.ledger.settle()
        self.queues.sync(view.waiting, self._victims)
        self._victims = []
        plan = BatchPlan()
        budget = min(self.token_budget, view.max_num_batched_tokens)
        free = view.free_blocks
        bs = view.block_size
        todo = list(view.running)
        i = 0
        while i < len(todo) and budget > 0:
            r = todo[i]
            computed, known = r.num_computed, r.prompt_len + r.num_generated
            n = min(known - computed, budget)
            need = -(-(computed + n) // bs) - r.num_blocks
            while need > free:
                victim = self._victim(todo, i)
                todo.remove(victim)
                plan.preempt.append(victim)
                free += victim.num_blocks
                if victim is r:
                    break
            else:
                if need > 0:
                    free -= need
                budget -= n
                decode = computed + 1 == known and r.num_generated > 0
                if decode:
                    plan.decodes.append(r)
                else:
                    plan.prefills.append((r, n))
                self._charge(r, n, decode)
                i += 1
        if plan.preempt:
            self.ledger.planned(plan.preempt, "kv")
            self._victims = plan.preempt
            return plan
        self._admit(view, plan, budget, free, view.max_num_seqs - len(view.running))
        return plan

    def _victim(self, todo: list[Request], i: int) -> Request:
        """Among the running requests not yet planned (``todo[i:]``), the newest of the most-served tenant."""
        counters = self.counters
        return max(todo[i:], key=lambda r: (counters.get(tenant_key(r), 0.0), r.order))

    def _admit(self, view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """Waiting requests, each the oldest of the least-served backlogged tenant, while the first fits."""
        queues = self.queues
        while budget > 0 and room > 0:
            heads = [(k, h) for k in queues.backlogged() if (h := queues.head(k)) is not None]
            if not heads:
                return
            key, r = min(heads, key=self._turn)
            n = min(r.prompt_len + r.num_generated, budget)
            need = view.blocks_for(n)
            if need > free:
                return
            queues.pop(key)
            plan.prefills.append((r, n))
            self._charge(r, n, False)
            free -= need
            budget -= n
            room -= 1

    def _turn(self, head: tuple) -> float:
        """Whose turn it is: the tenant with the smallest counter (its first waiting request whatever its size)."""
        return self.counters.get(head[0], 0.0)

    def stats(self) -> dict:
        return {"preemptions": self.ledger.stats()}

"""Weighted fair queueing by tokens: admit the request whose virtual finish time is earliest, chunked."""
from __future__ import annotations

from dataclasses import dataclass

from ..registry import register
from .waiting_queues import tenant_weight
from .vtc import VTC


@register
@dataclass
class WFQ(VTC):
    """WFQ: admit the waiting request with the earliest virtual finish time, the service counted in tokens.

    Weighted fair queueing (Demers, Keshav and Shenker, SIGCOMM 1989; Parekh and Gallager's PGPS) gives each
    flow's head packet a virtual finish time ``F = S + L / w`` (``S`` where the flow's virtual clock stands, ``L``
    the packet's length, ``w`` the flow's weight) and sends the packet with the smallest ``F``. Here a flow is a
    tenant and its clock ``S`` the weighted service it received (``input_weight`` per prompt or recompute token,
    ``output_weight`` per decode, over its weight: vtc's counter, charged as planned). The one length known at
    admission is the prefill, so ``L = input_weight · min(prefill tokens, B)`` (``B`` the token budget: what one
    step can charge) and a request's output is charged as it is produced, as a packet whose length shows only while
    it is sent. A tenant whose queue turns non-empty starts at
    the system's virtual time: the smallest clock among backlogged tenants (self-clocked, as Golestani's SCFQ), or
    with none the clock of the tenant that left last. Steps (decodes, then prompt chunks by turn), the KV reserve,
    preemption and reclaiming are vtc's; what differs is whose turn it is: vtc takes the least-served tenant
    whatever its next request's size, wfq weighs the size in, so a short prompt goes before a long one from a
    tenant as far ahead. Without tenants it admits first come, first served.

    **Fairness bound.** With vtc's ``A`` (``input_weight · min(B, P)``, the most one admission charges), ``C`` (one
    plan's charges to one tenant), ``R_h`` (the work still owed to tenant ``h``'s admitted requests at its
    admission) and ``w_min`` the smallest weight, let ``U = max_h (A + R_h) / w_h + C + A / w_min``. Then the clocks
    of any two backlogged tenants differ by at most ``U`` at every decision, and for tenants ``f``, ``g``
    backlogged throughout ``[t1, t2]``

        | W_f(t1, t2) / w_f  -  W_g(t1, t2) / w_g |  <=  2 U.

    The proof is vtc's with one change: a tenant ``f`` is admitted when its finish time is the smallest, so its
    clock is then at most the smallest backlogged clock ``m`` plus the largest ``L / w`` of the others' heads
    (``A / w_min``), not at most ``m`` itself; the classic WFQ bound's ``L_max / w`` term. tests/test_fairness_bounds.py
    checks it at every decision on random workloads. vtc's ``light_first`` works here the same (a light tenant's
    turn among light tenants is its finish time), adding ``lead`` to ``U`` and ``light_budget`` to ``B``.
    """

    name = "wfq"
    source = ("weighted fair queueing (Demers, Keshav, Shenker, SIGCOMM 1989) by tokens, self-clocked (Golestani, "
              "INFOCOM 1994), on vLLM v1's chunked step; vLLM PR #31909 (closed) proposed WFQ for vLLM")

    def _turn(self, item: tuple, tagged: bool = True) -> float:
        """The virtual finish time of a waiting request: its tenant's clock plus its prompt (at most one budget: what
        one step can charge) over its weight; a running prompt's next chunk keeps the time it was admitted with."""
        key, r = item
        tag = self.tags.get(r) if tagged else None
        if tag is not None:  # a running prompt's next chunk: the finish time it was admitted with
            return tag
        left = min(r.prompt_len + r.num_generated - r.num_computed, self.token_budget)
        return self.counters.get(key, 0.0) + self.input_weight * left / tenant_weight(r)

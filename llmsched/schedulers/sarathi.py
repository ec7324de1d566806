"""Sarathi-Serve: stall-free batching under a token budget."""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .registry import register, register_variant
from .running_first import RunningFirst
from .tunable import IntRange
from .watermark import WatermarkAdmission

ORDERS = ("fcfs", "spf")
ARRIVAL = attrgetter("arrival")


def prompt_left(r) -> int:
    """A waiting request's prompt tokens to compute: its whole prompt, or one if a prefill instance sent its KV."""
    return r.prompt_len - r.num_computed


@register
@dataclass
class Sarathi(WatermarkAdmission, RunningFirst):
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
    (``view.tokens_to_compute``, ``view.admission_blocks``), and shortest-prompt-first orders by those tokens.
    """

    name = "sarathi"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks
    source = ("Sarathi-Serve (Agrawal et al., OSDI'24); normalised in Bari et al. Algorithm 4 / App. E.2 "
              "(token budget 512, max_num_seqs 128); Kim et al. §1.6 (SARATHI row)")
    running_order = ARRIVAL  # running requests in arrival order: every decode, then the unfinished prompts' chunks
    reserves_prompts = True  # Sarathi allocates a prompt's KV at admission: decodes may not take what it needs
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

    def step_budget(self, view: ReplicaView) -> int:
        return min(self.token_budget, view.max_num_batched_tokens)

    def admit(self, view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """Waiting requests in order while budget, seats and KV (above the watermark) last."""
        waiting = view.waiting
        if not waiting or budget <= 0:
            return
        free -= int(self.watermark * view.total_blocks)
        if self.order == "spf":  # a prompt a prefill instance sent has one token left: first
            # shortest by the tokens it computes: a cached prefix costs no prefill (SLAI's SPF orders alike); the
            # requests holding KV (a prefill instance's, a tier's) first whatever their keys, as vLLM 0.32 drains
            # its KV-holding queue first: a preempted request whose prompt and output the cache still holds keys
            # at 1 or below too, and ahead of them it blocked the line (it needs its cached blocks back)
            waiting = sorted(waiting, key=(lambda r: (not r.num_blocks, r.prompt_len - view.cached_tokens(r)))
                             if view.prefix_caching else prompt_left)
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

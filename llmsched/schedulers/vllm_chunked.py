"""vLLM's chunked-prefill mode (the v1 scheduler): running work first, then new prompts, under one token budget."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .registry import register
from .running_first import RunningFirst
from .tunable import IntRange


@register
@dataclass
class VLLMChunked(RunningFirst):
    """vLLM chunked prefill: running requests in order (decodes and prompt chunks), then FCFS admissions.

    Every running request gets ``min(remaining, budget left)`` tokens: one for a decode,
    a chunk for an unfinished prompt. When KV blocks run out the newest running request is
    preempted by recompute (itself last). If nothing was preempted, waiting requests are
    admitted FCFS with a chunk of what budget is left, stopping at the first that does
    not fit (head-of-line blocking). ``token_budget`` is vLLM's ``max_num_batched_tokens``.

    With a prefix cache, as vLLM v1: an admission's chunk counts only tokens after its cached prefix, and its blocks
    are the chunk's plus the cached blocks no request holds (``view.admission_blocks``).
    """

    name = "vllm-chunked"
    source = ("vLLM v1 scheduler with chunked prefill (vllm/v1/core/sched/scheduler.py); "
              "default max_num_batched_tokens 2048 for online serving; Lyu et al. baseline 'vLLM-vanilla'")
    decodes_first = False  # running requests in admission order, decodes and prompt chunks alike
    token_budgets = ("token_budget",)
    models_vllm = True  # refused where vLLM refuses its limits
    token_budget: int = 2048
    # token_budget is vLLM's max_num_batched_tokens; max_num_seqs its seat cap
    tunable = {"token_budget": IntRange(64, 8192, log=True), "max_num_seqs": IntRange(16, 1024, log=True)}

    def __post_init__(self):
        if self.token_budget < 1:
            raise ValueError(f"vllm-chunked: token_budget must be >= 1, got {self.token_budget}")

    def step_budget(self, view: ReplicaView) -> int:
        return min(self.token_budget, view.max_num_batched_tokens)

    def admit(self, view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """FCFS admission with a chunk of what budget is left, stopping at the first that does not fit."""
        for r in view.waiting:
            if budget <= 0 or room < 1:
                break
            n = min(r.prompt_len + r.num_generated - view.cached_tokens(r), budget)  # after its cached prefix
            need = view.admission_blocks(r, n)
            if need > free:
                break
            plan.prefills.append((r, n))
            free -= need
            budget -= n
            room -= 1

"""vLLM's chunked-prefill mode (the v1 scheduler): running work first, then new prompts, under one token budget."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from ..request import Request
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
    ``reserve_full_isl`` (vLLM's ``scheduler_reserve_full_isl``, on by default since vLLM PR #37307, in 0.32): a
    waiting or preempted request is admitted only when the blocks of its whole known sequence (prompt and tokens
    generated so far, after its cached prefix) are free, not just those of its first chunk
    (``KVCacheManager.allocate_slots(full_sequence_must_fit=...)``); off, as in vLLM before it, a long prompt is
    admitted on its first chunk's blocks and may be preempted part-way, again and again, when the cache is short.

    With a prefix cache, as vLLM v1: an admission's chunk counts only tokens after its cached prefix, and its blocks
    are the chunk's plus the cached blocks no request holds (``view.admission_blocks``), each counted once in a
    step: a later admission sharing them finds them held, as in vLLM's waiting loop. Each admission looks up the
    cache as the step's running work and the admissions before it leave it (``view.step_draft``): their new
    blocks' evictions, and the full blocks their chunks cache.

    ``chunked_prefill`` off is vLLM v1 with ``--no-enable-chunked-prefill``: steps still mix decodes and prompts,
    but a prompt runs whole, and the first waiting request whose remaining tokens exceed the budget left ends the
    step's admissions (``if not enable_chunked_prefill and num_new_tokens > request_token_budget: break`` in vLLM
    0.32's waiting loop). vLLM then requires a budget of at least the context length and raises its default budget to
    it (``EngineArgs._set_default_max_num_seqs_and_batched_tokens_args``); a prompt over the budget is rejected at
    arrival here (``prefill_limit``).
    """

    name = "vllm-chunked"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks
    source = ("vLLM v1 scheduler with chunked prefill (vllm/v1/core/sched/scheduler.py); "
              "default max_num_batched_tokens 2048 for online serving; Lyu et al. baseline 'vLLM-vanilla'")
    decodes_first = False  # running requests in admission order, decodes and prompt chunks alike
    token_budgets = ("token_budget",)
    models_vllm = True  # refused where vLLM refuses its limits
    looks_up_in_order = True  # its admissions look up the prefix cache as vLLM's waiting loop does
    token_budget: int = 2048
    reserve_full_isl: bool = True
    chunked_prefill: bool = True
    # its plans count vLLM's windowed KV cache groups (engine/kv_windows.py) where the model has them: admissions by
    # view.admission_blocks, running steps by view.extra_blocks (RunningFirst's windowed pass)
    windowed_kv = True
    # token_budget is vLLM's max_num_batched_tokens; max_num_seqs its seat cap
    tunable = {"token_budget": IntRange(64, 8192, log=True), "max_num_seqs": IntRange(16, 1024, log=True)}

    def __post_init__(self):
        if self.token_budget < 1:
            raise ValueError(f"vllm-chunked: token_budget must be >= 1, got {self.token_budget}")

    def step_budget(self, view: ReplicaView) -> int:
        return min(self.token_budget, view.max_num_batched_tokens)

    @property
    def chunks_prompts(self) -> bool:
        return self.chunked_prefill

    def prefill_limit(self, view: ReplicaView) -> int | None:
        return None if self.chunked_prefill else self.step_budget(view)

    def unservable(self, req: Request, view: ReplicaView) -> str | None:
        limit = self.prefill_limit(view)
        n = req.num_tokens - req.num_computed  # a prompt a prefill instance sent: only its last token is computed
        if limit is None or n <= limit:
            return None
        return (f"its {n}-token prefill exceeds the step budget of {limit} tokens, and chunked prefill "
                f"is off (chunked_prefill=false, vLLM's --no-enable-chunked-prefill): raise the budget to the "
                f"context length, as vLLM requires, or turn chunked prefill on")

    def admit(self, view: ReplicaView, plan: BatchPlan, budget: int, free: int, room: int) -> None:
        """FCFS admission with a chunk of what budget is left, stopping at the first that does not fit."""
        draft = view.step_draft(plan, free)  # the cache as the running work and each admission before leave it
        for r in view.waiting:
            if budget <= 0 or room < 1:
                break
            cached = view.cached_tokens(r, draft)
            remaining = r.prompt_len + r.num_generated - cached  # after its cached prefix
            n = min(remaining, budget)
            if n < remaining and not self.chunked_prefill:  # it would be chunked: it waits, and so does the rest
                break
            need = view.admission_blocks(r, n, draft)
            if need > free or (self.reserve_full_isl and n < remaining
                               and view.admission_blocks(r, remaining, draft) > free):
                break
            if draft is not None:
                view.admitted(r, n, draft)
            plan.prefills.append((r, n))
            free -= need
            budget -= n
            room -= 1

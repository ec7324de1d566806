"""For policies that never chunk: a prompt larger than the step's token budget can never run."""
from __future__ import annotations

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from ..request import Request


def too_long(view: ReplicaView, r: Request) -> str | None:
    """Why ``r`` can never be prefilled whole under the token budget, or None."""
    n = r.prompt_len + r.num_generated - r.num_computed  # a prompt whose KV came from a prefill instance: its rest
    if n > view.max_num_batched_tokens:
        return (f"its {n}-token prompt exceeds max_num_batched_tokens {view.max_num_batched_tokens} and this "
                f"scheduler does not chunk prompts (raise the limit or use a chunking scheduler)")
    return None


def admit_whole_prompts(view: ReplicaView, plan: BatchPlan, room: int, watermark: float) -> bool:
    """vLLM's admission: whole prompts FCFS while the token budget, ``room`` seats and the KV blocks above a
    ``watermark`` fraction allow; the first that does not fit blocks the queue. True if any was admitted. With a
    prefix cache, a prompt counts only its tokens after the cached prefix against the budget and the blocks its
    admission takes (``view.admission_blocks``); a prompt longer than the budget is still refused whole, since the
    cache may lose its prefix before it runs."""
    budget = view.max_num_batched_tokens
    free = view.free_blocks - int(watermark * view.total_blocks)
    tokens = 0
    for r in view.waiting:
        n = r.prompt_len + r.num_generated
        if n - r.num_computed > budget:  # a prompt whose KV a prefill instance sent: only its rest
            plan.reject.append((r, too_long(view, r)))
            continue
        n -= view.cached_tokens(r)  # a prefix cache's hit (or a prefill instance's KV): only the rest is computed
        need = view.admission_blocks(r, n)
        if tokens + n > budget or room < 1 or (need and need > free):  # a sent prompt's rest may need none
            break
        plan.prefills.append((r, n))
        tokens += n
        room -= 1
        free -= need
    return bool(plan.prefills)

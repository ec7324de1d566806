"""vLLM's default (v0) policy: prefill-first continuous batching without chunking."""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .base import Scheduler
from .decode_pass import RunningWork
from .registry import register
from .whole_prompt import admit_whole_prompts
from .watermark import WatermarkAdmission


@register
@dataclass
class VLLM(WatermarkAdmission, Scheduler):
    """vLLM: prefill-first continuous batching, whole prompts, FCFS, preempt newest by recompute.

    Each step admits waiting requests FCFS while their whole prompts fit the token budget
    (``max_num_batched_tokens``), the sequence cap and the free KV blocks above a 1%
    watermark, and runs them as a prefill-only batch; otherwise it decodes the running requests in
    order, as many as the token budget holds (the rest wait, as in vLLM's scheduler), preempting the
    newest when a block is short, then swaps requests back in.
    The head of the queue blocks those behind it. Prefill and decode never share a step. A
    prompt longer than the budget can never run unchunked and is rejected with that reason, as
    is one needing more than the whole cache less the watermark (schedulers/watermark.py).

    With a prefix cache, as vLLM v1: a prompt counts only its tokens after the cached prefix against the budget and
    the blocks its admission takes (``view.admission_blocks``); preempting credits only the blocks a preemption
    frees.
    """

    name = "vllm"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks
    steady_decodes = True  # a decode-only step repeats while nothing arrives, finishes or runs short of KV
    plans_decode_group = True  # a decode step decodes every running request: the group, when every one fits
    source = ("vLLM v0 default scheduler (Kwon et al., SOSP'23, PagedAttention); as the baseline of "
              "Bari et al. §2.5 (max_num_seqs 128, max_num_batched_tokens 8192) and Kim et al. §1.6 (vLLM row)")
    chunks_prompts = False
    models_vllm = True  # refused where vLLM refuses its limits
    watermark: float = 0.01

    def __post_init__(self):
        if not 0 <= self.watermark < 1:
            raise ValueError(f"vllm: watermark must be in [0, 1), got {self.watermark}")

    def schedule(self, view: ReplicaView) -> BatchPlan:
        plan = BatchPlan()
        if not view.swapped and admit_whole_prompts(view, plan, view.max_num_seqs - view.num_running,
                                                    self.watermark):
            return plan
        free = RunningWork(view).add_decodes(plan, limit=view.max_num_batched_tokens)  # decodes beyond the budget wait
        if not plan.preempt and view.swapped:
            swap_in(view, plan, free - int(self.watermark * view.total_blocks))
            if not plan.has_work and not view.num_running:
                # on a decode instance, prompts a prefill instance sent wait holding the blocks a swapped request
                # needs, and nothing running will free any: they run first (vLLM v0 held no blocks for a waiting
                # request, so its rule of no admission while any is swapped out never met this)
                admit_whole_prompts(view, plan, view.max_num_seqs, self.watermark)
        return plan


def swap_in(view: ReplicaView, plan: BatchPlan, free: int) -> None:
    """Bring swapped requests back, oldest first, while ``free`` blocks, seats and budget allow."""
    room = view.max_num_seqs - view.num_running
    tokens = plan.num_tokens
    for r in view.swapped:
        remaining = r.prompt_len + r.num_generated - r.num_computed
        need = r.num_blocks + view.extra_blocks(r, r.num_computed + remaining)
        if room < 1 or need > free or tokens + remaining > view.max_num_batched_tokens:
            break
        if remaining == 1:
            plan.decodes.append(r)
        else:
            plan.prefills.append((r, remaining))
        room -= 1
        free -= need
        tokens += remaining

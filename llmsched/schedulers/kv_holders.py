"""Waiting requests that hold KV: what a policy owes them so that a replica never idles beside blocks it holds."""
from __future__ import annotations

from ..engine.view import ReplicaView


def front_holds_kv(view: ReplicaView) -> bool:
    """The waiting queue's front holds KV blocks: a prompt a prefill instance sent (a disaggregated fleet's decode
    instance) or a prefix a tier below the GPU loaded. Such requests wait at the front of the replica's queue, as
    vLLM 0.32 drains its KV-holding waiting queue first (vllm/v1/core/sched/scheduler.py), so this is O(1).

    While it holds, a plan of preemptions alone is worth keeping: the blocks and the seat it frees let the front
    in at the next step, as vLLM preempts a decode it cannot allocate for (itself, when it is the only one) and then
    schedules what fits; without such a request the same plan would idle the replica the same way."""
    waiting = view.waiting
    return bool(waiting) and waiting[0].num_blocks > 0

"""The decode pass shared by vLLM-style policies: every running decode, FCFS, preempting the newest on block shortage."""
from __future__ import annotations

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView


def split_running(running, block_size: int) -> tuple[list, list, int]:
    """One pass over ``running``: (requests in decode phase, the others, decodes crossing into a new block)."""
    ready, others, grow = [], [], 0
    for r in running:
        computed = r.num_computed
        if r.num_generated and computed + 1 == r.prompt_len + r.num_generated:
            ready.append(r)
            if computed >= r.num_blocks * block_size:
                grow += 1
        else:
            others.append(r)
    return ready, others, grow


def add_decodes(view: ReplicaView, plan: BatchPlan, running=None, limit: int | None = None,
                reserve: int = 0, split: tuple[list, list, int] | None = None) -> int:
    """Add a decode for each decode-phase request of ``running`` (default: the view's, in order).

    When a decode needs a block and none is free, preempt from the tail of ``running``
    (the newest under FCFS), the request itself last. Stops after ``limit`` decodes.
    ``reserve`` blocks are held back for other work. Returns the KV blocks still free (beyond
    ``reserve``) after these decodes and preemptions. Requests not in decode phase are skipped.
    ``split`` is ``split_running(running, ...)`` when the caller has it already.
    """
    running = view.running if running is None else running
    bs = view.block_size
    free = view.free_blocks - reserve - sum(view.decode_blocks(r) for r in plan.decodes)
    ready, _, need = split if split is not None else split_running(running, bs)
    if need <= free and (limit is None or len(ready) <= limit):  # the common case: all fit
        plan.decodes.extend(ready)
        return free - need
    end = len(running)
    decodes = plan.decodes
    preempt = plan.preempt
    limit = end if limit is None else limit
    i = 0
    while i < end and len(decodes) < limit:
        r = running[i]
        if r.num_generated == 0 or r.num_computed + 1 != r.prompt_len + r.num_generated:
            i += 1
            continue
        need = 1 if r.num_computed + 1 > r.num_blocks * bs else 0
        while need > free and end > i:
            end -= 1
            victim = running[end]
            preempt.append(victim)
            free += view.preempt_frees(victim)
        if end == i:
            break  # the request preempted itself
        free -= need
        decodes.append(r)
        i += 1
    return free

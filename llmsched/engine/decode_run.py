"""Fast-forwarding a run of decode-only steps: k steps of the simulator in one pass, identical to stepping.

When the step just launched decodes every running request and nothing else, nothing waits or is swapped, and the
policy declares ``steady_decodes``, every following step is the same plan with each context one token longer,
until the first request finishes, a decode finds no free KV block, or another event (an arrival, another
replica's step, a wake-up, the horizon) may change what the policy or a router sees. Those steps are run here at
once: each step's duration is the batch-time model's for the same count and context sum (``decode_sum_time``,
the very float stepping computes), each is recorded in the step log as stepping records it, and each request
gets the same token timestamps. The last of them is left in flight, as the simulator's next STEP_END.
"""
from __future__ import annotations

from array import array

import numpy as np


def fast_forward_decodes(rep, until: float, horizon: float | None) -> float:
    """Advance ``rep`` (its step in flight: all running requests decoding) through every step that starts
    before ``until`` and by ``horizon``; returns the duration of the step left in flight."""
    running = rep.running
    n = len(running)
    first_finish = 1 << 62  # the step (1 = the one in flight) that finishes a request: the last one to fold
    for r in running:
        left = r.output_len - r.num_generated
        if left < first_finish:
            if left < 2:  # the step in flight finishes one: nothing to fold (the common case under load)
                return rep.step_end - rep._step_start
            first_finish = left
    kv = rep.kv
    bs = kv.block_size
    ctx = np.fromiter((r.num_computed for r in running), dtype=np.int64, count=n)  # before the step in flight
    crossing = np.bincount(ctx % bs, minlength=bs)  # requests with ctx ≡ -j (mod bs) take a block at step j + 1
    bt, steps, index, total = rep.batch_time, rep.steps, rep.index, kv.total
    batch = rep._batch
    context_sum = batch.context_sum   # of the step in flight: Σ (ctx + 1)
    waiting, busy_time, recent = len(rep.waiting), rep.busy_time, rep.recent_steps
    free = kv.free
    start, end = rep._step_start, rep.step_end
    preempted = rep._step_preempted
    ends = array("d")
    j = 1  # the step in flight
    while j < first_finish and end < until and (horizon is None or end <= horizon):
        need = int(crossing[(-j) % bs])  # step j + 1 crosses into a new block where ctx + j ≡ 0 (mod bs)
        if need > free:
            break
        # step j ends: record it as end_step would
        duration = end - start
        busy_time += duration
        recent.append(duration)
        steps.add(index, start, duration, 0, 0, n, context_sum, total - free, total, waiting, n, preempted)
        ends.append(end)
        preempted = 0
        # step j + 1 starts
        j += 1
        free -= need
        context_sum += n
        start = end
        end = start + bt.decode_sum_time(n, context_sum)
    done = j - 1
    if done:
        for r in running:
            r.num_computed += done
            r.num_generated += done
            r.token_times.extend(ends)
            r.last_token = ends[-1]
            blocks = -(-(r.num_computed + 1) // bs)
            if blocks > r.num_blocks:
                r.num_blocks = blocks
        kv.free = free
        rep.num_steps += done
        rep.busy_time = busy_time
        rep.now = start
        rep._step_start = start
        rep.step_end = end
        rep._step_preempted = 0
        rep._batch = type(batch)([], [], [r.num_computed + 1 for r in running])
    return end - start

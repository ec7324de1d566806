"""Fast-forwarding a run of decode-only steps: k steps of the simulator in one pass, identical to stepping.

When the step just launched decodes every running request and nothing else, nothing waits or is swapped, and the
policy declares ``steady_decodes``, every following step is the same plan with each context one token longer,
until the first request finishes, a decode finds no free KV block, or another event (an arrival, another
replica's step, a wake-up, the horizon) may change what the policy or a router sees. Past a finish the run goes
on when finishing adds no event (an open-loop source) and the policy declares ``steady_after_finishes``: the
finished requests leave as ``end_step`` lets them, and the rest decode on. Those steps are run here at
once: each step's duration is the batch-time model's for the same count and context sum (``decode_sum_time``,
the very float stepping computes), each is recorded in the step log as stepping records it, and each request
gets the same token timestamps. The last of them is left in flight, as the simulator's next STEP_END: the replica's
clock (step_clock.py) and counters (step_counters.py) are told where the run left them.
"""
from __future__ import annotations

from array import array

import numpy as np

from ..request import Status
from .decode_group import TRIM_AT
from .plan import BatchPlan

FINISHED = Status.FINISHED


def fast_forward_decodes(rep, until: float, horizon: float | None, through_finishes: bool = False) -> float:
    """Advance ``rep`` (its step in flight: all running requests decoding) through every step that starts
    before ``until`` and by ``horizon``; returns the duration of the step left in flight.

    ``through_finishes``: a step that finishes some requests is folded too (they leave as ``end_step`` would let
    them, into ``rep.completed`` in running order) when the policy decodes the rest after a finish
    (``steady_after_finishes``) and finishing adds no event (an open-loop source); a step that would finish
    every request is left in flight."""
    running = rep.running
    n = len(running)
    left = [r.output_len - r.num_generated for r in running]  # the step (1 = the one in flight) each finishes in
    first_finish = min(left)
    clock, counters = rep.clock, rep.counters
    if first_finish < 2 and not through_finishes:  # the step in flight finishes one: nothing to fold
        return clock.step_end - clock.step_start
    kv = rep.kv
    bs = kv.block_size
    computed = [r.num_computed for r in running]  # before the step in flight
    # requests with computed ≡ -j (mod bs) take a block at step j + 1
    crossing = np.bincount(np.array(computed, dtype=np.int64) % bs, minlength=bs).tolist()
    order = sorted(range(n), key=left.__getitem__) if through_finishes else ()
    nxt = 0  # next of ``order`` to finish
    finished_at: list[tuple[int, list[int]]] = []  # (step, running indices finishing in it)
    bt, steps, index, total = rep.batch_time, rep.steps, rep.index, kv.total
    context_sum = clock.row[3]  # of the step in flight: Σ (ctx + 1)
    waiting, busy_time, recent = len(rep.waiting), counters.busy_time, counters.recent_steps
    free = kv.free
    start, end = clock.step_start, clock.step_end
    preempted = clock.step_preempted
    alive = n
    ends = array("d")
    j = 1  # the step in flight
    while end < until and (horizon is None or end <= horizon):
        if j >= first_finish:
            if not through_finishes:
                break
            fin = []
            while nxt < n and left[order[nxt]] == j:
                fin.append(order[nxt])
                nxt += 1
            if len(fin) == alive:
                break  # step j ends the replica's work: end_step takes it
            freed = 0
            for i in fin:
                freed += -(-(computed[i] + j) // bs)  # the blocks it holds in step j
                crossing[computed[i] % bs] -= 1
            need = crossing[(-j) % bs]
            if need > free + freed:
                for i in fin:
                    crossing[computed[i] % bs] += 1
                nxt -= len(fin)
                break
            first_finish = left[order[nxt]] if nxt < n else 1 << 62
            fin.sort()
            finished_at.append((j, fin))
            done_ctx = sum(computed[i] for i in fin) + j * len(fin)
        else:
            fin, freed, done_ctx = (), 0, 0
            need = crossing[(-j) % bs]  # step j + 1 crosses into a new block where ctx + j ≡ 0 (mod bs)
            if need > free:
                break
        # step j ends: record it as end_step would
        free += freed
        duration = end - start
        busy_time += duration
        recent.append(duration)
        steps.add(index, start, duration, 0, 0, alive, context_sum, total - free, total, waiting,
                  alive - len(fin), preempted)
        ends.append(end)
        preempted = 0
        # step j + 1 starts
        alive -= len(fin)
        j += 1
        free -= need
        context_sum += alive - done_ctx
        start = end
        end = start + bt.decode_sum_time(alive, context_sum)
    done = j - 1
    if done:
        plan = clock.plan
        gone = set()
        for step, fin in finished_at:
            t = ends[step - 1]
            for i in fin:
                r = running[i]
                r.num_computed += step
                r.num_generated += step
                r.token_times.extend(ends[:step])
                r.last_token = r.finish = t
                r.status = FINISHED
                kv.release(r)  # the blocks it held before the run (the fold counted those it took since)
                rep.completed.append(r)
                gone.add(i)
        if gone:
            running[:] = [r for i, r in enumerate(running) if i not in gone]
            plan = BatchPlan(decodes=list(running))
        for r in running:
            r.num_computed += done
            r.num_generated += done
            r.token_times.extend(ends)
            r.last_token = ends[-1]
        kv.allocate_decodes(running)  # the block of the step in flight's token
        assert kv.free == free, f"fast-forward KV count {free} != the manager's {kv.free}"
        counters.folded(done, busy_time)
        clock.folded(start, end, plan, (0, 0, len(running), sum(r.num_computed + 1 for r in running)))
    return end - start


def fast_forward_group(rep, until: float, horizon: float | None, through_finishes: bool = False) -> float:
    """``fast_forward_decodes`` for a step in flight that decodes the replica's whole decode group (every running
    request): each folded step ends as ``end_step`` ends it (the group's clock advances, finishing members leave;
    a step without finishes is recorded right here, the same row) and the next is launched with the group's
    count and context sum, so a step costs no per-request work."""
    g = rep.groups.group
    clock, counters = rep.clock, rep.counters
    kv = rep.kv
    bs = g.block_size
    hist, ends = g.hist, g.ends
    decode_sum_time = rep.batch_time.decode_sum_time
    add, recent = rep.steps.add, counters.recent_steps
    index, total, waiting = rep.index, kv.total, len(rep.waiting)
    start, end = clock.step_start, clock.step_end
    context = clock.row[3]  # of the step in flight
    busy, folded, advanced = counters.busy_time, 0, False
    free = kv.free  # the manager's count less ``taken``: the blocks the folded steps took, handed to it in one call
    taken = 0
    finish = g.next_finish()
    while end < until and (horizon is None or end <= horizon):
        nxt = g.clock + 1
        if nxt == finish:  # the step in flight finishes members: end it as end_step does
            fin = g.finish_at[nxt]
            if not through_finishes or len(fin) == g.size:
                break
            need = hist[-nxt % bs]  # the next step's block crossings, less the finishers'
            key = -nxt % bs
            freed = 0
            for r in fin:
                if (r.num_computed - r.lag) % bs == key:
                    need -= 1
                freed += -(-(g.exact(r)[0] + 1) // bs)
            if need > free + freed:
                break
            kv.take_group(taken)
            taken = 0
            counters.folded(folded, busy)
            folded = 0
            clock.folded(start, end, clock.plan, (0, 0, g.size, context))  # the step in flight, ended here
            rep.groups.end_group_step(end)
            busy = counters.busy_time
            free = kv.free
            finish = g.next_finish()
        else:
            need = hist[-nxt % bs]
            if need > free:
                break
            n = g.size
            ends.append(end)
            g.clock = nxt
            g.context_sum += n
            duration = end - start
            busy += duration
            recent.append(duration)
            folded += 1
            add(index, start, duration, 0, 0, n, context, total - free, total, waiting, n, 0)
            if len(ends) >= 2 * TRIM_AT:
                g.trim()
        free -= need
        taken += need
        n, context = g.size, g.context_sum
        advanced = True
        start = end
        end = start + decode_sum_time(n, context)
    if taken:
        kv.take_group(taken)
    if advanced:
        counters.folded(folded, busy)
        clock.folded(start, end, clock.plan, (0, 0, g.size, context))
        clock.ended(start)  # the last folded step's end
    return end - start

"""The livelock guard: a request preempted again and again, readmitted each time, while nothing progresses.

A policy that takes a request's blocks back before its (re)prefill ends, over and over, makes no progress on it:
recomputation is thrown away each time, and when the policies of two requests take each other's places the run
never ends (vtc's reclaims did, before ``max_reclaims``: a 25-block request recomputed 692 times on a 27-block
cache, found by a test's 900-s timeout). The replica counts, per request, the preemptions in a row with no token of
that request in between. At ``FRUITLESS_PREEMPTIONS`` it ends the run with a one-line ``Livelock`` error naming the
policy and the request, if over the last half of them the replica made no progress either: no request left it and
none of those on it produced a token (a request thrashing while others decode is a busy replica, not a livelock:
the conservation fuzz's seeds reach 263 preemptions in a row so, and finish). The count is kept only where a request
is preempted (engine/preemption.py), the replica's progress read only at the half and at the bound: a step pays
nothing.

The bound is the one overflow eviction has (``ReplicaConfig.max_evictions``, 1000, which rejects the request
instead); evictions are left to it. A prefill instance that keeps finished prompts' blocks for the decode side
(``Replica.sent``) is not livelocked: the reads free them, however many steps the wait takes (vLLM's scheduler
spins the same way), so the count is watched again instead. Nor is a decode instance while KV transfers it reserved
blocks for are in flight (``Replica.transferring``): the requests they bring run once they land, and until then the
prompts beside them may find too few blocks to finish (the conservation fuzz's seed 149,884: two prompts' KV, 887 of
1,080 blocks, crossing a 50 MB/s link, while FairBatching swapped two prompts that could not both fit beside it).
"""
from __future__ import annotations

from ..request import Request
from .errors import PlanError

FRUITLESS_PREEMPTIONS = 1000
ARMED = FRUITLESS_PREEMPTIONS // 2  # from here the replica's progress is compared at the bound


class Livelock(PlanError):
    """A request was preempted ``FRUITLESS_PREEMPTIONS`` times in a row without producing a token, and its
    replica made no progress meanwhile."""


def note_preemption(rep, r: Request) -> None:
    """Count ``r``'s preemption (before it loses anything: its tokens so far are ``r.num_generated``); raise
    ``Livelock`` at the bound when the replica made no progress since the count was armed. Requests no longer on
    the replica are dropped from the counts once they hold twice as many as its queues."""
    counts = rep.fruitless
    seen = counts.get(r.id)
    tokens = r.num_generated
    if seen is None or seen[0] != tokens:
        counts[r.id] = (tokens, 1, None)
    else:
        n, mark = seen[1] + 1, seen[2]
        if n == ARMED:
            mark = progress(rep)
        elif n >= FRUITLESS_PREEMPTIONS:
            now = progress(rep)
            waits_on_kv = rep.sent or rep.transferring  # kept KV goes when it is read; KV on its way lands
            if now == mark and not waits_on_kv:
                raise Livelock(f"scheduler {rep.scheduler.name!r} on replica {rep.index}: livelock: request {r.id} "
                               f"was preempted {n} times in a row, readmitted each time, without producing a token "
                               f"(it has {tokens} of {r.output_len}), and over the last {n - ARMED} the replica "
                               f"produced none and finished no request; the policy can never finish it, so the run "
                               f"stops here")
            n, mark = ARMED, now  # the replica progressed: watch the next stretch
        counts[r.id] = (tokens, n, mark)
    if len(counts) > 2 * (len(rep.waiting) + len(rep.running) + len(rep.swapped)) + 64:
        live = {q.id for q in rep.waiting} | {q.id for q in rep.running} | {q.id for q in rep.swapped}
        for rid in [rid for rid in counts if rid not in live and rid != r.id]:
            del counts[rid]


def progress(rep) -> tuple[int, int]:
    """What moves when the replica makes progress: the requests that have left it, and the tokens of those on it
    (exact here: a plan's preemptions follow the decode group's settling)."""
    present = rep.waiting + rep.running + rep.swapped
    return rep.arrivals - len(present), sum(q.num_generated for q in present)

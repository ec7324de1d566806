"""A running request losing its place, and a swapped one getting it back.

Preemption is the policy's (``BatchPlan.preempt``): by recompute (the KV dropped, the request back at the front of
the queue with its generated tokens) or by swap (the blocks to host memory; recompute, counted, when host memory is
full), as the replica is configured. Overflow eviction is the mechanism's, for a plan needing more blocks than are
free under ``overflow`` "evict-newest" (restart from scratch) or "evict-newest-recompute" (Ao et al. §1.4). Swapped
requests return before the policy decides, so no policy can strand one.
"""
from __future__ import annotations

import math
from array import array

from . import remote_kv
from ..request import Request, Status
from .livelock import note_preemption
from .plan import BatchPlan

WAITING, RUNNING, SWAPPED = Status.WAITING, Status.RUNNING, Status.SWAPPED


def preempt(rep, r: Request) -> None:
    note_preemption(rep, r)  # the livelock guard: a request preempted for ever without a token ends the run
    rep.counters.preempted()
    r.preemptions += 1
    kv = rep.kv
    if rep.config.preemption_mode == "swap":
        if kv.swap_out(r):
            r.status = SWAPPED
            rep.swapped.append(r)
            return
        rep.counters.swap_fell_back()  # no host space: recompute instead, counted
    kv.release(r)
    r.num_computed = 0
    r.status = WAITING
    if not reject_unservable(rep, r):
        rep.waiting.insert(remote_kv.front(rep.waiting), r)


class NothingFits(Exception):
    """Overflow eviction left no request of the plan and freed nothing: the policy would plan the same again."""


def evict_for(rep, plan: BatchPlan, need: int) -> tuple[BatchPlan | None, int]:
    """Ao et al. §1.4: evict running requests, most recently admitted first, until the plan's ``need`` new blocks
    fit; if they still do not, the plan's newest admission stays waiting. Returns the plan without them (None if
    nothing of it is left), which the caller checks again, and how many were evicted."""
    kv = rep.kv
    grows = {}
    for r in plan.decodes:
        if r.status is RUNNING:
            grows[r] = kv.extra_blocks(r, r.num_computed + 1)
    for r, n in plan.prefills:
        if r.status is RUNNING:
            grows[r] = kv.extra_blocks(r, r.num_computed + n)
    victims = set()
    running = rep.running
    for r in reversed(running):
        if need <= kv.free:
            break
        need -= grows.get(r, 0)
        evict(rep, r)
        victims.add(r)
    running[:] = [r for r in running if r.status is RUNNING]
    for r in plan.decodes:
        r.mark = -1
    for r, _ in plan.prefills:
        r.mark = -1
    for r in plan.preempt:  # preempted already: a plan asked for after this one, with no step between, may list it
        r.mark = -1
    kept = BatchPlan(decodes=[r for r in plan.decodes if r not in victims],
                     prefills=[(r, n) for r, n in plan.prefills if r not in victims])
    if need > kv.free:  # the plan's own admissions overflow: the newest stays waiting
        # one at a time: the caller measures the rest again. An admission's blocks are not its chunk's alone (a
        # prefix hit reclaims cached blocks, admissions share blocks), so subtracting estimates could drop an
        # oldest admission that fits on its own, leave nothing and have the policy plan the same again for ever
        r, n = next((r, n) for r, n in reversed(kept.prefills) if r.status is WAITING)
        kept.prefills.remove((r, n))
    return (kept if kept.has_work else None), len(victims)


def evict(rep, r: Request) -> None:
    rep.counters.evicted()
    r.preemptions += 1
    rep.kv.release(r)
    r.num_computed = 0
    r.status = WAITING
    cfg = rep.config
    if r.preemptions >= cfg.max_evictions:
        rep.reject(r, f"preempted or evicted {r.preemptions} times, the last by KV overflow ({cfg.overflow}): "
                      f"the policy admits more than the cache holds and evictions cycle (Ao et al. §2, cascading "
                      f"eviction); use a policy that guards memory, more KV blocks or a higher max_evictions")
    elif cfg.overflow == "evict-newest":  # back to stage 0, re-queued as a new arrival
        r.num_generated = 0
        r.token_times = array("d")
        r.first_token = r.last_token = math.nan
        rep.waiting.append(r)
    elif not reject_unservable(rep, r):
        rep.waiting.insert(remote_kv.front(rep.waiting), r)


def reject_unservable(rep, r: Request) -> bool:
    """After a recompute preemption the prefill is prompt + generated: reject ``r`` if its policy can never run
    that (as vLLM ignores a re-prefill over its limit). True if rejected."""
    scheduler = rep.scheduler
    reason = scheduler.unservable(r, rep.view)
    if reason:
        rep.reject(r, f"{scheduler.name}: preempted by recompute, then {reason}")
    return bool(reason)


def swap_in(rep) -> None:
    """Swapped requests return, oldest first, while their blocks fit beside the next token of every running decode,
    a seat is free and the step's token budget has a token for it beside one for every running request (vLLM v0
    serves swapped before waiting, each within the budget's tokens and seqs: ``_schedule_swapped``); a policy then
    sees them as running. The transfer time is charged to the next step."""
    kv = rep.kv
    bs = kv.block_size
    running, swapped = rep.running, rep.swapped
    free = kv.free - sum(1 for r in running if r.is_decode and r.num_computed + 1 > r.num_blocks * bs)
    cfg = rep.config
    seats = min(cfg.max_num_seqs, cfg.max_num_batched_tokens)  # a running request takes a token of every step
    while swapped and len(running) < seats:
        r = swapped[0]
        need = r.num_blocks + kv.extra_blocks(r, r.num_computed + 1)
        if need > free:
            break
        free -= need
        del swapped[0]
        rep.clock.owe(kv.swap_in(r) * rep.config.swap_seconds_per_block)
        r.status = RUNNING
        rep.append_running(r)

"""Checking a scheduler's plan against the replica's hard limits, and what the plan needs.

A plan may list a request once; it decodes running (or swapped) requests in decode phase, prefills waiting,
running or swapped requests of this replica by chunks of 1 to their remaining tokens (a waiting request whose
prompt KV a prefill instance sent, sized on its whole prompt, is cut to what it has left), and stays within
``max_num_batched_tokens``, ``max_num_seqs`` and the free KV blocks (after its own preemptions). A violation raises
``PlanError`` naming the scheduler, the replica and the limit. ``check_work`` also says what the plan needs: new KV
blocks, the requests it admits and swaps in, the decodes that grow by a block, and the step's ``Batch``.
"""
from __future__ import annotations

from ..batchtime.base import Batch
from ..request import Request, Status
from .cache_draft import CacheDraft
from .errors import PlanError
from .plan import BatchPlan
from .tier_admission import fit_tier_hits

WAITING, RUNNING, SWAPPED = Status.WAITING, Status.RUNNING, Status.SWAPPED


def fail(rep, limit: str, detail: str):
    raise PlanError(f"scheduler {rep.scheduler.name!r} on replica {rep.index}: {limit} ({detail})")


def check_reject(rep, req: Request) -> None:
    if req.status is not WAITING or req.replica != rep.index:
        fail(rep, "only waiting requests can be rejected", f"request {req.id} is {req.status.name}")


def check_idle(rep, plan: BatchPlan, now: float) -> None:
    """A plan without work may only ask to be woken later."""
    if plan.preempt:
        fail(rep, "preempt requires work in the same plan", "plan.preempt without decodes or prefills")
    if plan.wait_until is not None and not plan.wait_until > now:
        fail(rep, "wait_until must lie in the future", f"wait_until={plan.wait_until} at now={now}")


def check_listed(rep, plan: BatchPlan) -> None:
    """A plan that lists its decodes (the group's fast path did not take it) cannot also claim the group."""
    if plan.decode_group:
        fail(rep, "decode_group needs the view's decode group and no decodes or preemptions listed",
             "group formed" if rep.group is not None else "no group formed")


def check_preempt(rep, r: Request, stamp: int) -> None:
    """``r`` may be preempted by this plan (marked listed in step ``stamp``)."""
    if r.status is not RUNNING or r.replica != rep.index:
        fail(rep, "only running requests can be preempted", f"request {r.id} is {r.status.name}")
    if r.mark == stamp:
        fail(rep, "a request may appear once per plan", f"request {r.id} listed twice")
    r.mark = stamp


def fit_hits(kv, hits: list, need: int, plan: BatchPlan, prefill_new: list, prefill_ctx: list,
             prefill_tokens: int) -> tuple:
    """The plan's admissions that start from cached blocks, sized: each takes its whole hit and computes the rest
    of its chunk; if then the plan needs more blocks than are free, each admission costs at most what the policy
    counted without a cache (its chunk's blocks), taking fewer cached blocks or a shorter chunk. Writes their
    chunks into the plan and the batch; returns ``([(request, blocks)], blocks needed, prompt tokens)``."""
    for fitted in (False, True):
        taken: dict = {}  # free cached blocks the plan's admissions use, counted once
        sized, cost = [], 0
        for i, slot, r, hit, n, remaining in hits:
            used, m, c = kv.size_admission(hit, n, remaining, taken, fitted)
            sized.append((i, slot, r, used, m))
            cost += c
        if need + cost <= kv.free or fitted:
            break
    bs = kv.block_size
    admitted = []
    for i, slot, r, used, m in sized:
        plan.prefills[i] = (r, m)
        prefill_new[slot] = m
        prefill_ctx[slot] = len(used) * bs
        prefill_tokens += m
        if used:
            admitted.append((r, used))
    return admitted, cost, prefill_tokens


def fit_hits_in_order(kv, hits: list, need: int, plan: BatchPlan, prefill_new: list, prefill_ctx: list,
                      prefill_tokens: int) -> tuple:
    """The plan's admissions that look up the prefix cache, sized in vLLM's order (engine/cache_draft.py): the
    plan's other work first (``need`` new blocks; its running chunks cache their full blocks), then each admission
    in plan order finds what the cache holds by then, takes its whole hit and computes the rest of its chunk. If
    then the plan needs more blocks than are free, each admission costs at most what the policy counted without a
    cache (its chunk's blocks), taking fewer cached blocks or a shorter chunk. Writes their chunks into the plan and
    the batch; returns ``([(plan index, request, cached blocks used)], blocks needed, prompt tokens)``."""
    bs = kv.block_size
    looked = {h[0]: h for h in hits}
    later = {}  # plan index -> new blocks of an admission without a lookup (taken in plan order)
    for i, (r, n) in enumerate(plan.prefills):
        if r.status is WAITING and i not in looked:
            later[i] = kv.extra_blocks(r, r.num_computed + n)
    first = need - sum(later.values())
    for fitted in (False, True):
        draft = CacheDraft(kv)
        draft.take(first)
        for r, n in plan.prefills:
            if r.status is not WAITING:
                draft.register(r, r.num_computed + n)
        taken = draft.taken  # free cached blocks the plan's admissions use, counted once
        sized, cost = [], 0
        for i, (r, n) in enumerate(plan.prefills):
            if i in later:
                draft.take(later[i])
                draft.register(r, r.num_computed + n)
                continue
            h = looked.get(i)
            if h is None:
                continue
            slot, remaining = h[1], h[5]
            used, m, c = kv.size_admission(draft.lookup(r), n, remaining, taken, fitted)
            draft.take(-(-m // bs))
            draft.register(r, len(used) * bs + m)
            sized.append((i, slot, r, len(used), m))
            cost += c
        if need + cost <= kv.free or fitted:
            break
    admitted = []
    for i, slot, r, used, m in sized:
        plan.prefills[i] = (r, m)
        prefill_new[slot] = m
        prefill_ctx[slot] = used * bs
        prefill_tokens += m
        admitted.append((i, r, used))
    return admitted, cost, prefill_tokens


def check_work(rep, plan: BatchPlan, stamp: int) -> tuple:
    """The plan's decodes and prefills against the limits, after its preemptions. Returns ``(need, admit, swap_in,
    grow, batch, prefill_tokens, hits)``: new KV blocks (more than are free only when the replica evicts on
    overflow), the waiting requests admitted, the swapped ones brought back, the decodes that cross into a new
    block, the step's ``Batch``, its prompt tokens, and (with a prefix cache) each admission's cached blocks.

    With a prefix cache, an admitted request starts from its cached leading blocks (``kv.lookup``): its chunk
    computes only tokens after them (a chunk the policy sized on the whole prompt is cut to what is left, in the
    plan too, as vLLM v1 counts only new tokens), and it needs the blocks beyond its hit plus the hit's blocks
    nobody referenced, each counted once in the plan."""
    kv = rep.kv
    bs = kv.block_size
    windowed = rep.config.kv_groups is not None  # engine/kv_windows.py: a step's blocks are the manager's count
    index = rep.index
    need = 0
    swap_in: list[Request] = []
    grow: list[Request] = []
    decode_ctx = []
    append_ctx = decode_ctx.append
    for r in plan.decodes:
        if r.status is not RUNNING:
            if r.status is not SWAPPED or r.replica != index:
                fail(rep, "decodes must be running requests", f"request {r.id} is {r.status.name}")
            swap_in.append(r)
            need += r.num_blocks
        if r.mark == stamp:
            fail(rep, "a request may appear once per plan", f"request {r.id} listed twice or preempted")
        r.mark = stamp
        ctx = r.num_computed + 1
        g = r.num_generated
        if ctx != r.prompt_len + g or not g:
            fail(rep, "a decode needs a request whose prompt is done and one token pending",
                 f"request {r.id}: computed {r.num_computed} of {r.num_tokens} tokens")
        append_ctx(ctx)
        held = r.num_blocks
        if windowed:  # every decode may free blocks that left its window, and take one
            need += kv.extra_blocks(r, ctx)
            grow.append(r)
        elif ctx > held * bs:
            need += -(-ctx // bs) - held
            grow.append(r)

    admit: list[Request] = []
    prefill_new = []
    prefill_ctx = []
    prefill_tokens = 0
    hits = None
    caching = rep.caching
    tiered = caching and rep.kv.tiers is not None
    in_order = rep.in_order
    for i, (r, n) in enumerate(plan.prefills):
        st = r.status
        if r.replica != index or st is not RUNNING:
            if st is WAITING and r.replica == index:
                admit.append(r)
            elif st is SWAPPED and r.replica == index:
                swap_in.append(r)
                need += r.num_blocks
            else:
                fail(rep, "prefills must be waiting, running or swapped requests of this replica",
                     f"request {r.id} is {st.name}")
        if r.mark == stamp:
            fail(rep, "a request may appear once per plan", f"request {r.id} listed twice or preempted")
        r.mark = stamp
        remaining = r.prompt_len + r.num_generated - r.num_computed
        if not (isinstance(n, int) and 1 <= n <= remaining):
            if not (st is WAITING and r.num_computed and isinstance(n, int) and n > remaining):
                fail(rep, "a prefill chunk must be between 1 and the request's remaining tokens",
                     f"request {r.id}: chunk {n!r}, {remaining} remaining")
            # its prompt's KV came from a prefill instance (remote_kv.py) and the policy sized the whole prompt:
            # only the rest is computed, as vLLM v1 counts a loaded request's new tokens only
            n = remaining
            plan.prefills[i] = (r, n)
        # (a waiting request that holds blocks, KV a tier loaded or a prefill instance sent, looks nothing up: a
        # one-token prompt sent by a prefill instance waits with none of it computed)
        if caching and st is WAITING and r.content is not None and not r.num_computed and not r.num_blocks:
            hit = None if in_order else kv.lookup(r)  # in vLLM's order: found by fit_hits_in_order
            if hit or tiered or in_order:
                if hits is None:
                    hits = []
                hits.append((i, len(prefill_new), r, hit, n, remaining))
                prefill_new.append(0)  # written below, once the plan's hits are sized together
                prefill_ctx.append(0)
                continue
        prefill_new.append(n)
        prefill_ctx.append(r.num_computed)
        prefill_tokens += n
        if windowed:  # may be negative: blocks that left the window
            need += kv.extra_blocks(r, r.num_computed + n)
            continue
        extra = -(-(r.num_computed + n) // bs) - r.num_blocks
        if extra > 0:
            need += extra

    if hits is not None:
        if tiered:  # the tiers below the GPU extend the hits (engine/tier_admission.py)
            admitted, cost, prefill_tokens = fit_tier_hits(rep, hits, need, plan, prefill_new, prefill_ctx,
                                                           prefill_tokens, admit)
        elif in_order:
            admitted, cost, prefill_tokens = fit_hits_in_order(kv, hits, need, plan, prefill_new, prefill_ctx,
                                                               prefill_tokens)
        else:
            admitted, cost, prefill_tokens = fit_hits(kv, hits, need, plan, prefill_new, prefill_ctx,
                                                      prefill_tokens)
        need += cost
        hits = admitted
    tokens = prefill_tokens + len(decode_ctx)
    cfg = rep.config
    if tokens > cfg.max_num_batched_tokens:
        fail(rep, "max_num_batched_tokens exceeded", f"{tokens} > {cfg.max_num_batched_tokens}")
    seqs = len(rep.running) + len(admit) + len(swap_in)
    if seqs > cfg.max_num_seqs:
        fail(rep, "max_num_seqs exceeded", f"{seqs} running > {cfg.max_num_seqs}")
    if need > kv.free and cfg.overflow == "error":
        fail(rep, "KV cache capacity exceeded (preempt first)", f"plan needs {need} more blocks, {kv.free} free")
    return need, admit, swap_in, grow, Batch(prefill_new, prefill_ctx, decode_ctx), prefill_tokens, hits

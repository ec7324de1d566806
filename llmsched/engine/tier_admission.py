"""A plan's admissions on a replica with KV tiers below the GPU: each starts from its GPU hit (sized exactly as
``plan_check.fit_hits`` sizes it), then from what the tiers hold past it (engine/kv_tiers.py).

* LMCache (``sync`` modes): the request is admitted with the tier's tokens loaded in this step; its chunk
  computes what is left (``min(chunk, remaining - hit)``, as vLLM's scheduler counts new tokens after local and
  external hits).
* vLLM's connector: the request does not run this step; it takes its blocks and waits for its load (vLLM's
  ``WAITING_FOR_REMOTE_KVS``), and its chunk leaves the plan. A hit on chunks another load is moving (in flight, or
  earlier in this plan) waits for that load instead, taking no blocks (``KVTiers.defer``).

A tier hit is taken only while its blocks fit beside the rest of the plan, and only for an admission that kept its
whole GPU hit; otherwise the request is admitted as without tiers (it computes those tokens: vLLM would not
schedule it this step, which here could stall a policy that plans it again and again).
"""
from __future__ import annotations


def fit_tier_hits(rep, hits: list, need: int, plan, prefill_new: list, prefill_ctx: list, prefill_tokens: int,
                  admit: list) -> tuple:
    """``plan_check.fit_hits`` with the tiers: returns ``([(request, GPU hit, tier hit or None, is a load)], blocks
    needed, prompt tokens)``; loads leave ``admit``, the plan and the batch lists."""
    kv = rep.kv
    tiers = kv.tiers
    bs = kv.block_size
    for fitted in (False, True):
        taken: dict = {}
        sized, cost = [], 0
        for i, slot, r, hit, n, remaining in hits:
            used, m, c = kv.size_admission(hit, n, remaining, taken, fitted)
            sized.append((i, slot, r, hit, used, m, c, n, remaining))
            cost += c
        if need + cost <= kv.free or fitted:
            break
    admitted = []
    gone_prefills, gone_slots = set(), set()
    planned: list = []  # vLLM: the chunk ranges this plan's loads move (a later hit on them waits)
    for i, slot, r, hit, used, m, c, n, remaining in sized:
        g = len(used)
        th = tiers.lookup(r, g) if g == len(hit) else None
        if th is not None and not tiers.sync:
            th = tiers.defer(r, th, planned)
        if th is not None:
            t = th.blocks
            chunk_blocks = -(-m // bs)
            if tiers.sync:
                m2 = min(n, remaining - (g + t) * bs)
                extra = t + -(-m2 // bs) - chunk_blocks
            else:
                m2 = 0
                extra = t - chunk_blocks
            if need + cost + extra <= kv.free:
                cost += extra
                if not tiers.sync:  # vLLM: a load instead of a chunk (or a wait for others' loads: no blocks)
                    if th.blocks:
                        planned.append(tiers.hit_ranges(r, th))
                    gone_prefills.add(i)
                    gone_slots.add(slot)
                    admit.remove(r)
                    r.mark = -1  # not in this step: a plan after its load, with no step between, may list it
                    admitted.append((r, used, th, True))
                    continue
                m = m2
            else:
                th = None
        plan.prefills[i] = (r, m)
        prefill_new[slot] = m
        prefill_ctx[slot] = (g + (th.blocks if th is not None else 0)) * bs
        prefill_tokens += m
        admitted.append((r, used, th, False))
    if gone_prefills:
        plan.prefills[:] = [p for i, p in enumerate(plan.prefills) if i not in gone_prefills]
        prefill_new[:] = [x for j, x in enumerate(prefill_new) if j not in gone_slots]
        prefill_ctx[:] = [x for j, x in enumerate(prefill_ctx) if j not in gone_slots]
    return admitted, cost, prefill_tokens

"""Exact optimal schedules by exhaustive search (Dijkstra over schedule states): the cross-check of the CSP.

A state is, per request, (S known tokens, m KV held); a batch picks for every unfinished request one action —
stay, evict (m → 0), or process c tokens (1..S−m with ``chunking``, else exactly S−m) — subject to
Σc ≤ C, Σ prefill tokens ≤ P and Σm ≤ M after the batch, at least one request processed; it costs the
batch-time model's time for that batch, the same price the replica charges. Batch costs are positive, so
Dijkstra's first arrival at "all finished" is a minimum-latency schedule with no horizon. Identical requests
are interchangeable, so states are kept with their entries sorted within each group of equal (I, O).

Sizes: with ``chunking`` a request has about (I+O)²/2 states, so this is for tiny instances (I, O ≤ ~6,
3 requests); whole passes only (``chunking=False``) leave 2(O+1) states per request at any I, which solves
the §5.1 family (4 requests, O = 4) exactly within that space in seconds.
"""
from __future__ import annotations

import heapq
import itertools

from ...batchtime.base import Batch, BatchTimeModel
from .schedule import Instance, Schedule

DONE = -1


def solve_exact(instance: Instance, cost: BatchTimeModel, chunking: bool = True,
                max_states: int = 2_000_000) -> tuple[float, Schedule]:
    """(minimum total latency in seconds, a schedule attaining it)."""
    I, O, n = instance.inputs, instance.outputs, instance.n
    C, P, M = instance.batch_tokens, instance.P, instance.kv_slots
    groups = [tuple(k for k in range(n) if (I[k], O[k]) == key) for key in dict.fromkeys(zip(I, O))]

    def canonical(state):
        """(state with entries sorted within each group, perm) where canon[k] = state[perm[k]]."""
        perm = list(range(n))
        for g in groups:
            for k, src in zip(g, sorted(g, key=lambda x: state[x])):
                perm[k] = src
        return tuple(state[perm[k]] for k in range(n)), perm

    start = canonical(tuple((I[k], 0) for k in range(n)))[0]
    best = {start: 0.0}
    parent: dict = {start: None}
    heap = [(0.0, 0, start)]
    tie = itertools.count(1)
    while heap:
        t, _, state = heapq.heappop(heap)
        if t > best.get(state, float("inf")):
            continue
        if all(s == DONE for s, _ in state):
            return t, _path(parent, state)
        for nxt, batch, gone, dt in _moves(state, I, O, C, P, M, chunking, cost):
            nxt_c, perm = canonical(nxt)
            nt = t + dt
            if nt < best.get(nxt_c, float("inf")):
                if len(best) >= max_states:
                    raise ValueError(f"exhaustive search passed {max_states} states: the instance is too large for "
                                     f"brute force (use the CSP, or chunking=False)")
                best[nxt_c] = nt
                parent[nxt_c] = (state, perm, batch, gone)
                heapq.heappush(heap, (nt, next(tie), nxt_c))
    raise ValueError("no schedule finishes every request (check M, C and P)")


def _moves(state, I, O, C, P, M, chunking, cost):
    options = []
    for k, (s, m) in enumerate(state):
        if s == DONE:
            options.append([(None, 0)])
            continue
        todo = s - m
        acts = [(None, 0)]
        if m > 0:
            acts.append(("evict", 0))
        sizes = range(1, todo + 1) if chunking else (todo,)
        acts += [("run", c) for c in sizes if c <= C]
        options.append(acts)
    for combo in itertools.product(*options):
        tokens = sum(c for _, c in combo)
        if tokens == 0 or tokens > C:
            continue
        nxt, prefill_new, prefill_ctx, decode_ctx, kv = [], [], [], [], 0
        batch, gone, prefill = {}, set(), 0
        for k, ((act, c), (s, m)) in enumerate(zip(combo, state)):
            if s == DONE:
                nxt.append((DONE, 0))
                continue
            if act == "evict":
                gone.add(k)
                nxt.append((s, 0))
                continue
            if act == "run":
                batch[k] = c
                if s > I[k] and s - m == 1:
                    decode_ctx.append(m + 1)
                else:
                    prefill_new.append(c)
                    prefill_ctx.append(m)
                    prefill += c
                m += c
                kv += m
                if m == s:
                    s += 1
                    if s == I[k] + O[k]:
                        nxt.append((DONE, 0))
                        continue
                nxt.append((s, m))
                continue
            kv += m
            nxt.append((s, m))
        if prefill > P or kv > M:
            continue
        yield tuple(nxt), batch, gone, cost.step_time(Batch(prefill_new, prefill_ctx, decode_ctx))


def _path(parent, state) -> Schedule:
    """Walk back to the start, then forward, following which request sits in which slot of each canonical state."""
    steps = []
    while parent[state] is not None:
        prev, perm, batch, gone = parent[state]
        steps.append((perm, batch, gone))
        state = prev
    who = list(range(len(state)))  # the start state is its own canonical form
    batches, evictions = [], []
    for perm, batch, gone in reversed(steps):
        batches.append({who[k]: c for k, c in batch.items()})
        evictions.append({who[k] for k in gone})
        who = [who[perm[k]] for k in range(len(who))]
    return Schedule(batches, evictions)

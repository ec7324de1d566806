"""vLLM's data-parallel ranks of a MoE model step together: one event loop for a DP group in lockstep.

With data parallelism vLLM runs one engine (scheduler, KV cache, attention) per DP rank, but a MoE model's expert
layers exchange tokens between the ranks every step (the all-to-all of expert parallelism, or the all-gather of
the DP group without it), so every rank runs a forward in every step: a rank with no work runs a dummy batch
(vllm/v1/engine/core.py ``DPEngineCoreProc``: ``execute_dummy_batch`` while the wave is running), and all ranks
pad their batch to the largest token count among them (gpu_model_runner.py ``coordinate_batch_across_dp``). A
step therefore ends for every rank when it ends for the slowest: here each rank's step lasts the group's longest
step time, a request arriving at an idle rank waits for the step in flight to end, and the group idles only when
every rank does (vLLM's coordinator ends the wave then).

The longest rank's own time stands for the padded time of the others: padding only adds tokens up to the
longest rank's count, whose time already includes them (the others' attention over their own context is not
added to it).
"""
from __future__ import annotations

import heapq
import math
import time

import numpy as np

from ..engine.replica import Replica
from ..metrics.requests import RequestLog
from ..request import Status
from .simulator import DONE, RunResult, finish_run


def in_lockstep(dp: int, expert_parallel: bool, spec) -> bool:
    """Whether vLLM steps the DP ranks together: several ranks of a MoE model (with or without expert
    parallelism; expert parallelism needs a MoE model)."""
    return dp > 1 and (expert_parallel or spec.is_moe)


def simulate_lockstep(source, replicas: list[Replica], router, horizon: float | None = None, seed: int = 0,
                      keep_gaps: bool = True, log: RequestLog | None = None, client_timeout: float | None = None,
                      abort_delay: float = 0.0) -> RunResult:
    """Run ``source`` through the DP ranks ``replicas`` stepping in lockstep (module docstring); the same
    contract as ``simulate`` (every request leaves finished, rejected, aborted by its client's timeout, or
    unfinished at ``horizon``; ``client_timeout`` and ``abort_delay`` as there), ``log`` too (a log of cached
    tokens, or a streamed one)."""
    if len(replicas) < 2:
        raise ValueError("a DP group in lockstep needs at least two ranks")
    for i, rep in enumerate(replicas):
        if rep.index != i:
            raise ValueError(f"replicas[{i}] has index {rep.index}: give the ranks indexed 0..n-1 in order")
        if rep.steps is not replicas[0].steps:
            raise ValueError("all ranks of a DP group must share one StepLog")
        if rep.config.fast_forward:
            raise ValueError("ranks in lockstep step one at a time: build them with fast_forward off")
    if horizon is not None and not horizon > 0:
        raise ValueError(f"horizon must be a positive number of seconds, got {horizon}")
    wall0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    log = RequestLog(keep_gaps) if log is None else log
    heap: list = []
    seq = 0

    def push(reqs):
        nonlocal seq
        for r in reqs:
            heapq.heappush(heap, (r.arrival, seq, r))
            seq += 1

    first = source.initial()
    push(first if isinstance(first, list) else list(first))
    if hasattr(router, "begin"):
        router.begin(replicas)
    left = getattr(router, "left", None)

    def drain(rep: Replica, t: float):
        done = rep.take_completed()
        if done and left is not None:
            left(rep.index, len(done))
        for r in done:
            log.record(r)
            push(source.on_done(r, t))

    held = [[] for _ in replicas] if replicas[0].batch_time.async_admission else None
    # client timeouts: (time, seq, request) when each abort reaches the engine, and those that reached a rank
    # during the group's step (applied at its end, between steps, as vLLM's engine core reads them)
    aborts: list = []
    aborting: list = []
    reason = (f"aborted: no answer {client_timeout:g} s after the client sent it (client timeout)"
              if client_timeout is not None else "")

    def abort(r, t: float) -> None:
        """``r``'s abort reaches the group at ``t``: held for the step in flight, it never joins its rank; on a
        rank, between steps."""
        if held is not None:
            for i, waiting in enumerate(held):
                if r in waiting:
                    waiting.remove(r)
                    r.replica = i
                    r.status, r.reject_reason, r.finish = Status.ABORTED, reason, t
                    replicas[i].completed.append(r)
                    drain(replicas[i], t)
                    return
        if group_end is not None:
            aborting.append(r)
            return
        rep = replicas[r.replica]
        rep.abort(r, reason, t)
        drain(rep, t)

    def admit_held(t: float) -> None:
        """Arrivals held during the group's step join their ranks, queued at its end ``t`` (simulator.py)."""
        for rep in replicas:
            for r in held[rep.index]:
                r.arrival = t
                rep.add(r, t)
            held[rep.index].clear()
            if rep.completed:
                drain(rep, t)

    def start_group(t: float) -> float | None:
        """Every rank asked for a step at ``t``; the group's end, or None when no rank has work."""
        end = None
        for rep in replicas:
            if rep.start_step(t) is not None and (end is None or rep.step_end > end):
                end = rep.step_end
            if rep.completed:
                drain(rep, t)
        if end is not None:
            for rep in replicas:
                if rep.busy:
                    rep.clock.stretched(end)
        return end

    now, group_end, cut = 0.0, None, False
    while True:
        t_arrival = heap[0][0] if heap else math.inf
        while aborts and aborts[0][2].status in DONE:
            heapq.heappop(aborts)  # the abort of a request that left
        t_abort = aborts[0][0] if aborts else math.inf
        if group_end is not None and group_end <= t_arrival and group_end <= t_abort:
            t = group_end
            if horizon is not None and t > horizon:
                cut = True
                break
            now = t
            for rep in replicas:
                if rep.busy:
                    rep.end_step(t)
                    if rep.completed:
                        drain(rep, t)
            group_end = None
            for r in aborting:
                if r.status not in DONE:
                    abort(r, t)
            aborting.clear()
            group_end = start_group(t)
            if held is not None and any(held):
                admit_held(t)
                if group_end is None:
                    group_end = start_group(t)
            continue
        wakes = [w for rep in replicas if (w := getattr(rep, "wake_at", None)) is not None] if group_end is None else []
        t_wake = min(wakes) if wakes else math.inf
        if t_abort < min(t_arrival, t_wake):  # (after the other events of its instant)
            t = t_abort
            if horizon is not None and t > horizon:
                cut = True
                break
            now = t
            abort(heapq.heappop(aborts)[2], t)
            if group_end is None and (heap[0][0] != t if heap else True):
                group_end = start_group(t)  # the freed KV may let a waiting request in
            continue
        if t_arrival == math.inf and t_wake == math.inf:
            break
        t = min(t_arrival, t_wake)
        if horizon is not None and t > horizon:
            cut = True
            break
        now = t
        if t_arrival <= t_wake:
            req = heapq.heappop(heap)[2]
            if client_timeout is not None:
                heapq.heappush(aborts, (max(req.sent + client_timeout + abort_delay, t), seq, req))
                seq += 1
            rep = replicas[router.route(req, replicas, rng)]
            if held is not None and group_end is not None:
                held[rep.index].append(req)
                continue
            rep.add(req, t)
            if rep.completed:
                drain(rep, t)
            if group_end is None and not (heap and heap[0][0] == t):  # a burst forms one batch
                group_end = start_group(t)
        else:
            group_end = start_group(t)
    for rep in replicas if held is not None else ():  # arrivals held at the horizon leave unfinished
        for r in held[rep.index]:
            rep.add(r, r.arrival)
    return finish_run(replicas, log, replicas[0].steps, getattr(log, "streamed", False), horizon if cut else None,
                      now, None, wall0)

"""Offline runs (every request present at t = 0), the setting of Kim et al. §4-§5.

``simulate()`` starts a step as soon as the first of several simultaneous arrivals is queued, so its
first batch would hold one request; an offline engine (and the paper's simulator) sees them all. This
driver queues every request on the replica first and then runs steps back to back, through the same
``Replica`` mechanism and batch-time model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...batchtime.base import BatchTimeModel
from ...engine.replica import Replica, ReplicaConfig
from ...request import Request, Status
from ...schedulers import create_scheduler
from ...schedulers.base import Scheduler


@dataclass
class OfflineResult:
    """Kim et al. §1.7 metrics: total latency (last completion), TPS, mean TTFT/TPOT over requests, evictions."""

    latency: float
    steps: int
    evictions: int
    tps: float
    ttft: float
    tpot: float
    rejected: int
    mean_kv_used: float  # mean over steps of used KV tokens / capacity
    batches: list[dict] = field(default_factory=list, repr=False)  # per step: {request id: (tokens, phase)}


def offline_replica(scheduler: Scheduler | str, batch_time: BatchTimeModel, kv_tokens: int, batch_tokens: int,
                    max_model_len: int | None = None, oracle: bool = False, max_num_seqs: int = 1_000_000,
                    **params) -> Replica:
    """A replica with ``kv_tokens`` KV slots of one token each (block size 1, as the authors simulate)."""
    sched = create_scheduler(scheduler, **params) if isinstance(scheduler, str) else scheduler
    sched.fit_token_budgets(batch_tokens, params)  # as a run does (experiment.new_policy): C caps every budget
    config = ReplicaConfig(num_blocks=kv_tokens, block_size=1, max_num_seqs=max_num_seqs,
                           max_num_batched_tokens=batch_tokens, max_model_len=max_model_len or 1 << 30,
                           oracle=oracle or sched.needs_oracle)
    return Replica(0, sched, batch_time, config)


def run_offline(replica: Replica, requests: list[Request], record: bool = False,
                max_steps: int = 10_000_000) -> OfflineResult:
    """Run ``requests`` (all arriving at t = 0) to completion; every request ends finished or rejected."""
    for r in requests:
        if r.arrival != 0:
            raise ValueError(f"request {r.id} arrives at {r.arrival}: offline runs need every arrival at t = 0")
        replica.add(r, 0.0)
    now, batches, kv = 0.0, [], 0.0
    for _ in range(max_steps):
        duration = replica.start_step(now)
        if duration is None:
            break
        if record:
            plan = replica.plan
            batches.append({**{r.id: (1, "d") for r in plan.decodes},
                            **{r.id: (n, "p") for r, n in plan.prefills},
                            **{r.id: (0, "e") for r in plan.preempt}})
        now += duration
        replica.end_step(now)
        kv += (replica.kv.total - replica.kv.free) / replica.kv.total
    else:
        raise RuntimeError(f"offline run did not finish within {max_steps} steps")
    replica.stop(f"{replica.scheduler.name}: left unscheduled with nothing running")
    done = [r for r in requests if r.status is Status.FINISHED]
    ttft = [r.first_token for r in done]
    tpot = [(r.last_token - r.first_token) / (r.output_len - 1) for r in done if r.output_len > 1]
    latency = max((r.finish for r in done), default=0.0)
    return OfflineResult(
        latency=latency, steps=replica.num_steps, evictions=replica.num_preemptions,
        tps=sum(r.output_len for r in done) / latency if latency > 0 else math.nan,
        ttft=sum(ttft) / len(ttft) if ttft else math.nan, tpot=sum(tpot) / len(tpot) if tpot else math.nan,
        rejected=len(requests) - len(done), mean_kv_used=kv / replica.num_steps if replica.num_steps else 0.0,
        batches=batches)

"""Runs in Ao et al.'s own model: token-granular KV memory M (block size 1), iteration time d0 + d1·KV tokens,
Poisson arrivals per type, and the paper's metrics (decode tokens of completed prompts per second, mean latency,
mean TTFT)."""
from __future__ import annotations

import math

from ...batchtime.base import BatchTimeModel
from ...batchtime.linear import LinearBatchTime
from ...engine.replica import Replica, ReplicaConfig
from ...request import Status
from ...schedulers.registry import create_scheduler
from ...sim.simulator import simulate
from ...workload.arrivals.processes import Poisson
from ...workload.lengths.distributions import LengthDist
from ...workload.workload import OpenLoop, Workload
from .kv_ledger import kv_ledger


def run_model(scheduler: str, lengths: LengthDist, rate: float, memory: int, *, d0: float | None = None,
              d1: float | None = None, batch_time: BatchTimeModel | None = None, duration: float | None = None,
              num_requests: int | None = None, max_num_seqs: int = 1 << 20, max_num_batched_tokens: int = 1 << 30,
              overflow: str = "evict-newest", block_size: int = 1, seed: int = 0, horizon: float | None = None,
              **params) -> dict:
    """One run; returns the paper's metrics plus evictions, peak KV and the run's span."""
    bt = batch_time or LinearBatchTime.from_wait(d0, d1)
    oracle = scheduler == "wait"
    config = ReplicaConfig(num_blocks=max(1, int(memory) // block_size), block_size=block_size,
                           max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                           max_model_len=1 << 30, oracle=oracle, overflow=overflow)
    rep = Replica(0, create_scheduler(scheduler, **params), bt, config)
    wl = Workload(Poisson(rate), lengths, num_requests=num_requests, duration=duration, seed=seed)
    result = simulate(OpenLoop(wl.requests()), [rep], horizon=horizon, seed=seed)
    return paper_metrics(result, rep)


def paper_metrics(result, rep: Replica) -> dict:
    log = result.requests
    status = log.column("status")
    done = status == int(Status.FINISHED)
    arrival = log.column("arrival")
    span = float(result.end_time - arrival.min()) if len(arrival) else math.nan
    decode_tokens = float((log.column("generated")[done] - 1).sum())
    last = float(arrival.max()) if len(arrival) else math.nan
    by_last = done & (log.column("finish") <= last)
    window_tokens = float((log.column("generated")[by_last] - 1).sum())
    return {"finished": int(done.sum()), "offered": int(len(arrival)), "span": span,
            "throughput": decode_tokens / span if span > 0 else math.nan,
            # decode tokens of prompts completed while arrivals last, per second: the steady state, no drain
            "throughput_window": window_tokens / (last - float(arrival.min())) if last > arrival.min() else math.nan,
            "latency": float(log.column("e2e")[done].mean()) if done.any() else math.nan,
            "ttft": float(log.column("ttft")[done].mean()) if done.any() else math.nan,
            "evictions": rep.num_evictions, "preemptions": rep.num_preemptions,
            "steps": rep.num_steps, "kv": kv_ledger(rep.steps, rep.config.block_size, rep.index)}

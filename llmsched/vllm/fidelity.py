"""How well the simulator predicts vLLM: the same workload in both, errors of the headline numbers.

The simulator gets vLLM's limits (KV blocks, block size, max_num_seqs, token budget, context) and the fitted
step-time profile as its batch-time model, so a difference is a difference in timing, not in behaviour.
"""
from __future__ import annotations

import dataclasses
import math

from ..experiment import RunConfig
from ..metrics.summary import summarize

METRICS = [("ttft", "p50"), ("ttft", "p99"), ("tbt", "p50"), ("tbt", "p99"), ("e2e", "p50"), ("e2e", "p99")]


def sim_config(cfg: RunConfig, adapter: dict, profile_file: str) -> RunConfig:
    """``cfg`` for the simulator with the real engine's limits and the fitted profile."""
    return dataclasses.replace(cfg, batch_time="linear", batch_time_params={"file": str(profile_file)},
                               num_blocks=adapter["kv_blocks"], block_size=adapter["block_size"],
                               max_num_seqs=adapter["max_num_seqs"],
                               max_num_batched_tokens=adapter["max_num_batched_tokens"])


def compare(real: dict, sim: dict) -> list[dict]:
    """Rows metric, real, simulated, relative error (sim/real - 1) from two summaries."""
    rows = []
    for metric, q in METRICS:
        rows.append(_row(f"{metric}_{q}", real["latency"][metric][q], sim["latency"][metric][q]))
    rows.append(_row("throughput_rps", real["throughput"]["requests_per_s"], sim["throughput"]["requests_per_s"]))
    rows.append(_row("output_tps", real["throughput"]["output_tokens_per_s"],
                     sim["throughput"]["output_tokens_per_s"]))
    return rows


def _row(name, real, sim):
    err = sim / real - 1 if real and math.isfinite(real) and math.isfinite(sim) else math.nan
    return {"metric": name, "real": real, "simulated": sim, "rel_error": err}


def fidelity_engine(cfg, engine, requests):
    """``fidelity``'s engine: prefix caching as the run asks (on by default, as in the simulation) when a request
    has content, whose prompts then share tokens in both (``vllm/content_ids.py``); otherwise the engine's default,
    off: prompts without identities share nothing in the simulation, and vLLM's cache would only find a request's
    own blocks again after a preemption."""
    if any(r.content is not None for r in requests):
        return dataclasses.replace(engine, prefix_caching=cfg.prefix_caching)
    return engine


def simulate_like(cfg: RunConfig, adapter: dict, profile_file: str, max_model_len: int, requests):
    """Simulate exactly ``requests`` (fresh copies, with their contents: the engine's prefix cache sees the same
    prompts, ``content_ids``) on a replica with the real engine's limits and profile. ``requests`` may be a fresh
    source instead (``vllm.replay_source.ReplaySource``, for sessions): the simulator issues its later turns as
    the real run did, from its own completions."""
    from ..experiment import build_replicas, carries_content
    from ..metrics.requests import RequestLog
    from ..request import Request
    from ..routing.registry import make_router
    from ..sim.simulator import simulate
    from ..warm_caches import warm_caches
    from ..workload.workload import OpenLoop
    scfg = sim_config(cfg, adapter, profile_file)
    scfg.max_model_len = max_model_len
    if isinstance(requests, (list, tuple)):
        source = OpenLoop([Request(r.id, r.arrival, r.prompt_len, r.output_len, r.tier, content=r.content)
                           for r in requests])
    else:
        source = requests
    caching = scfg.prefix_caching and carries_content(scfg)  # as build_replicas decides; then log cached tokens
    replicas = build_replicas(scfg)
    warm_caches(replicas, source, scfg.max_total_tokens)  # (what the real run sent before it: runner.warm_up)
    result = simulate(source, replicas, make_router(scfg.router), seed=cfg.seed,
                      lanes=scfg.lanes, log=RequestLog(cached=True) if caching else None)
    result.meta = {"config": dataclasses.asdict(scfg)}
    return result, summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown)


OVERLOAD_THROUGHPUT = 0.85 # completed below this fraction of the offered rate: the engine did not keep up
OVERLOAD_QUEUE = 2.0       # mean queue (waiting + running) in the last third over the first third


def overload(requests, result) -> str | None:
    """Why the real run was overloaded (the engine fell behind the arrivals), or None.

    Two signs, either suffices: requests completed at under ``OVERLOAD_THROUGHPUT`` of the offered rate (both over
    the arrivals' span), or the queue grew: its mean over the last third of the steps is ``OVERLOAD_QUEUE`` times
    that of the first third and above the sequence cap's worth of work the engine can hold. Errors against such a
    run measure the backlog, not the simulator."""
    arrivals = sorted(r.arrival for r in requests)
    log, steps = result.requests, result.steps
    if len(arrivals) < 4 or not len(steps):
        return None
    span = arrivals[-1] - arrivals[0]
    offered = (len(arrivals) - 1) / span if span > 0 else math.inf
    finish = [f for f in log.column("finish") if math.isfinite(f)]
    done = sum(1 for f in finish if f <= arrivals[-1])
    completed = done / span if span > 0 else math.inf
    why = []
    if completed < OVERLOAD_THROUGHPUT * offered:
        why.append(f"by the last arrival it had completed {completed:.2f} req/s of the {offered:.2f} req/s offered")
    queue = [w + r for w, r in zip(steps.num_waiting, steps.num_running)]
    third = len(queue) // 3
    if third >= 5:
        first, last = sum(queue[:third]) / third, sum(queue[-third:]) / third
        if last > OVERLOAD_QUEUE * max(first, 1.0):
            why.append(f"its queue grew from {first:.1f} to {last:.1f} requests on average")
    return "; ".join(why) or None


def run_cycles(steps) -> dict:
    """The real run's own step cycles (start to next start while requests remained), with their compositions:
    the columns ``LinearBatchTime.fit`` takes. Fitting the simulator's step time to these separates how well it
    schedules and queues (same decisions, the run's timing) from how well a profile measured earlier predicts
    step times on a machine whose load has changed since. Steps that start after the engine sat idle are left
    out: their cold start is the profile's wake slowdown (``batchtime/wake.py``), which the fit keeps."""
    start = list(steps.start)
    busy = [w + r > 0 for w, r in zip(steps.num_waiting, steps.num_running)]
    # a step after one that left the engine empty starts cold: the profile's wake slowdown, not a cycle to fit
    keep = [i for i in range(1, len(start) - 1) if busy[i] and busy[i - 1]]
    cols = {"duration": [start[i + 1] - start[i] for i in keep]}
    for k in ("prefill_tokens", "num_prefills", "num_decodes", "context_sum"):
        col = getattr(steps, k)
        cols[k] = [col[i] for i in keep]
    return cols

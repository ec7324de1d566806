"""``summarize`` for a streamed run (``simulate --stream``): the same keys, from the running totals of a
``RequestStream`` and a ``StepStream`` instead of the rows.

What differs from the in-memory summary: TTFT, TPOT and E2E quantiles come from quantile sketches (1% relative
error; TBT already does in sketch mode), and float sums (means, busy time, KV utilisation, Little's law) are
added chunk by chunk, so their last bits may differ. Counts, integer sums, maxima, the window and every rate
that divides a count are exactly the in-memory figures. A streamed summary covers every request: trimming a
warm-up or cool-down needs rows the stream no longer holds.
"""
from __future__ import annotations

import math

import numpy as np

from .pools import fleet_section, with_cost_per_good
from .offload_summary import offload_summary
from .requests import CACHED_FIELD, prefix_cache_stats
from .request_stream import ABORTED, FINISHED, LATENCIES, REJECTED, UNFINISHED, RequestStream
from .step_stream import StepStream
from .latency_stats import NAN, QUANTILES, TOP_REASONS, merged_sketch, sketch_stats, value_stats
from .policy_stats import summed


def check_stream_window(warmup: float, cooldown: float) -> None:
    if warmup or cooldown:
        raise ValueError(f"a streamed run (--stream) is summarised over every request: warmup={warmup:g}s and "
                         f"cooldown={cooldown:g}s need the request rows it does not keep; drop --stream or "
                         f"set warmup and cooldown to 0")


def summarize_stream(result, warmup: float = 0.0, cooldown: float = 0.0) -> dict:
    check_stream_window(warmup, cooldown)
    log: RequestStream = result.requests
    steps: StepStream = result.steps
    if not (log.closed and steps.closed):
        raise ValueError("summarize: the streamed logs are still open (simulate closes them at the end of a run)")
    n = len(log)
    n_fin = log.status[FINISHED]
    if n:
        lo, hi = log.arrival_min + 0.0, log.arrival_max - 0.0
        s0, s1 = log.arrival_min, log.span_end(result.end_time)
    else:
        lo = hi = s0 = s1 = NAN
    span = s1 - s0 if n else NAN
    per_s = (lambda x: x / span) if span > 0 else (lambda x: NAN)
    if n and steps.start_min < s0:
        raise RuntimeError(f"a step started at {steps.start_min} before the first arrival {s0}")
    out: dict = {
        "window": {"warmup": 0.0, "cooldown": 0.0, "arrival_from": lo, "arrival_to": hi, "start": s0, "end": s1,
                   "span": span, "requests_total": n, "requests_trimmed": 0},
        "counts": {"offered": n, "finished": n_fin, "rejected": log.status[REJECTED],
                   "unfinished": log.status[UNFINISHED],
                   "reasons": [{"reason": k, "count": c, "example": log.reason_example[k]}
                               for k, c in log.reason_counts.most_common(TOP_REASONS)]},
    }
    aborted = log.status[ABORTED]
    if aborted:  # client timeouts (--client-timeout): misses, as in summarize
        out["counts"]["aborted"] = aborted
    latency = {m: _latency(log.latency[m]) for m in LATENCIES}
    out["latency"] = {"ttft": latency["ttft"], "tbt": {**sketch_stats(merged_sketch(log)), "source": "sketch"},
                      "tpot": latency["tpot"], "e2e": latency["e2e"]}
    out["throughput"] = {"requests_per_s": per_s(n_fin), "output_tokens_per_s": per_s(float(log.generated)),
                         "input_tokens_per_s": per_s(float(log.prompt)), "span": span}
    out["goodput"] = {"requests_per_s": per_s(log.good), "good_requests": log.good,
                      "fraction": log.good / n if n else NAN}
    out["tiers"] = _tiers(log)
    out["preemptions"] = {"total": log.preemptions,
                          "per_finished_request": log.preemptions_finished / n_fin if n_fin else NAN,
                          "requests_preempted": log.preempted}
    if CACHED_FIELD in log.cols:
        out["prefix_cache"] = prefix_cache_stats(log.cached, log.prompt)
    offload = [row["kv_offload"] for row in result.replica_stats if "kv_offload" in row]
    if offload:
        out["kv_offload"] = offload_summary(offload, log.cached_by_tier, log.prompt)
    out["steps"] = _step_stats(steps, s0, s1, max(len(result.replica_stats), 1))
    out["littles_law"] = _littles_law(log, steps, n, s0, s1, result.end_time)
    out["run"] = {"end_time": float(result.end_time), "wall_time": float(result.wall_time), "keep_gaps": False,
                  "tiers": list(log.tiers), "streamed": True}
    policy = [row["policy"] for row in result.replica_stats if row.get("policy")]
    if policy:
        out["policy"] = summed(policy)
    if getattr(result, "timeline", None) is not None:
        out["timeline"] = result.timeline  # the run's load over time (experiment.offered_timeline)
    if getattr(result, "fleet", None) is not None:
        out["fleet"] = fleet_section(result.fleet, log.pool_counts)
        with_cost_per_good(out)
    return out


def _latency(lat) -> dict:
    if not lat.count:
        return {**value_stats(np.empty(0)), "source": "sketch"}
    return {"count": lat.count, "mean": lat.total / lat.count,
            **{f"p{q}": float(lat.sketch.quantile(q / 100)) for q in QUANTILES}, "max": lat.max, "source": "sketch"}


def _tiers(log: RequestStream) -> dict:
    out = {}
    for name, t in zip(log.tiers, log.tier_totals):
        n = t.offered
        targets = {m: (t.target_max[m] if t.with_target[m] else None) for m in ("ttft", "tbt", "tpot")}
        attain = {m: (t.meets[m] / n if t.with_target[m] and n else NAN) for m in ("ttft", "tbt", "tpot")}
        attain["all"] = t.good / n if n else NAN
        sk = log.sketches.get(name)
        p99 = float(sk.quantile(0.99)) if sk is not None and sk.count else NAN
        target = targets["tbt"]
        out[name] = {"offered": n, "finished": t.finished, "good": t.good, "targets": targets, "attainment": attain,
                     "tbt_p99": p99, "tbt_p99_ok": None if target is None or math.isnan(p99) else bool(p99 <= target)}
    return out


def _step_stats(steps: StepStream, s0: float, s1: float, num_replicas: int) -> dict:
    n = steps.count
    if not n:
        return {"count": 0, "mean_duration": NAN, "mean_batch_tokens": NAN, "mean_prefill_tokens": NAN,
                "mean_prefills": NAN, "mean_decodes": NAN, "kv_util_mean": NAN, "kv_util_max": NAN,
                "busy_fraction": NAN}
    total = steps.total_duration
    return {"count": n, "mean_duration": total / n, "mean_batch_tokens": steps.batch_tokens / n,
            "mean_prefill_tokens": steps.prefill_tokens_sum / n, "mean_prefills": steps.prefills / n,
            "mean_decodes": steps.decodes / n,
            "kv_util_mean": steps.util_weighted / total if total > 0 else steps.util_sum / n,
            "kv_util_max": steps.util_max,
            "busy_fraction": steps.busy / ((s1 - s0) * num_replicas) if s1 > s0 else NAN}


def _littles_law(log: RequestStream, steps: StepStream, n: int, s0: float, s1: float, end_time: float) -> dict:
    span = s1 - s0
    if not (span > 0):
        return {"span": span, "arrival_rate": NAN, "mean_sojourn": NAN, "lambda_w": NAN,
                "mean_in_system": NAN, "mean_in_system_steps": NAN}
    lam = n / span
    sojourn = log.sojourn_known + sum(end_time - a for a in log.unended_arrivals)
    w = sojourn / n
    return {"span": span, "arrival_rate": lam, "mean_sojourn": w, "lambda_w": lam * w,
            "mean_in_system": sojourn / span, "mean_in_system_steps": steps.in_system / span}

"""One run's numbers: latency distributions, throughput, goodput, SLO attainment, step and Little's-law checks.

Conventions (all times in seconds):

* **Measurement window.** ``warmup`` and ``cooldown`` trim requests by *arrival time*: a request is measured
  when ``first_arrival + warmup <= arrival <= last_arrival - cooldown``, where first/last arrival are over every
  request of the run. Trimmed requests still occupy the engine (they shape the window's latencies) but are not
  counted. The window's **span** runs from the first measured arrival to the last finish (or rejection, or
  horizon stop) of a measured request (in a client-boundary run a finished request's end is when its last token
  reached the client, send + E2E, as ``vllm bench serve``'s duration ends); throughput, goodput and the
  Little's-law rates divide by it, and the step statistics use the steps that start inside it.
* **Quantiles** are numpy's default (linear interpolation between order statistics, ``np.percentile``). In sketch
  mode TBT quantiles come from the per-tier ``QuantileSketch`` (about 1% relative error) and cover *every* gap of
  the run: a sketch cannot be trimmed to the window.
* **Latencies**: ``ttft``, ``tpot`` and ``e2e`` are over finished measured requests. ``tbt`` is over every
  inter-token gap of the measured requests, whatever their status (a stalled, unfinished request's gaps are
  what its user saw). ``tpot`` is undefined (skipped) for one-token outputs.
* **SLO attainment** is per tier, over the tier's measured (offered) requests. A request meets a metric's
  target when it finished and its value is within the target; TBT uses the tolerance rule of SLAI (Bari et al.,
  Bari et al.): at most ``TBT_MISS_TOLERANCE`` (1%) of its gaps above the target. A metric without a target is met
  by every finished request; its attainment is reported as NaN (no target) per metric, and "all" needs every
  target the request has. A rejected or unfinished request violates every target (as Lyu et al.,
  counts it).
* **Goodput** = measured requests that met every target they have, per second of span.
* Empty results give NaN for every statistic, never an exception. A section that cannot be computed at all is
  written as ``{"available": false, "reason": ...}`` (and warned about): a finished run's summary is always
  written, never lost to an error raised after the run.
"""
from __future__ import annotations

import math
import re
import warnings
from collections import Counter

import numpy as np

from ..request import Status
from .fairness import INPUT_WEIGHT, OUTPUT_WEIGHT, SERIES_BINS, backlogged, inside, intersect, jain, service_events
from .offload_summary import offload_summary
from .requests import CACHED_FIELD, CLIENT_FIELDS, RequestLog, prefix_cache_stats, tier_columns
from .slo_met import meets
from .latency_stats import NAN, QUANTILES, TOP_REASONS, merged_sketch, sketch_stats, value_stats
from .policy_stats import summed
from .pools import fleet_section, with_cost_per_good, pool_counts

LATENCY_METRICS = ("ttft", "tbt", "tpot", "e2e")


def summarize(result, warmup: float = 0.0, cooldown: float = 0.0) -> dict:
    """A JSON-ready nested dict of the run's metrics over the measurement window (see module docstring).

    Keys: window, counts, latency (ttft, tbt, tpot, e2e), throughput, goodput, tiers, preemptions, steps,
    littles_law, run; with tenants also tenants and fairness (``fairness.py``), and policy when the run's policy
    reports its own figures (``Scheduler.stats``, summed over the replicas: its preemptions and the work they threw
    away). Values
    are Python floats/ints/strings (NaN where undefined).
    """
    for name, v in (("warmup", warmup), ("cooldown", cooldown)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"summarize: {name} must be a finite number of seconds >= 0, got {v!r}")
    if getattr(result.requests, "streamed", False):
        from .stream_summary import summarize_stream
        return with_length_cap(summarize_stream(result, warmup, cooldown), result)
    log: RequestLog = result.requests
    arrival = log.column("arrival")
    n_total = len(arrival)
    trimmed = ""
    if n_total:
        lo, hi = float(arrival.min()) + warmup, float(arrival.max()) - cooldown
        win = (arrival >= lo) & (arrival <= hi)
        if not win.any():  # known only after the run: the summary says so, with every figure NaN
            trimmed = (f"warmup={warmup:g}s and cooldown={cooldown:g}s trim every request (arrivals span "
                       f"{float(arrival.max() - arrival.min()):g}s); use a shorter warm-up or cool-down")
            warnings.warn(f"summary: {trimmed}", stacklevel=2)
    else:
        lo = hi = NAN
        win = np.zeros(0, dtype=bool)

    status = log.column("status")
    finished = win & (status == int(Status.FINISHED))
    rejected = win & (status == int(Status.REJECTED))
    unfinished = win & (status == int(Status.UNFINISHED))
    aborted = win & (status == int(Status.ABORTED))
    n_win, n_fin = int(win.sum()), int(finished.sum())

    end = left_at(log, result.end_time)
    if n_win:
        s0 = float(arrival[win].min())
        s1 = float(end[win].max())
    else:
        s0 = s1 = NAN
    span = s1 - s0 if n_win else NAN
    per_s = (lambda x: x / span) if span > 0 else (lambda x: NAN)

    out: dict = {
        "window": {"warmup": float(warmup), "cooldown": float(cooldown), "arrival_from": lo, "arrival_to": hi,
                   "start": s0, "end": s1, "span": span, "requests_total": n_total,
                   "requests_trimmed": n_total - n_win},
        "counts": {"offered": n_win, "finished": n_fin, "rejected": int(rejected.sum()),
                   "unfinished": int(unfinished.sum()), "reasons": top_reasons(log, win & ~finished)},
    }
    if aborted.any():  # client timeouts (--client-timeout): misses, as rejected and unfinished requests are
        out["counts"]["aborted"] = int(aborted.sum())
    if trimmed:
        out["window"].update(available=False, reason=trimmed)
    out["latency"] = available("latency", lambda: {
        "ttft": value_stats(log.column("ttft")[finished]), "tbt": _tbt_stats(log, win),
        "tpot": value_stats(log.column("tpot")[finished]), "e2e": value_stats(log.column("e2e")[finished])})
    if CLIENT_FIELDS[0] in log.cols:  # measured at the client: the engine's own figures beside them
        out["engine_latency"] = available("engine_latency", lambda: {
            m: value_stats(log.column(f"engine_{m}")[finished]) for m in ("ttft", "tpot", "e2e")})

    prompt, generated = log.column("prompt_len"), log.column("generated")
    out["throughput"] = available("throughput", lambda: {
        "requests_per_s": per_s(n_fin), "output_tokens_per_s": per_s(float(generated[finished].sum())),
        "input_tokens_per_s": per_s(float(prompt[finished].sum())), "span": span})

    meets = _meets(log, finished)
    good = int((meets["all"] & win).sum())
    out["goodput"] = {"requests_per_s": per_s(good), "good_requests": good,
                      "fraction": good / n_win if n_win else NAN}
    out["tiers"] = available("tiers", lambda: _tiers(log, win, finished, meets, out["latency"]["tbt"]))

    pre = log.column("preemptions")
    out["preemptions"] = {"total": int(pre[win].sum()),
                          "per_finished_request": float(pre[finished].mean()) if n_fin else NAN,
                          "requests_preempted": int((pre[win] > 0).sum())}
    if CACHED_FIELD in log.cols:
        out["prefix_cache"] = available("prefix_cache", lambda: prefix_cache_stats(
            int(log.column(CACHED_FIELD)[finished].sum()), int(prompt[finished].sum())))
    offload = [row["kv_offload"] for row in result.replica_stats if "kv_offload" in row]
    if offload:
        out["kv_offload"] = available("kv_offload", lambda: offload_summary(
            offload, {name: int(log.column(name)[finished].sum()) for name in tier_columns(log.tier_names)},
            int(prompt[finished].sum())))
    out["steps"] = available("steps", lambda: _step_stats(result.steps, s0, s1, max(len(result.replica_stats), 1)))
    out["littles_law"] = available("littles_law", lambda: _littles_law(arrival, end, win, result.steps, s0, s1))
    out["run"] = {"end_time": float(result.end_time), "wall_time": float(result.wall_time),
                  "keep_gaps": bool(log.keep_gaps), "tiers": list(log.tiers)}
    if CLIENT_FIELDS[0] in log.cols:
        out["run"]["latency_boundary"] = "client"
    if log.tenants:
        both = available("tenants and fairness", lambda: _tenants(log, win, finished, meets, end, s0, s1))
        out["tenants"], out["fairness"] = (both, both) if isinstance(both, dict) else both
    policy = [row["policy"] for row in result.replica_stats if row.get("policy")]
    if policy:
        out["policy"] = available("policy", lambda: summed(policy))
    if getattr(result, "timeline", None) is not None:
        out["timeline"] = result.timeline  # the run's load over time (experiment.offered_timeline)
    if getattr(result, "fleet", None) is not None:  # a fleet run: its pools (every request, not the window's)
        out["fleet"] = available("fleet", lambda: fleet_section(result.fleet, pool_counts(
            log.pools, log.column("replica"), status)))
        with_cost_per_good(out)
    return with_length_cap(out, result)


def with_length_cap(out: dict, result) -> dict:
    """``out`` with the run's ``max_total_tokens`` section (its limit, the requests drawn through it, how many it
    clipped: ``experiment.run`` puts it in the run's meta), when the run had one."""
    cap = getattr(result, "meta", {}).get("max_total_tokens")
    if cap is not None:
        out["max_total_tokens"] = dict(cap)
    return out


def available(name: str, compute):
    """``compute()``; where it cannot be computed, ``{"available": False, "reason": ...}`` and a warning: a finished
    run's summary is always written, the figure it could not compute marked as such, never raised after the run."""
    try:
        return compute()
    except Exception as e:  # noqa: BLE001 - whatever broke one figure, the run's other figures stand
        reason = (f"{type(e).__name__}: {e}".splitlines() or [type(e).__name__])[0]
        warnings.warn(f"summary: {name} not available ({reason})", stacklevel=2)
        return {"available": False, "reason": reason}


def _finite_or(x: np.ndarray, fill: float) -> np.ndarray:
    return np.where(np.isfinite(x), x, fill)


def left_at(log: RequestLog, end_time: float) -> np.ndarray:
    """When each request left the run: its finish, rejection or abort, the horizon stop, else the run's end. In a
    client-boundary run a finished request leaves when its last token reaches the client, send + E2E: the span
    then ends where ``vllm bench serve``'s benchmark duration does (its last response received), not at the
    engine's last finish, which comes one output delay sooner."""
    end = _finite_or(log.column("finish"), end_time)
    if CLIENT_FIELDS[0] not in log.cols:
        return end
    e2e = log.column("e2e")
    return np.where(np.isfinite(e2e), log.column("arrival") + e2e, end)


def _tbt_stats(log: RequestLog, win: np.ndarray) -> dict:
    if log.keep_gaps:
        gaps = log.gaps_of(None).copy() if win.all() else log.gaps_of(win)  # a copy: value_stats reorders it
        return {**value_stats(gaps, scratch=True), "source": "gaps"}
    return {**sketch_stats(merged_sketch(log)), "source": "sketch"}


def _meets(log: RequestLog, finished: np.ndarray) -> dict[str, np.ndarray]:
    """Per request: did it finish and meet each target (a missing target is met)?"""
    return meets(log.column, finished)


def _tiers(log: RequestLog, win, finished, meets, tbt: dict) -> dict:
    """Per tier; ``tbt``: the window's TBT statistics, whose p99 is a tier's own when the tier is the whole
    window (one tier: the run's millions of gaps are not selected and partitioned a second time)."""
    tier = log.column("tier")
    n_win = int(win.sum())
    out = {}
    for i, name in enumerate(log.tiers):
        sel = win & (tier == i)
        n = int(sel.sum())
        targets = {}
        attain = {}
        for m in ("ttft", "tbt", "tpot"):
            t = log.column(f"{m}_slo")[sel]
            t = t[np.isfinite(t)]
            targets[m] = float(t.max()) if len(t) else None
            attain[m] = float(meets[m][sel].mean()) if len(t) and n else NAN
        attain["all"] = float(meets["all"][sel].mean()) if n else NAN
        if log.keep_gaps and n == n_win and tbt["count"] == int(log.column("num_gaps")[sel].sum()):
            p99 = tbt["p99"]  # the same gaps, every one finite: np.percentile's same interpolation
        elif log.keep_gaps:
            gaps = log.gaps_of(sel)
            p99 = float(np.percentile(gaps, 99, overwrite_input=True)) if len(gaps) else NAN
        else:
            sk = log.sketches.get(name)
            p99 = float(sk.quantile(0.99)) if sk is not None and sk.count else NAN
        target = targets["tbt"]
        out[name] = {"offered": n, "finished": int((sel & finished).sum()), "good": int((sel & meets["all"]).sum()),
                     "targets": targets, "attainment": attain, "tbt_p99": p99,
                     "tbt_p99_ok": None if target is None or math.isnan(p99) else bool(p99 <= target)}
    return out


def _tenants(log: RequestLog, win, finished, meets, end, s0: float, s1: float) -> tuple[dict, dict]:
    """Per tenant: counts, latencies, tokens and weighted service (``fairness.py``), SLO attainment; and the
    fairness of the service: Jain's index over the window and over the periods every tenant was backlogged, and
    each tenant's service in ``SERIES_BINS`` equal bins of the window."""
    tenant = log.column("tenant")
    status = log.column("status")
    prompt, generated, first = log.column("prompt_len"), log.column("generated"), log.column("first_token")
    span = s1 - s0
    per_s = (lambda x: x / span) if span > 0 else (lambda x: NAN)
    out, events, periods = {}, {}, []
    for i, name in enumerate(log.tenants):
        sel = win & (tenant == i)
        done = sel & finished
        n = int(sel.sum())
        info = log.tenant_info[name]
        gaps = log.gaps_of(sel) if log.keep_gaps else None
        times, amounts = service_events(prompt[sel], generated[sel], first[sel], gaps, log.column("num_gaps")[sel])
        events[name] = (times, amounts)
        periods.append(backlogged(log.column("arrival")[sel], log.column("first_scheduled")[sel], end[sel]))
        served = np.isfinite(first) & sel
        service = float(amounts.sum())
        out[name] = {"weight": info["weight"], "priority": info["priority"], "offered": n,
                     "finished": int(done.sum()), "rejected": int((sel & (status == int(Status.REJECTED))).sum()),
                     "unfinished": int((sel & (status == int(Status.UNFINISHED))).sum()),
                     "latency": {"ttft": value_stats(log.column("ttft")[done]),
                                 "tbt": ({**value_stats(gaps.copy(), scratch=True), "source": "gaps"} if gaps is not None
                                         else {**value_stats(np.empty(0)), "source": "none (sketch mode)"}),
                                 "tpot": value_stats(log.column("tpot")[done]), "e2e": value_stats(log.column("e2e")[done])},
                     "input_tokens": int(prompt[served].sum()), "output_tokens": int(generated[sel].sum()),
                     "service": service, "service_per_s": per_s(service),
                     "weighted_service": service / info["weight"],
                     "throughput": {"requests_per_s": per_s(int(done.sum())),
                                    "output_tokens_per_s": per_s(float(generated[done].sum()))},
                     "attainment": float(meets["all"][sel].mean()) if n else NAN,
                     "backlogged_s": float((periods[-1][:, 1] - periods[-1][:, 0]).sum())}
    both = periods[0]
    for p in periods[1:]:
        both = intersect(both, p)
    weights = [log.tenant_info[name]["weight"] for name in log.tenants]
    during = [float(a[inside(t, both)].sum()) for t, a in events.values()]
    edges = np.linspace(s0, s1, SERIES_BINS + 1) if span > 0 else np.zeros(0)
    # a token time rebuilt from the gaps may land a rounding error past the window's end: clipped into it
    series = {name: (np.histogram(np.clip(t, s0, s1), bins=edges, weights=a)[0].tolist() if len(edges) else [])
              for name, (t, a) in events.items()}
    fairness = {
        "service_weights": {"input": INPUT_WEIGHT, "output": OUTPUT_WEIGHT},
        "jain": jain([out[name]["weighted_service"] for name in log.tenants]),
        "all_backlogged_s": float((both[:, 1] - both[:, 0]).sum()),
        "service_while_all_backlogged": dict(zip(log.tenants, during)),
        "jain_while_all_backlogged": jain([x / w for x, w in zip(during, weights)]),
        "service_over_time": {"start": s0, "bin_s": span / SERIES_BINS if span > 0 else NAN,
                              "exact_times": bool(log.keep_gaps), "service": series},
    }
    return out, fairness


def top_reasons(log: RequestLog, sel: np.ndarray) -> list[dict]:
    """The most frequent reasons among ``sel`` requests, numbers folded to N so alike reasons group."""
    counts: Counter = Counter()
    example: dict[str, str] = {}
    for rid in log.column("id")[sel].tolist():
        reason = log.reasons.get(rid, "(no reason given)")
        key = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", reason)
        counts[key] += 1
        example.setdefault(key, reason)
    return [{"reason": k, "count": n, "example": example[k]} for k, n in counts.most_common(TOP_REASONS)]


def _step_stats(steps, s0: float, s1: float, num_replicas: int) -> dict:
    start = steps.column("start")
    sel = (start >= s0) & (start <= s1) if len(start) and math.isfinite(s0) else np.zeros(len(start), bool)
    n = int(sel.sum())
    if not n:
        return {"count": 0, "mean_duration": NAN, "mean_batch_tokens": NAN, "mean_prefill_tokens": NAN,
                "mean_prefills": NAN, "mean_decodes": NAN, "kv_util_mean": NAN, "kv_util_max": NAN,
                "busy_fraction": NAN}

    def col(name):
        return steps.column(name)[sel]

    dur = col("duration")
    prefill, decodes = col("prefill_tokens"), col("num_decodes")
    util = col("kv_used_blocks") / np.maximum(col("kv_total_blocks"), 1)
    total = float(dur.sum())
    busy = float((np.minimum(col("start") + dur, s1) - col("start")).sum())
    return {"count": n, "mean_duration": float(dur.mean()),
            "mean_batch_tokens": float((prefill + decodes).mean()),
            "mean_prefill_tokens": float(prefill.mean()), "mean_prefills": float(col("num_prefills").mean()),
            "mean_decodes": float(decodes.mean()),
            "kv_util_mean": float((util * dur).sum() / total) if total > 0 else float(util.mean()),
            "kv_util_max": float(util.max()),
            "busy_fraction": busy / ((s1 - s0) * num_replicas) if s1 > s0 else NAN}


def _littles_law(arrival, end, win, steps, s0: float, s1: float) -> dict:
    """L measured two ways over the span, and λ·W from the measured requests.

    ``mean_in_system``: time average of N(t), the requests of the whole run between arrival and leaving,
    from the arrival/departure timeline. With no trimming it equals λ·W exactly; trimming leaves edge effects.
    ``mean_in_system_steps``: from the engine's own count at each step end (waiting + running, summed over
    replicas, held until that replica's next step end). It sees an arrival only at the end of the step in
    which it came, so it reads about λ × half a step low.
    """
    span = s1 - s0
    if not (span > 0):
        return {"span": span, "arrival_rate": NAN, "mean_sojourn": NAN, "lambda_w": NAN,
                "mean_in_system": NAN, "mean_in_system_steps": NAN}
    lam = float(win.sum()) / span
    w = float((end[win] - arrival[win]).mean())
    overlap = np.clip(np.minimum(end, s1) - np.maximum(arrival, s0), 0.0, None)
    return {"span": span, "arrival_rate": lam, "mean_sojourn": w, "lambda_w": lam * w,
            "mean_in_system": float(overlap.sum()) / span,
            "mean_in_system_steps": _steps_in_system(steps, s0, s1) / span}


def _steps_in_system(steps, s0: float, s1: float) -> float:
    """∫ over [s0, s1] of Σ_replicas (waiting + running at that replica's last step end)."""
    if not len(steps):
        return 0.0
    rep = steps.column("replica")
    t_end = steps.column("start") + steps.column("duration")
    n = steps.column("num_waiting") + steps.column("num_running")
    total = 0.0
    for r in np.unique(rep):
        m = rep == r
        t, v = t_end[m], n[m]
        order = np.argsort(t, kind="stable")
        t, v = t[order], v[order]
        nxt = np.r_[t[1:], max(s1, t[-1])]
        total += float((v * np.clip(np.minimum(nxt, s1) - np.maximum(t, s0), 0.0, None)).sum())
    return total


def summary_row(summary: dict, **labels) -> dict:
    """One flat row for tables and sweeps: ``labels`` first, then the headline numbers.

    Keys: offered, finished, rejected, unfinished (and aborted, where a client timeout ended some),
    {ttft,tbt,tpot,e2e}_{mean,p50,p90,p99,max} (seconds),
    throughput_rps and goodput_rps (requests/s), output_tps, input_tps (tokens/s), slo_attainment (fraction good),
    preemptions, kv_util_mean, and per tier ``attain_<tier>`` and ``tbt_p99_<tier>``; with tenants, per tenant
    ``ttft_p50_<tenant>``, ``ttft_p99_<tenant>`` and ``service_<tenant>``, and ``jain`` and ``jain_backlogged``.
    """
    row = dict(labels)
    c = summary["counts"]
    row.update({k: c[k] for k in ("offered", "finished", "rejected", "unfinished")})
    if c.get("aborted"):  # client timeouts (only where some were aborted: other runs' rows stay as they were)
        row["aborted"] = c["aborted"]
    for m in LATENCY_METRICS:
        for k in ("mean", *(f"p{q}" for q in QUANTILES), "max"):
            row[f"{m}_{k}"] = figure(summary, "latency", m, k)
    row["throughput_rps"] = figure(summary, "throughput", "requests_per_s")
    row["goodput_rps"] = summary["goodput"]["requests_per_s"]
    row["output_tps"] = figure(summary, "throughput", "output_tokens_per_s")
    row["input_tps"] = figure(summary, "throughput", "input_tokens_per_s")
    row["slo_attainment"] = summary["goodput"]["fraction"]
    row["preemptions"] = summary["preemptions"]["total"]
    row["kv_util_mean"] = figure(summary, "steps", "kv_util_mean")
    for name, t in sections(summary, "tiers"):
        row[f"attain_{name}"] = t["attainment"]["all"]
        row[f"tbt_p99_{name}"] = t["tbt_p99"]
    for name, t in sections(summary, "tenants"):
        row[f"ttft_p50_{name}"] = t["latency"]["ttft"]["p50"]
        row[f"ttft_p99_{name}"] = t["latency"]["ttft"]["p99"]
        row[f"service_{name}"] = t["service"]
    if "fairness" in summary:
        row["jain"] = figure(summary, "fairness", "jain")
        row["jain_backlogged"] = figure(summary, "fairness", "jain_while_all_backlogged")
    return row


def figure(summary: dict, *keys) -> float:
    """``summary[k1][k2]...``, NaN where a section was not available (``available``)."""
    value = summary
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return NAN
        value = value[key]
    return value


def sections(summary: dict, key: str) -> list:
    """The (name, section) items of ``summary[key]`` (tiers, tenants); none where it was not available."""
    part = summary.get(key, {})
    return [] if part.get("available") is False else list(part.items())

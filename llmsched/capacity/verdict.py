"""One run's verdict: every request arriving inside the measurement window counts, and leaving work undone
can only hurt.

* The window is arrivals in [first + warmup, last - cooldown] (each 10% of the arrival span by default); the
  run stops at the last arrival, or 60 s after the window if that is later (``probe.GRACE_S``), so every measured
  request had at least the cool-down, and at least 60 s, to finish.
* A measured request that did not finish (unfinished at the stop, or rejected) is a miss: its TTFT, TPOT and
  E2E are +inf in every percentile and mean, it adds one +inf gap to TBT (the gap its user is still waiting
  in), and it meets no tier target. Percentiles are numpy's linear ones, with any interpolation that touches
  +inf giving +inf.
* An unstable run (``stability.trend``: backlogged or overloaded) never meets its SLOs, whatever its
  percentiles say. Its stability is judged on the work it can serve: requests rejected as never servable (longer
  than the context or the whole KV cache) are left out of it, since their backlog grows alike at every rate;
  their own growth is the floor's (``floor``), which stops a search when it is material at every rate.
"""
from __future__ import annotations

import math

import numpy as np

from ..metrics.rejections import never_served
from ..metrics.requests import TBT_MISS_TOLERANCE
from ..metrics.summary import top_reasons
from ..request import Status
from .slo import LATENCIES, SLO, STATS
from .stability import trend

WINDOW_FRACTION = 0.1  # default warm-up and cool-down: 10% of the arrival span each
INF = math.inf


def percentile(values: np.ndarray, q: float) -> float:
    """numpy's linear percentile, +inf where the interpolation touches +inf, NaN for no values."""
    v = np.sort(values)
    if not len(v):
        return math.nan
    pos = q / 100 * (len(v) - 1)
    lo, hi = int(math.floor(pos)), int(math.ceil(pos))
    if math.isinf(v[hi]) or math.isinf(v[lo]):
        return INF
    return float(v[lo] + (v[hi] - v[lo]) * (pos - lo))


def stats(values: np.ndarray) -> dict:
    out = {"mean": float(values.mean()) if len(values) else math.nan, "max": float(values.max()) if len(values)
           else math.nan}
    for s in STATS:
        if s.startswith("p"):
            out[s] = percentile(values, float(s[1:]))
    return {s: out[s] for s in STATS}


def window(arrival: np.ndarray, warmup: float, cooldown: float) -> tuple[float, float]:
    """Measured arrivals: [first + warmup, last - cooldown]; 0 means the default 10% of the span each."""
    first, last = float(arrival.min()), float(arrival.max())
    span = last - first
    lo = first + (warmup if warmup > 0 else WINDOW_FRACTION * span)
    hi = last - (cooldown if cooldown > 0 else WINDOW_FRACTION * span)
    if not hi > lo:
        raise ValueError(f"capacity: warm-up and cool-down leave no measurement window (arrivals span "
                         f"{span:g} s); offer more requests or a longer --duration")
    return lo, hi


def measure(result, warmup: float = 0.0, cooldown: float = 0.0) -> dict:
    """The probe record of one run: window, counts, stability, every latency stat and attainment, throughput."""
    log = result.requests
    if not log.keep_gaps:
        raise ValueError("capacity needs every inter-token gap (TBT percentiles count unfinished requests as "
                         "+inf); run without --sketch")
    arrival = log.column("arrival")
    if not len(arrival):
        raise ValueError("capacity: the run had no requests")
    lo, hi = window(arrival, warmup, cooldown)
    status = log.column("status")
    done = status == int(Status.FINISHED)
    win = (arrival >= lo) & (arrival <= hi)
    miss = win & ~done
    work = (log.column("prompt_len") + log.column("output_len")).astype(np.float64)
    leave = np.where(done, log.column("finish"), INF)
    never = never_served_mask(log, status)
    # the probe's own stability is its servable work's: the never-served requests' backlog grows alike at every
    # rate (their floor judges it, below), and counted here it would pass for load at rates that have none
    stability = trend(arrival, leave, work if never is None else np.where(never, 0.0, work), lo, hi,
                      log.column("first_scheduled"))
    finish = log.column("finish")
    served_in_window = done & (finish >= lo) & (finish <= hi)

    metrics: dict = {}
    tier_col = log.column("tier")
    tiers = [None] + list(log.tiers)
    meets = _meets(log, done)
    for i, tier in enumerate(tiers):
        sel = win if tier is None else win & (tier_col == i - 1)
        prefix = "" if tier is None else f"{tier}."
        for m in LATENCIES:
            for s, v in stats(_latency(log, m, sel, done)).items():
                metrics[f"{prefix}{m}_{s}"] = v
        n = int(sel.sum())
        metrics[f"{prefix}attainment"] = float(meets[sel].mean()) if n else math.nan
    rejected = miss & (status == int(Status.REJECTED))
    counts = {"measured": int(win.sum()), "finished": int((win & done).sum()),
              "unfinished": int((miss & (status == int(Status.UNFINISHED))).sum()), "rejected": int(rejected.sum()),
              "aborted": int((miss & (status == int(Status.ABORTED))).sum())}
    record = {
        "window": {"start": lo, "end": hi, "stop": float(result.end_time)},
        "counts": counts,
        "stability": stability,
        "throughput": {"requests_per_s": float(served_in_window.sum()) / (hi - lo),
                       "output_tokens_per_s": float(log.column("output_len")[served_in_window].sum()) / (hi - lo),
                       "offered_requests_per_s": float(win.sum()) / (hi - lo)},
        "metrics": metrics,
    }
    if counts["rejected"]:  # why, for a search that finds no rate (rate_search.py)
        counts["reasons"] = top_reasons(log, rejected)
    if never is not None:
        counts["never_served"] = int((never & win).sum())
        record["floor"] = floor(log, never, win, work, lo, hi)
    return record


def never_served_mask(log, status: np.ndarray) -> np.ndarray | None:
    """Per request: rejected as one no rate can serve (longer than the context or the whole KV cache,
    ``metrics/rejections.never_served``); None when there is none."""
    rejected = status == int(Status.REJECTED)
    if not rejected.any():
        return None
    ids = log.column("id")
    never = rejected & np.fromiter((never_served(log.reasons.get(i, "")) for i in ids.tolist()), bool, len(ids))
    return never if never.any() else None


def floor(log, never: np.ndarray, win: np.ndarray, work: np.ndarray, lo: float, hi: float) -> dict:
    """The best record any arrival rate could give this run's requests: every request served the instant it
    arrives (zero latencies and gaps, every tier target met) except ``never``, the ones the replica rejects as
    too long for the context or the whole KV cache, which are misses at every rate as ``measure`` counts them.

    A probe's latencies and attainment can only be worse (more misses, longer latencies); the floor's growth is
    the never-served requests' work alone, what refusing them costs at any rate (a probe's own verdict leaves
    them out: ``measure``). An SLO the floor fails is failed at every rate: the capacity search stops there
    (rate_search.py)."""
    arrival = log.column("arrival")
    output = log.column("output_len")
    stability = trend(arrival, np.where(never, INF, arrival), work, lo, hi)
    metrics: dict = {}
    tier_col = log.column("tier")
    for i, tier in enumerate([None] + list(log.tiers)):
        sel = win if tier is None else win & (tier_col == i - 1)
        prefix = "" if tier is None else f"{tier}."
        served, missed = sel & ~never, int((sel & never).sum())
        zeros = {"ttft": int(served.sum()), "e2e": int(served.sum()), "tpot": int((served & (output > 1)).sum()),
                 "tbt": int(np.maximum(output[served] - 1, 0).sum())}
        for m in LATENCIES:
            for s, v in stats_of(zeros[m], missed).items():
                metrics[f"{prefix}{m}_{s}"] = v
        n = int(sel.sum())
        metrics[f"{prefix}attainment"] = float(served.sum()) / n if n else math.nan
    return {"stability": stability, "metrics": metrics}


def failed_at_every_rate(record: dict, slos) -> list[str]:
    """The SLOs a probe record's floor fails (none without a floor): failed at every rate.

    Its stability is the never-served requests' work alone, left outstanding as ``measure`` leaves it: growth of
    5% or more of the arriving work (significant: those requests arrive all through the window) is a deployment
    that refuses that much of its work at any rate, which the sound bound (sound_bound.py) also gives a capacity
    of 0. A probe's own verdict can miss it (ShareGPT's lengths over a 7000-token context: 5 of 157 requests
    rejected, the floor's growth 9.6% at t = 10.5, yet probes up to 3.36 req/s grew 10-16% at t < 3, were called
    stable, and the search ended in a sound-bound violation)."""
    if "floor" not in record:
        return []
    return evaluate(record["floor"], slos)[1]


def stats_of(zeros: int, infs: int) -> dict:
    """``stats`` of ``zeros`` values 0 and ``infs`` values +inf, without building them (a TBT floor has a zero
    for every gap of every served request)."""
    n = zeros + infs
    out = {}
    for s in STATS:
        if not n:
            out[s] = math.nan
        elif s in ("mean", "max"):
            out[s] = INF if infs else 0.0
        else:
            pos = float(s[1:]) / 100 * (n - 1)
            out[s] = INF if math.ceil(pos) >= zeros else 0.0
    return out


def _latency(log, metric: str, sel: np.ndarray, done: np.ndarray) -> np.ndarray:
    missing = np.full(int((sel & ~done).sum()), INF)
    if metric == "tbt":
        return np.r_[log.gaps_of(sel), missing]
    values = log.column(metric)[sel & done]
    if metric == "tpot":
        values = values[np.isfinite(values)]  # one-token outputs have no TPOT
    return np.r_[values, missing]


def _meets(log, done: np.ndarray) -> np.ndarray:
    """Per request: finished and within every target of its tier (TBT: at most 1% of gaps late, as Bari et al.,
    Bari et al., count it)."""
    with np.errstate(invalid="ignore"):
        ok = done.copy()
        for name in ("ttft", "tpot"):
            target, value = log.column(f"{name}_slo"), log.column(name)
            ok &= np.isnan(target) | np.isnan(value) | (value <= target)
        misses, gaps = log.column("tbt_misses"), log.column("num_gaps")
        ok &= np.isnan(log.column("tbt_slo")) | (misses <= TBT_MISS_TOLERANCE * gaps)
    return ok


def evaluate(record: dict, slos: list[SLO]) -> tuple[bool, list[str]]:
    """Does the run meet every SLO? Failed SLOs are named; an unstable run fails as 'stability: <verdict>'."""
    failed = []
    verdict = record["stability"]["verdict"]
    if verdict != "stable":
        failed.append(f"stability: {verdict}")
    for slo in slos:
        if slo.key not in record["metrics"]:
            tiers = sorted({k.split(".")[0] for k in record["metrics"] if "." in k})
            raise ValueError(f"SLO {slo.text}: the run has no tier {slo.tier!r}; its tiers: "
                             f"{', '.join(tiers) or 'none (give --tiers)'}")
        if not slo.met_by(record["metrics"][slo.key]):
            failed.append(slo.text)
    return not failed, failed

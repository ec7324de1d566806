"""Capacity: the highest arrival rate (closed loop: concurrency) that is stable and meets the SLOs.

Bracket, then bisect. From the start rate the search doubles while probes meet and halves while they fail
(after an unstable probe it tries just under the throughput that probe measured, when that is above the
half), until one rate meets and one fails; then it bisects geometrically until hi/lo - 1 <= resolution
(integers: hi - lo <= 1). The capacity is ``lo``, the highest rate that met; the interval is (lo, hi). A search
stops at the first probe whose requests that can never be served (longer than the context, or than the whole KV
cache: rejected whatever the rate) fail an SLO on their own (``verdict.floor``): then no rate meets. Below that
they are fixed, not load: every probe counts them as misses, no probe's stability counts their backlog (which
would pass for load-induced growth and halve the rate chasing a miss no rate fixes), and the result's note
reports them.
The search's path depends only on probe verdicts, never on the executor or how many workers it has, so every
executor gives the same probes and the same answer. Several searches (schedulers, plan candidates) advance in
lock-step so that one round's probes run in parallel. A probe above the sound throughput bound of its own
requests fails (no schedule keeps up there: sound_bound.py), whatever its trend says; every capacity found is
checked against that bound again: one above it fails the search.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..experiment import RunConfig
from ..metrics.rejections import NOTABLE_SHARE, rejection_note
from .lockstep import run_lockstep
from .probe import Probe, check_base, make_probe, min_rate, probe_config, start_rate
from .slo import RATIOS, SLO
from .sound_bound import above_bound, check_capacity
from .stability import GROWTH_MIN

MIN_RATE_FACTOR = 2.0 ** -10  # give up halving 1024x below the start
MAX_RATE_FACTOR = 2.0 ** 10
DIGITS = 5  # probe rates are rounded to 5 significant digits (readable, stable cache keys)


@dataclass
class CapacityResult:
    label: str
    unit: str  # "req/s" or "concurrency"
    capacity: float | None  # highest rate that met every SLO while stable; None if no probed rate did
    interval: tuple[float, float]  # (lo, hi): lo met, hi failed (hi = inf if nothing failed up to max_rate)
    resolution: float
    probes: list[Probe] = field(default_factory=list)
    note: str = ""

    def to_dict(self, records: bool = False) -> dict:
        return {"label": self.label, "unit": self.unit, "capacity": self.capacity, "interval": list(self.interval),
                "resolution": self.resolution, "note": self.note, "num_probes": len(self.probes),
                "probes": [p.to_dict(records) for p in sorted(self.probes, key=lambda p: p.rate)]}


def _round(x: float, integer: bool) -> float:
    return float(max(1, int(x))) if integer else float(f"{x:.{DIGITS}g}")


def _search(start: float, resolution: float, integer: bool, min_x: float, max_x: float):
    """Generator: yields the next rate to probe, receives its Probe; returns (lo, hi) Probes (either None)."""
    lo = hi = None
    x = _round(start, integer)
    while True:
        p = yield x
        if p.meets:
            lo = p if lo is None or p.rate > lo.rate else lo
        else:
            hi = p if hi is None or p.rate < hi.rate else hi
        if lo is None and p.hopeless:  # requests no rate can serve fail the SLOs on their own: no rate meets
            return lo, hi
        if lo is None:
            nxt = x / 2
            if p.verdict != "stable" and x / 2 < 0.95 * p.throughput_rps < x and not integer:
                nxt = 0.95 * p.throughput_rps
            nxt = _round(math.floor(nxt) if integer else nxt, integer)
            if nxt < min_x or nxt >= x:
                return lo, hi
        elif hi is None:
            nxt = _round(min(2 * x, max_x), integer)
            if nxt <= x:
                return lo, hi
        else:
            if (hi.rate - lo.rate <= 1) if integer else (hi.rate / lo.rate - 1 <= resolution):
                return lo, hi
            nxt = _round((lo.rate + hi.rate) // 2 if integer else math.sqrt(lo.rate * hi.rate), integer)
            if not lo.rate < nxt < hi.rate:
                return lo, hi
        x = nxt


def abort_note(aborted: int, measured: int, rate: float) -> str:
    """Why a search with a client timeout finds no rate: requests the client gave up on are unserved work at every
    rate (stability.py), and at the lowest rate tried they are those whose own service outlasts the timeout."""
    return (f"{aborted} of {measured} measured requests were aborted by the client timeout even at {rate:g} req/s, "
            f"where nothing queues: their own service outlasts the timeout, so they are unserved work at every rate "
            f"(the stability verdict counts them so); raise --client-timeout or cap the output lengths")


def _no_rate_note(probes: list[Probe], slos: list[SLO]) -> str:
    """Which SLOs failed even at the lowest rate tried, and the best value any probe reached for each."""
    low = min(probes, key=lambda p: p.rate)
    best = []
    for slo in slos:
        vals = [p.values[slo.key] for p in probes if not math.isnan(p.values[slo.key])]
        if vals:
            v = max(vals) if slo.metric in RATIOS else min(vals)
            best.append(f"{slo.key} best {v:g}{'' if slo.metric in RATIOS else ' s'} (limit {slo.limit:g})")
    note = (f"no rate meets the SLOs: at the lowest rate tried, {low.rate:g}, failed {', '.join(low.failed)}; "
            + ("; ".join(best) if best else "no SLO values reached"))
    hopeless = next((p for p in probes if p.hopeless), None)
    if hopeless:
        growth = max(r["floor"]["stability"]["growth"] for r in hopeless.records if "floor" in r)
        note += (f"; the search stopped after {len(probes)} probe{'s' if len(probes) > 1 else ''}: the requests "
                 f"that can never be served fail {', '.join(hopeless.hopeless)} on their own, at every rate (their "
                 f"work alone grows the backlog by {growth:.1%} of the arriving work; a stable run allows "
                 f"{GROWTH_MIN:.0%})")
    aborted = max(low.records, key=lambda r: r["counts"].get("aborted", 0), default=None)
    if aborted and aborted["counts"].get("aborted", 0) >= NOTABLE_SHARE * aborted["counts"]["measured"]:
        note += "; " + abort_note(aborted["counts"]["aborted"], aborted["counts"]["measured"], low.rate)
    worst = max(low.records, key=lambda r: r["counts"]["rejected"], default=None)
    if worst and (hopeless or worst["counts"]["rejected"] >= NOTABLE_SHARE * worst["counts"]["measured"]):
        note += "; " + rejection_note(worst["counts"]["rejected"], worst["counts"]["measured"],
                                      worst["counts"].get("reasons", []))
    return note


def fixed_rejections_note(probe: Probe) -> str:
    """The requests no rate can serve at the capacity's probe, reported rather than searched on: they miss at every
    rate, and the probes' stability verdicts leave their backlog out (verdict.measure)."""
    worst = max(probe.records, key=lambda r: r["counts"].get("never_served", 0))
    n = worst["counts"].get("never_served", 0)
    if not n:
        return ""
    growth = worst["floor"]["stability"]["growth"]
    return (f"{n} of {worst['counts']['measured']} measured requests can never be served, at any rate: fixed "
            f"misses in every probe, left out of its stability verdict (their backlog grows {growth:.1%} of the "
            f"arriving work, under the {GROWTH_MIN:.0%} that would make every rate unstable); "
            + rejection_note(worst["counts"]["rejected"], worst["counts"]["measured"],
                             worst["counts"].get("reasons", [])))


SHORT_WINDOW_E2E = 5  # a trend window shorter than this many E2E p90s cannot resolve GROWTH_MIN (measured below)


def short_window_note(failing: Probe) -> str:
    """Why the first failing probe may be its window's artefact, not the deployment's limit: its trend alone failed
    it, every request was admitted within its window, and that window is shorter than ``SHORT_WINDOW_E2E`` E2E
    p90s, while the trend's 5% resolution was measured on windows of 480 s (stability.py). Llama-3-8B on A100s
    over ShareGPT, TTFT p90 <= 2 s: one replica holds 2.68 req/s (a 480 s window, E2E p90 34 s); 16 replicas
    gave 2.2 req/s from 100 requests (window 37 s, E2E p90 9.9 s, TTFT p90 0.46 s at every rate), 7.0 from 300
    (33 s, 10.4 s), 23.6 from 1,000 (33 s, 14.7 s), 35.3 from 3,000 (67 s, 21.1 s), each failed on 8-12% growth
    alone. Said rather than changed: the verdict is one rule at every rate, and more requests sharpen it.
    """
    if not failing.failed or not all(f.startswith("stability") for f in failing.failed):
        return ""
    rec = failing.records
    if any(r["stability"].get("admitted_share", 0.0) < 1 - GROWTH_MIN for r in rec):
        return ""
    span = min(r["window"]["end"] - r["window"]["start"] for r in rec)
    e2e = max(r["metrics"].get("e2e_p90", math.nan) for r in rec)
    if not (math.isfinite(e2e) and span < SHORT_WINDOW_E2E * e2e):  # inf: a measured request never finished
        return ""
    return (f"the first failing probe ({failing.rate:g}) failed on its trend alone, with every request admitted in "
            f"its window, and that window ({span:.3g} s of arrivals) is under {SHORT_WINDOW_E2E}x a request's E2E "
            f"p90 ({e2e:.3g} s): too short for the trend to tell growth from filling up; offer more requests "
            f"(--num-requests) for a sharper capacity")


def find_capacities(bases: dict[str, RunConfig], slos: list[SLO], resolution: float = 0.02, seeds=(0,),
                    executor=None, cache=None, progress: bool = False, start: float | None = None,
                    max_rate: float | None = None) -> dict[str, CapacityResult]:
    """``find_capacity`` for several labelled configs at once; their probes of one round run together."""
    if not (0 < resolution < 1):
        raise ValueError(f"resolution must be a fraction in (0, 1), e.g. 0.02, got {resolution}")
    seeds = tuple(seeds)
    if not seeds:
        raise ValueError("capacity needs at least one seed")
    searches, probes, units = {}, {}, {}
    for label, base in bases.items():
        check_base(base)
        integer = base.concurrency is not None
        x0 = start or start_rate(base) or 1.0
        top = max_rate or x0 * MAX_RATE_FACTOR
        if not (x0 > 0 and top >= x0):
            raise ValueError(f"capacity: start {x0:g} must be positive and at most max_rate {top:g}")
        searches[label] = _search(x0, resolution, integer, max(x0 * MIN_RATE_FACTOR, min_rate(base)), top)
        probes[label], units[label] = [], "concurrency" if integer else "req/s"

    def record(label, rate, probe, configs):
        probes[label].append(probe)
        return f"{label} {probe.rate:g} {'meets' if probe.meets else 'fails'}"

    def judge(label, rate, records):
        """The probe's verdict, failed where its rate is above the sound bound of its own requests (a stable
        probe serves 95% of its work, which no schedule does above it: sound_bound.py)."""
        probe = make_probe(rate, seeds, records, slos)
        if probe.meets and units[label] == "req/s":
            why = above_bound(bases[label], rate, seeds)
            if why:
                probe.meets, probe.verdict, probe.failed = False, "overloaded", [why]
                overruled[label] = overruled.get(label, 0) + 1
        return probe

    overruled: dict[str, int] = {}
    ends = run_lockstep(searches, lambda label, rate: [probe_config(bases[label], rate, s) for s in seeds], judge,
                        executor, cache, record, "capacity" if progress else None)
    results = {lab: _result(lab, units[lab], resolution, probes[lab], ends[lab], slos) for lab in bases}
    for lab, count in overruled.items():  # said, not hidden: the trend alone would have called them stable
        results[lab].note = " ".join(filter(None, (results[lab].note, (
            f"{count} probe(s) that met every SLO with a stable trend were above the sound throughput bound of "
            f"their own requests and were failed: the trend cannot see growth in so short or bursty a window "
            f"(offer more requests, --num-requests)"))))
    for lab, result in results.items():  # the sound bound as an invariant (sound_bound.py)
        check_capacity(lab, bases[lab], result.capacity if result.unit == "req/s" else None, seeds)
    return results


def _result(label, unit, resolution, probes, ends, slos) -> CapacityResult:
    lo, hi = ends
    note = ""
    if lo is None:
        note = _no_rate_note(probes, slos)
    elif hi is None:
        note = f"every probe up to {lo.rate:g} {unit} met the SLOs; the capacity is at least that"
    if lo is not None:
        note = "; ".join(n for n in (note, fixed_rejections_note(lo)) if n)
    if hi is not None:
        note = "; ".join(n for n in (note, short_window_note(hi)) if n)
    return CapacityResult(label, unit, lo.rate if lo else None,
                          (lo.rate if lo else 0.0, hi.rate if hi else math.inf), resolution, probes, note)


def find_capacity(base: RunConfig, slos: list[SLO], resolution: float = 0.02, seeds=(0,), executor=None,
                  cache=None, progress: bool = False, start: float | None = None,
                  max_rate: float | None = None) -> CapacityResult:
    """The capacity of one deployment: see the module docstring."""
    return find_capacities({base.scheduler: base}, slos, resolution, seeds, executor, cache, progress, start,
                           max_rate)[base.scheduler]

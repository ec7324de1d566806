"""A plan for a day of traffic (``llmsched plan-day``, docs/autoscaling.md): for each deployment (GPU x TP x
scheduler x router), the cheapest fixed fleet and the cheapest autoscaler setting whose day meets the attainment
target, against an oracle that knows the day in advance, and what cold starts cost the cheapest settings.

Every figure is of whole-day runs (``day_record``: one simulated day, streamed and so measured at the engine, billed
from its start to its last request):

* **capacity** of one replica: the highest constant rate it carries meeting the attainment target (the capacity
  search of docs/capacity.md, one replica, ``capacity.rate_search.find_capacities``);
* **fixed**: the fewest always-on replicas whose day meets the target, searched from ``ceil(peak / capacity)``
  (peak: the busiest 60-s window of the day's arrivals) down while it meets, up while it fails (more replicas never
  serve worse);
* **autoscaled**: every policy of ``--autoscalers`` at each setting of its grid (``SETTINGS``: the policy's defaults
  and values of its main knobs), between 1 replica and the fixed fleet's count, starting with the replicas the
  first minute needs at the capacity (as a fleet that had been running); the cheapest that meets;
* **oracle** (not a bound): per 60-s window, the fewest replicas whose capacity covers that window's arrival rate,
  started at no cost the moment they are needed: what an autoscaler that knows the future and starts replicas
  instantly would pay, at this capacity;
* **bound** (a lower bound): the sound throughput bound (``theory/throughput_bound.py``) on the day's own requests:
  no schedule serves them on fewer GPU-hours in the simulator's model, whatever the fleet (busy time <= billed time);
* **cold starts**: the cheapest setting of each policy run again at each ``--cold-starts`` value, with the day's
  attainment and the attainment of the requests that arrived in the schedule's bursts.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..capacity.probe import DEFAULT_DURATION
from ..capacity.rate_search import find_capacities
from ..capacity.slo import parse_slos
from ..experiment import RunConfig, build_source, run, run_model
from ..metrics.summary import summarize
from ..metrics.timeline import window_sums
from ..theory.throughput_bound import config_lengths, engine_of, throughput_bound
from .candidates import Candidate

ORACLE_WINDOW = 60.0  # seconds: the oracle's (and the peak's) windows
TIMELINE_WINDOW = 60.0  # a day run's timeline windows (the bursts' attainment reads them)
# each policy's settings tried (beyond its bounds): its defaults, and values of its main knobs that scale up sooner
# (a lower target, a shorter interval, a wider spare) or later
SETTINGS = {
    "hpa": ({}, {"target": 1.0}, {"metric": "running"}),
    "kpa": ({}, {"target": 50.0}, {"target": 20.0}),
    "dynamo-sla": ({}, {"predictor": "constant"}, {"interval": 30.0}),
    "saturation": ({}, {"kv_spare": 0.2, "queue_spare": 4.0}),
    "predictive": ({"utilization": 0.85}, {"utilization": 0.7}),
}


def day_record(cfg: RunConfig) -> dict:
    """One simulated day of ``cfg``, streamed (running totals only: a day of millions of requests in flat memory,
    latencies at the engine): its attainment, GPU-seconds billed (a fleet's, or every replica from t = 0 to the
    run's end), its timeline rows, its CPU and wall seconds. JSON-clean (an executor's result)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = run(cfg.with_values(keep_gaps=False, latency_boundary="engine"), stream=True)
    summary = summarize(result)
    gpus = run_model(cfg).tp
    fleet = summary.get("fleet")
    billed = fleet["billed_gpu_s"] if fleet else cfg.replicas * gpus * result.end_time
    return {"attainment": summary["goodput"]["fraction"], "good": summary["goodput"]["good_requests"],
            "requests": summary["counts"]["offered"], "billed_gpu_s": billed, "end_s": result.end_time,
            "ttft_p90": summary["latency"]["ttft"]["p90"], "replicas_max": (
                max(p["replicas_max"] for p in fleet["pools"].values()) if fleet else cfg.replicas),
            "timeline": summary.get("timeline", {}).get("rows", []),
            "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}


@dataclass
class Day:
    """One day run of a deployment: what was run and what it measured (``record``)."""

    kind: str            # fixed, autoscaled, cold-start
    candidate: str
    setting: dict        # replicas, or policy and params (and cold start)
    record: dict
    usd: float
    meets: bool

    @property
    def gpu_hours(self) -> float:
        return self.record["billed_gpu_s"] / 3600


@dataclass
class DeploymentDay:
    candidate: Candidate
    capacity_rps: float | None
    peak_rps: float
    fixed: list[Day] = field(default_factory=list)
    autoscaled: list[Day] = field(default_factory=list)
    cold_starts: list[Day] = field(default_factory=list)
    oracle_gpu_hours: float | None = None
    bound_gpu_hours: float | None = None
    price: float = math.nan  # USD per GPU-hour

    def cheapest(self, days: list[Day]) -> Day | None:
        met = [d for d in days if d.meets]
        return min(met, key=lambda d: (d.usd, d.candidate, str(d.setting))) if met else None

    @property
    def best_fixed(self) -> Day | None:
        return self.cheapest(self.fixed)

    @property
    def best_autoscaled(self) -> Day | None:
        return self.cheapest(self.autoscaled)


def day_configs(base: RunConfig, candidate: Candidate) -> RunConfig:
    """``base`` (the day: workload, schedule, tiers) deployed as ``candidate``, one replica, a 60-s timeline."""
    return base.with_values(gpu=candidate.gpu, tp=candidate.tp, scheduler=candidate.scheduler,
                            router=candidate.router, timeline_window=TIMELINE_WINDOW,
                            scheduler_params={**base.scheduler_params, **dict(candidate.params)})


def arrivals_per_window(cfg: RunConfig, width: float = ORACLE_WINDOW) -> np.ndarray:
    return window_sums(build_source(cfg).arrival_times, width)


def capacity_base(cfg: RunConfig) -> RunConfig:
    """One replica of ``cfg`` at a constant rate: what the capacity search probes."""
    return dataclasses.replace(cfg, rate_schedule=None, duration=DEFAULT_DURATION, num_requests=None, rate=2.0,
                               timeline_window=None, replicas=1, autoscaler=None, keep_gaps=True, horizon=None,
                               latency_boundary="engine")


def fixed_search(start: int, most: int):
    """Generator: yields replica counts, receives whether each met; returns the fewest that met (None: none up to
    ``most``)."""
    meet, fail = None, 0
    r = max(1, min(start, most))
    while True:
        ok = yield r
        if ok:
            meet = r
        else:
            fail = r
        if meet is not None and meet - fail <= 1:
            return meet
        if meet is not None:
            r = (fail + meet) // 2 if fail else meet - 1
            if r < 1:
                return meet
            continue
        if r >= most:
            return None
        r = min(most, max(r + 1, math.ceil(r * 1.25)))


def plan_day(candidates: list[Candidate], bases: dict[str, RunConfig], attainment: float, policies: list[str],
             price_of, most_replicas: int, executor, cache=None, cold_starts=(), progress=None) -> list[DeploymentDay]:
    """The day plan of each candidate (module docstring), each run with its scheduler's options in ``bases``;
    ``price_of(gpu)`` USD per GPU-hour; ``executor.map`` runs the days; ``progress(text)`` hears of each round."""
    say = progress or (lambda text: None)
    slos = parse_slos(f"attainment>={attainment:g}")
    days = {c: day_configs(bases[c.scheduler], c) for c in candidates}
    windows = arrivals_per_window(next(iter(days.values())))
    peak = float(windows.max()) / ORACLE_WINDOW
    say(f"the day: {int(windows.sum())} requests, busiest minute {peak:.3g} req/s")
    caps = find_capacities({c.label: capacity_base(cfg) for c, cfg in days.items()}, slos, resolution=0.05,
                           executor=executor, cache=cache)
    out = {}
    for c, cfg in days.items():
        cap = caps[c.label].capacity
        out[c] = DeploymentDay(c, cap, peak, price=price_of(c.gpu))
        say(f"{c.label}: one replica carries {cap if cap else 0:.3g} req/s at attainment >= {attainment:g}")

    def day(kind, c, setting, cfg) -> tuple:
        return kind, c, setting, cfg

    def settle(batch: list[tuple]) -> list[Day]:
        records = executor.map(day_record, [b[3] for b in batch])
        made = []
        for (kind, c, setting, _), rec in zip(batch, records):
            usd = rec["billed_gpu_s"] / 3600 * out[c].price
            made.append(Day(kind, c.label, setting, rec, usd, rec["attainment"] >= attainment))
        return made

    # the fixed fleets, every candidate's search a round at a time
    searches = {c: fixed_search(math.ceil(peak / out[c].capacity_rps) if out[c].capacity_rps else 1, most_replicas)
                for c in days}
    asked = {c: next(s) for c, s in searches.items()}
    while asked:
        batch = [day("fixed", c, {"replicas": r}, days[c].with_values(replicas=r)) for c, r in asked.items()]
        results = settle(batch)
        nxt = {}
        for (_, c, _, _), d in zip(batch, results):
            out[c].fixed.append(d)
            say(f"{c.label} fixed x{d.setting['replicas']}: attainment {d.record['attainment']:.4f} "
                f"{'meets' if d.meets else 'fails'}")
            try:
                nxt[c] = searches[c].send(d.meets)
            except StopIteration:
                pass
        asked = nxt
    # the autoscalers' settings, all at once
    batch = []
    for c, cfg in days.items():
        fixed = out[c].best_fixed
        high = fixed.setting["replicas"] if fixed else most_replicas
        start = starting_replicas(windows, out[c].capacity_rps, high)
        for policy in policies:
            for params in SETTINGS[policy]:
                params = dict(params)
                if policy == "predictive" and out[c].capacity_rps:
                    params["capacity"] = float(out[c].capacity_rps)
                setting = {"policy": policy, "params": params, "max_replicas": high}
                batch.append(day("autoscaled", c, setting, cfg.with_values(
                    autoscaler=policy, autoscaler_params=params, min_replicas=1, max_replicas=high, replicas=start)))
    say(f"{len(batch)} autoscaled days")
    for (_, c, _, _), d in zip(batch, settle(batch)):
        out[c].autoscaled.append(d)
    # the oracle and the bound
    for c, cfg in days.items():
        plan = out[c]
        tp = run_model(cfg).tp
        if plan.capacity_rps:
            need = np.ceil(windows / ORACLE_WINDOW / plan.capacity_rps - 1e-9)
            plan.oracle_gpu_hours = float(np.maximum(need, 1).sum()) * ORACLE_WINDOW * tp / 3600
        try:
            bound = least_busy_seconds(cfg, attainment)
            plan.bound_gpu_hours = bound * tp / 3600
        except ValueError:
            plan.bound_gpu_hours = None
    # what cold starts cost the cheapest setting of each policy
    batch = []
    for c, cfg in days.items():
        fixed = out[c].best_fixed
        start = starting_replicas(windows, out[c].capacity_rps, fixed.setting["replicas"] if fixed else most_replicas)
        for policy in policies:
            mine = [d for d in out[c].autoscaled if d.setting["policy"] == policy]
            best = out[c].cheapest(mine) or (min(mine, key=lambda d: -d.record["attainment"]) if mine else None)
            if best is None:
                continue
            for seconds in cold_starts:
                setting = {**best.setting, "cold_start": float(seconds)}
                batch.append(day("cold-start", c, setting, cfg.with_values(
                    autoscaler=policy, autoscaler_params=best.setting["params"], min_replicas=1,
                    max_replicas=best.setting["max_replicas"], cold_start=float(seconds), replicas=start)))
    if batch:
        say(f"{len(batch)} days at other cold starts")
        for (_, c, _, _), d in zip(batch, settle(batch)):
            out[c].cold_starts.append(d)
    return [out[c] for c in candidates]


def starting_replicas(windows: np.ndarray, capacity: float | None, high: int) -> int:
    """The replicas an autoscaled day starts with: those its first minute's arrivals need at the capacity (as a
    fleet that had been running would have), within [1, high]."""
    if not capacity or not len(windows):
        return 1
    return int(min(high, max(1, math.ceil(windows[0] / ORACLE_WINDOW / capacity - 1e-9))))


def least_busy_seconds(cfg: RunConfig, attainment: float) -> float:
    """Replica-seconds no schedule serves ``attainment`` of the day's requests in: the throughput bound's least
    work over the requests covering the token share that the ``attainment`` x N shortest requests hold (any set of
    that many requests holds at least that share)."""
    bt, limits = engine_of(cfg)
    prompts, outputs = config_lengths(cfg)
    tokens = np.sort(np.asarray(prompts, float) + np.asarray(outputs, float))
    need = math.ceil(attainment * len(tokens) - 1e-9)
    share = float(tokens[:need].sum() / tokens.sum()) if need else 0.0
    bound = throughput_bound(bt, prompts, outputs, limits, 1, max(share, 1e-12))
    return bound.seconds_per_request * len(tokens)


def burst_attainment(record: dict, cfg: RunConfig) -> float:
    """The attainment of the requests that arrived within the schedule's bursts (NaN without a burst)."""
    bursts = cfg.rate_schedule.value.bursts if cfg.rate_schedule else ()
    arrived = good = 0.0
    for row in record["timeline"]:
        if any(b.at <= row["start"] and row["end"] <= b.end for b in bursts) and row["arrivals"]:
            arrived += row["arrivals"]
            good += row["arrivals"] * row["slo_attainment"]
    return good / arrived if arrived else math.nan

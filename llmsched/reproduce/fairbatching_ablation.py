"""Why FairBatching's headline gains do not reproduce: one factor at a time.

For each factor level, the capacity (llmsched.capacity: the highest stable rate at which at least
``ATTAINMENT`` of the measured requests meet TTFT and TPOT, unfinished and rejected ones as misses, by
bisection) of FB-vanilla, vLLM-sarathi with its token budget tuned over ``BUDGETS`` for that level, and
vLLM-vanilla (vLLM V1's default chunked scheduler with its default 8192-token budget on the paper's ≥ 70 GiB
non-A100 GPUs: vllm/engine/arg_utils.py ``get_batch_defaults``, OpenAI server context; 2048 on an L20).
Levels change one thing against the reference (roofline, the Azure conversation trace at its own
burstiness, online predictor refit, TPOT by the envelope check, our resolutions of Algorithm 1's gaps):

* ``overhead``: per-step host cost. The roofline already charges 2 ms per step (Bari et al.'s fit); a vLLM
  engine without async scheduling (off by default in v0.10.1.1, the paper's version) leaves the GPU idle
  between steps for its CPU work: ~4 ms per decode step and 5-13 ms overall in vLLM V0's profile
  (vllm-project/vllm#6854), 5-6 ms at batch 256 for Llama-2-7B in the V1-era engine
  (vllm-project/vllm#10634, #11133). ``HOST_STEP`` adds 4 ms (the roofline's ``host_step`` option), so a
  step's fixed cost is 6 ms, inside both measured ranges. Not tuned: no other value is tried.
* ``batch-time``: which measured timing the engines run on: ``calibrated`` (the roofline with efficiencies
  fitted to Vidur's A100 operator profiles; on the A800, an A100 chip, the roofline already is this, so the
  row is the reference's and is not rerun), ``roofline-staircase`` (the same profiles fitted with 128-token
  GEMM tiles: small batches cost a full tile; also with FairBatching's oracle predictor, to tell a loss from
  the tiles from a loss of the linear predictor's fit to them), ``engine`` (host terms fitted to the Splitwise engine's
  measured steps: an eager engine's per-layer and per-sequence cost, an upper bound for vLLM's).
* ``arrivals``: gamma arrivals with CV 1 (Poisson), 2, 4 and the trace's own length mix instead of its
  timestamps.
* ``metric``: which TPOT the attainment checks (Lyu et al. §5.1, a gap in the paper; our resolution): M2 envelope (reference, what
  FairBatching schedules for), M1 cumulative max from the first token (the paper's words), M3 mean (the
  shared capacity's own check).
* ``predictor``: FairBatching's step-time predictor fitted offline only (no refit), or exact (an oracle: the
  replica's own batch-time model fills B0, ``prediction="exact"``).
* ``design``: §3.3 choices: urgent decodes forced in (§3.3's "always included"), B0's minimum over all
  tasks (Alg. 1 line 18 literally), a chunk charged its own context (``chunk_context=exact``).

``--arrivals gamma:CV`` makes gamma arrivals the reference instead of the trace: on the replayed trace every
system's capacity is set by the stability test (the head of the trace ramps up), so nothing that only
reorders work can move it; under Poisson arrivals attainment binds (docs/fairbatching.md, "Ablation").
The cluster part measures the PAB router's own gain against controls (``CLUSTER_SYSTEMS``: report lag
either way, rejection when no replica's PAB fits) and, with ``--sweep``, reads the paper's peak EffRPS and
the shared criterion off the same grid of runs. Factors that change only FairBatching reuse the reference's
baselines. The SLO-metric factor re-scores the
same runs: each probe is measured with the shared ``measure`` and its ``attainment`` recomputed with the
TPOT check asked for (``llmsched.metrics.tpot_attainment.slo_met``) over the same window.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..batchtime import make_batch_time_model
from ..capacity import find_capacities, parse_slos
from ..capacity.probe import GRACE_S
from ..capacity.verdict import measure, window
from ..executors import make_executor
from ..experiment import RunConfig, build_replicas, build_source
from ..metrics.tpot_attainment import CHECKS, slo_met
from ..routing.registry import make_router
from ..sim.simulator import simulate
from ..workload.lengths.length_presets import LENGTH_PRESETS
from ..workload.traces.readers import DataFileNotFound, resolve_data_file


CASES = {"qwen3-14b/h20": ("qwen3-14b", "h20", 0.8), "llama-3.1-8b/a800": ("llama-3.1-8b", "a800", 4.0)}
TRACE_FILE = "AzureLLMInferenceTrace_conv.csv"
PRESET = "azure-conv"
TTFT, TPOT = 0.5, 0.05  # Lyu et al. Table 2, the short-prompt traces
ATTAINMENT = 0.9
BUDGETS = (128, 256, 512, 1024, 2048)
VLLM_V1_DEFAULT_BUDGET = 8192
# vLLM v0.10.1.1 (the paper's) admits a waiting prompt on its first chunk's blocks: no full-prompt gate
VANI_PARAMS = {"token_budget": VLLM_V1_DEFAULT_BUDGET, "reserve_full_isl": False}
MAX_NUM_SEQS = 1024
HOST_STEP = 4e-3  # s; vllm-project/vllm#6854 (~4 ms GPU bubble per decode step), #10634 (5-6 ms gap)
SYSTEMS = ("FB-v", "vLLM-sara", "vLLM-vani")


@dataclass(frozen=True)
class Level:
    factor: str
    name: str
    batch_time: str = "roofline"
    batch_time_params: tuple = ()
    arrivals: str = "trace"  # "trace" or "gamma:<cv>"
    fb_params: tuple = ()
    metric: str = "envelope"

    @property
    def fb_only(self) -> bool:
        """Only FairBatching's parameters or the scoring differ from the reference."""
        return self.batch_time == "roofline" and not self.batch_time_params and self.arrivals == "trace"


REFERENCE = Level("reference", "roofline, reference arrivals, online refit, envelope")
LEVELS = (
    REFERENCE,
    Level("overhead", f"+{HOST_STEP * 1e3:g} ms host per step", batch_time_params=(("host_step", HOST_STEP),)),
    Level("batch-time", "calibrated (Vidur A100-family fit)", batch_time="calibrated"),
    Level("batch-time", "roofline-staircase (tile-quantised GEMMs)", batch_time="roofline-staircase"),
    Level("batch-time", "roofline-staircase, exact predictor", batch_time="roofline-staircase",
          fb_params=(("prediction", "exact"),)),
    Level("batch-time", "engine (Splitwise engine's host terms)", batch_time="engine"),
    Level("arrivals", "gamma cv 1", arrivals="gamma:1"),
    Level("arrivals", "gamma cv 2", arrivals="gamma:2"),
    Level("arrivals", "gamma cv 4", arrivals="gamma:4"),
    Level("metric", "M1 cumulative", metric="cumulative"),
    Level("metric", "M3 mean (shared)", metric="mean"),
    Level("predictor", "offline fit only", fb_params=(("online_refit", False),)),
    Level("predictor", "exact (oracle)", fb_params=(("prediction", "exact"),)),
    Level("design", "force urgent decodes", fb_params=(("force_urgent_decodes", True),)),
    Level("design", "min slack over all", fb_params=(("min_slack_scope", "all"),)),
    Level("design", "chunk context exact", fb_params=(("chunk_context", "exact"),)),
)
FAST_LEVELS = ("reference", "overhead")
PARTS = ("single", "latency", "cluster")


@dataclass
class Settings:
    case: str
    levels: tuple
    n: int
    budgets: tuple
    resolution: float
    jobs: int
    parts: tuple = ("single", "latency")
    replicas: int = 4
    workload: str = PRESET
    arrivals: str = "trace"
    ttft: float = TTFT
    tpot: float = TPOT
    cluster_systems: tuple = ()
    sweep: tuple = ()
    loads: tuple = (1.2,)
    latency_budgets: tuple = ()


def config(s: Settings, level: Level, scheduler: str, params: dict, n: int | None = None) -> RunConfig:
    """One deployment of ``s.case`` under ``level``: the Azure conversation trace replayed (its own arrivals),
    or ``s.workload``'s length preset with gamma arrivals (CV 2 where the level keeps the trace's arrivals but
    there is no trace: another workload, or no data folder). ``s.arrivals`` ("trace" or "gamma:<cv>") replaces
    the reference's arrivals for every level but the arrival factor's own."""
    model, gpu, rate = CASES[s.case]
    arrivals = level.arrivals if level.arrivals != "trace" else s.arrivals
    source = {"workload": s.workload, "arrival": "gamma", "cv": 2.0}
    if arrivals != "trace":
        source["cv"] = parse_arrivals(arrivals)
    elif s.workload == PRESET:
        try:
            resolve_data_file(TRACE_FILE)
            source = {"trace": TRACE_FILE}
        except DataFileNotFound:
            pass
    return RunConfig(latency_boundary="engine", scheduler=scheduler, scheduler_params=params, model=model, gpu=gpu,
                     batch_time=level.batch_time, batch_time_params=dict(level.batch_time_params),
                     max_num_seqs=MAX_NUM_SEQS, num_requests=n or s.n, rate=rate,
                     tiers=f"slo:ttft={s.ttft:g}:tpot={s.tpot:g}", **source)


def parse_arrivals(text: str) -> float:
    """The CV of ``gamma:<cv>``."""
    kind, _, cv = text.partition(":")
    try:
        value = float(cv)
    except ValueError:
        value = math.nan
    if kind != "gamma" or not value > 0:
        raise ValueError(f"--arrivals: write 'trace' or 'gamma:CV' with CV > 0 (e.g. gamma:1), got {text!r}")
    return value


def fb_params(s: Settings, level: Level) -> dict:
    return {"ttft_slo": s.ttft, "tpot_slo": s.tpot, **dict(level.fb_params)}


def deployments(s: Settings, level: Level) -> dict[str, RunConfig]:
    """label -> config: FB-v, vLLM-vani and Sarathi at every budget (the tuned one is picked afterwards)."""
    out = {"FB-v": config(s, level, "fairbatching", fb_params(s, level))}
    if level.fb_only and level != REFERENCE and level.metric == "envelope":
        return out
    out["vLLM-vani"] = config(s, level, "vllm-chunked", VANI_PARAMS)
    for b in s.budgets:
        out[f"sarathi-{b}"] = config(s, level, "sarathi", {"token_budget": b})
    return out


def same_timing(s: Settings, level: Level) -> str | None:
    """Why ``level``'s batch-time model need not be run: it is the reference's (the same figures: e.g. the
    roofline of a GPU of a calibrated chip family already uses the fitted efficiencies) or it does not exist
    for this GPU; None when it differs and must be measured."""
    if level.batch_time == "roofline":
        return None
    model, gpu, _ = CASES[s.case]
    params = dict(level.batch_time_params)
    try:
        alt = make_batch_time_model(level.batch_time, model, gpu, **params).describe()
    except ValueError as e:
        return f"not available: {e}"
    ref = make_batch_time_model("roofline", model, gpu, **params).describe()
    if {k: v for k, v in alt.items() if k != "name"} == {k: v for k, v in ref.items() if k != "name"}:
        return f"identical to the roofline on {gpu} (same fitted efficiencies): the reference's figures"
    return None


def measure_with_check(cfg: RunConfig, check: str) -> dict:
    """``capacity.probe.measure_point`` with the window's attainment by TPOT ``check`` (envelope, cumulative,
    mean): finished, TTFT and that TPOT within the request's targets."""
    replicas = build_replicas(cfg)
    source = build_source(cfg)
    arrivals = source.arrival_times
    _, end = window(arrivals, cfg.warmup, cfg.cooldown)
    horizon = max(float(arrivals.max()), end + GRACE_S)
    result = simulate(source, replicas, make_router(cfg.router), horizon=horizon, seed=cfg.seed, keep_gaps=True,
                      lanes=cfg.lanes)
    record = json.loads(json.dumps(measure(result, cfg.warmup, cfg.cooldown)))
    log = result.requests
    arrival = log.column("arrival")
    lo, hi = window(arrival, cfg.warmup, cfg.cooldown)
    sel = (arrival >= lo) & (arrival <= hi)
    record["metrics"]["attainment"] = float(slo_met(log, check=check)[sel].mean()) if sel.any() else math.nan
    record["tpot_check"] = check
    return record


class CheckedExecutor:
    """find_capacities measures its probes through ``executor.map(measure_point, configs)``; this executor
    measures them with ``measure_with_check`` instead, so the capacity search is the shared one and only the
    per-request TPOT check differs."""

    def __init__(self, check: str, jobs: int):
        if check not in CHECKS:
            raise ValueError(f"TPOT check must be one of {', '.join(CHECKS)}, got {check!r}")
        self.check = check
        self.inner = make_executor("local", jobs=jobs)

    def map(self, fn, items) -> list:
        return self.inner.map(partial(measure_with_check, check=self.check), items)

    def close(self) -> None:
        self.inner.close()


def capacities(bases: dict[str, RunConfig], check: str, resolution: float, jobs: int) -> dict[str, dict]:
    ex = CheckedExecutor(check, jobs)
    try:
        found = find_capacities(bases, parse_slos(f"attainment>={ATTAINMENT:g}"), resolution=resolution, executor=ex)
    finally:
        ex.close()
    return {k: {"capacity": r.capacity or 0.0, "interval": list(r.interval), "probes": len(r.probes), "note": r.note}
            for k, r in found.items()}


def run_level(s: Settings, level: Level, reference: dict | None) -> dict:
    """Capacities of the three systems under ``level``; FB-only levels reuse the reference's baselines, a
    batch-time model identical to the reference's reuses its row."""
    skip = same_timing(s, level)
    if skip:
        row = {k: v for k, v in reference.items() if k not in ("latency", "cluster")} if "identical" in skip \
            else {"fb_v": math.nan, "vllm_vani": math.nan, "vllm_sara": math.nan, "sarathi_budget": None,
                  "sarathi_by_budget": {b: math.nan for b in s.budgets}, "fb_v_gain_pct": math.nan,
                  "vani_vs_sara_pct": math.nan}
        row.update(factor=level.factor, level=level.name, note=skip)
        return row
    found = capacities(deployments(s, level), level.metric, s.resolution, s.jobs)
    row = {"factor": level.factor, "level": level.name, "fb_v": found["FB-v"]["capacity"], "raw": found}
    if "vLLM-vani" in found:
        sara = {b: found[f"sarathi-{b}"]["capacity"] for b in s.budgets}
        best = max(s.budgets, key=lambda b: (sara[b], -b))
        row.update(vllm_vani=found["vLLM-vani"]["capacity"], sarathi_budget=best, vllm_sara=sara[best],
                   sarathi_by_budget=sara)
    else:
        row.update({k: reference[k] for k in ("vllm_vani", "sarathi_budget", "vllm_sara", "sarathi_by_budget")})
        row["baselines_from"] = "reference"
    best_base = max(row["vllm_vani"], row["vllm_sara"])
    row["fb_v_gain_pct"] = _gain(row["fb_v"], best_base)
    row["vani_vs_sara_pct"] = _gain(row["vllm_vani"], row["vllm_sara"])
    return row


def ttft_tail(s: Settings, level: Level, row: dict) -> list[dict]:
    """Table 4's comparison under ``level``: P99 TTFT of the tuned Sarathi over FB-v's, at each of ``s.loads``
    x the level's best baseline capacity (1.2: near saturation, as the paper's 2.5 req/s is for its
    Qwen3-14B; the paper gives one load, so the ratio's dependence on the load is measured, not assumed)."""
    out = []
    for load, budget in ((x, b) for x in s.loads for b in (s.latency_budgets or (row["sarathi_budget"],))):
        rate = round(load * max(row["vllm_vani"], row["vllm_sara"]), 4)
        point = {"load": load, "rate": rate, "sarathi_budget": budget}
        for label, sched, params in (("FB-v", "fairbatching", fb_params(s, level)),
                                     ("vLLM-sara", "sarathi", {"token_budget": budget}),
                                     ("vLLM-vani", "vllm-chunked", VANI_PARAMS)):
            cfg = dataclasses.replace(config(s, level, sched, params), rate=rate)
            log = simulate(build_source(cfg), build_replicas(cfg), make_router(cfg.router), seed=cfg.seed,
                           lanes=cfg.lanes).requests
            ttft = log.column("ttft")
            done = np.isfinite(ttft)
            point[label] = {"ttft_p99_ms": 1e3 * float(np.percentile(ttft[done], 99)) if done.any() else math.nan,
                            "ttft_p50_ms": 1e3 * float(np.percentile(ttft[done], 50)) if done.any() else math.nan,
                            "finished": int(done.sum()), "requests": len(log)}
        point["p99_ttft_sara_over_fb_v"] = point["vLLM-sara"]["ttft_p99_ms"] / point["FB-v"]["ttft_p99_ms"]
        out.append(point)
    return out


# label -> (scheduler, router, the question it answers); the first four are the paper's Fig. 8 systems
CLUSTER_SYSTEMS = {
    "vLLM-LB+vLLM-sara": ("sarathi", "vllm-dp", "Fig. 8 baseline"),
    "vLLM-LB+vLLM-vani": ("vllm-chunked", "vllm-dp", "Fig. 8 baseline"),
    "vLLM-LB+FB-v": ("fairbatching", "vllm-dp", "Fig. 8: FB engines, vLLM's balancer"),
    "PAB-LB+FB-v": ("fairbatching", "pab", "Fig. 8: the full system, PAB fresh at every arrival"),
    "PAB-LB(0.1s)+FB-v": ("fairbatching", "pab-delayed", "report lag: PAB views refreshed every 0.1 s"),
    "vLLM-LB(fresh)+FB-v": ("fairbatching", "vllm-dp-fresh", "report lag: vLLM's counts fresh at every arrival"),
    "PAB-LB+FB-PAB": ("fairbatching-pab", "pab", "rejection: a request no replica's PAB covers is rejected"),
    "vLLM-LB+FB-PAB": ("fairbatching-pab", "vllm-dp", "rejection without PAB routing: is the gain the router's?"),
}
CORE_CLUSTER = tuple(list(CLUSTER_SYSTEMS)[:4])
SWEEP = tuple(round(0.8 * 1.1 ** i, 4) for i in range(10))  # x the highest shared capacity: 0.8 ... 1.89


def cluster(s: Settings, level: Level, row: dict) -> dict:
    """Fig. 8 under ``level``, on ``s.replicas`` replicas, ``s.replicas`` x the single-node requests per probe:
    the shared capacity (bisection) of each of ``s.cluster_systems``; with ``s.sweep``, also a common grid of
    rates (``s.sweep`` x the highest shared capacity) on which both the paper's peak EffRPS (offered rate x
    attainment) and the shared criterion (stable and attainment >= ATTAINMENT) are read from the same runs."""
    k = s.replicas
    bases = {}
    for label in s.cluster_systems:
        sched, router, _ = CLUSTER_SYSTEMS[label]
        params = {"token_budget": row["sarathi_budget"]} if sched == "sarathi" else \
            VANI_PARAMS if sched == "vllm-chunked" else fb_params(s, level)
        cfg = config(s, level, sched, params, s.n * k)
        bases[label] = dataclasses.replace(cfg, replicas=k, router=router, rate=cfg.rate * k)
    found = capacities(bases, level.metric, s.resolution, s.jobs)
    caps = {k_: v["capacity"] for k_, v in found.items()}
    out = {"replicas": k, "capacity": caps, **cluster_gains(caps)}
    if s.sweep:
        top = max(caps.values()) or bases[s.cluster_systems[0]].rate
        out["sweep"] = effrps_sweep(bases, [round(top * m, 4) for m in s.sweep], level.metric, s.jobs)
        out["sweep_gains"] = {"peak_effrps": cluster_gains({k_: v["peak_effrps"] for k_, v in out["sweep"].items()}),
                              "grid_capacity": cluster_gains({k_: v["grid_capacity"]
                                                              for k_, v in out["sweep"].items()})}
    return out


def cluster_gains(caps: dict) -> dict:
    """The paper's two cluster ratios, and each extra system against vLLM-LB+FB-v, where present."""
    fb = caps.get("vLLM-LB+FB-v", math.nan)
    best = max(caps.get("vLLM-LB+vLLM-sara", math.nan), caps.get("vLLM-LB+vLLM-vani", math.nan))
    return {"pab_lb_vs_vllm_lb_fb_pct": _gain(caps.get("PAB-LB+FB-v", math.nan), fb),
            "pab_lb_vs_best_baseline_pct": _gain(caps.get("PAB-LB+FB-v", math.nan), best),
            "vs_vllm_lb_fb_pct": {k: _gain(v, fb) for k, v in caps.items() if k not in CORE_CLUSTER}}


def effrps_sweep(bases: dict[str, RunConfig], rates: list[float], check: str, jobs: int) -> dict[str, dict]:
    """Every system at every rate of one grid; per system the points, the paper's peak EffRPS (and whether it
    sits at the grid's top rate: then it is a floor, not a peak) and the highest grid rate meeting the shared
    criterion (the grid's coarser version of the shared capacity, from the same runs)."""
    items = [(label, r) for label in bases for r in rates]
    ex = CheckedExecutor(check, jobs)
    try:
        records = ex.map(None, [dataclasses.replace(bases[label], rate=r) for label, r in items])
    finally:
        ex.close()
    out = {label: {"points": []} for label in bases}
    for (label, r), rec in zip(items, records):
        att = rec["metrics"]["attainment"]
        eff = rec["throughput"]["offered_requests_per_s"] * att
        ok = rec["stability"]["verdict"] == "stable" and att >= ATTAINMENT
        out[label]["points"].append({"rate": r, "attainment": att, "eff_rps": eff, "meets": ok,
                                     "verdict": rec["stability"]["verdict"],
                                     "rejected": rec["counts"]["rejected"]})
    for v in out.values():
        pts = v["points"]
        peak = max(pts, key=lambda p: p["eff_rps"])
        v["peak_effrps"], v["peak_at_rate"] = peak["eff_rps"], peak["rate"]
        v["peak_at_top"] = peak["rate"] == rates[-1]
        passing = [p["rate"] for p in pts if p["meets"]]
        v["grid_capacity"] = max(passing) if passing else 0.0
    return out


def _gain(x: float, base: float) -> float:
    return 100.0 * (x / base - 1.0) if base > 0 and math.isfinite(x) else math.nan


LATENCY_LEVELS = ("reference", "overhead", "batch-time")
CLUSTER_LEVELS = ("reference", "overhead", "batch-time")


def ablate(s: Settings) -> dict:
    t0 = time.perf_counter()
    rows, reference = [], None
    for level in s.levels:
        row = run_level(s, level, reference)
        if level == REFERENCE:
            reference = row
        if "latency" in s.parts and level.factor in LATENCY_LEVELS and not row.get("note"):
            row["latency"] = ttft_tail(s, level, row)
        rows.append(row)
        print(line(row, s.budgets), flush=True)
    for row, level in zip(rows, s.levels):
        if "cluster" in s.parts and level.factor in CLUSTER_LEVELS and not row.get("note"):
            row["cluster"] = cluster(s, level, row)
            print(f"cluster {level.name}: {row['cluster']['capacity']}", flush=True)
    return {"case": s.case, "workload": s.workload, "arrivals": s.arrivals, "requests": s.n,
            "budgets": list(s.budgets), "resolution": s.resolution, "attainment": ATTAINMENT, "ttft_slo": s.ttft,
            "tpot_slo": s.tpot, "host_step": HOST_STEP, "rows": rows, "parts": list(s.parts),
            "cluster_systems": list(s.cluster_systems), "sweep": list(s.sweep), "loads": list(s.loads),
            "wall_s": time.perf_counter() - t0}


def header(budgets) -> str:
    return ("factor | level | FB-v | vLLM-sara (budget) | vLLM-vani | FB-v vs best | vani vs sara | Sarathi by budget "
            + "/".join(map(str, budgets)))


def line(row: dict, budgets) -> str:
    if row.get("note") and "identical" not in row["note"]:
        return f"{row['factor']} | {row['level']} | {row['note']}"
    f = lambda x: f"{x:.3f}"
    by = "/".join(f"{row['sarathi_by_budget'][b]:.2f}" for b in budgets)
    src = " (ref.)" if row.get("baselines_from") or row.get("note") else ""
    return (f"{row['factor']} | {row['level']} | {f(row['fb_v'])}{src} | {f(row['vllm_sara'])} "
            f"({row['sarathi_budget']}){src} | {f(row['vllm_vani'])}{src} | {_pct(row['fb_v_gain_pct'])} | "
            f"{_pct(row['vani_vs_sara_pct'])} | {by}")


def _pct(x: float) -> str:
    return f"{x:+.1f}%" if math.isfinite(x) else "n/a"


def report(out: dict) -> str:
    budgets = out["budgets"]
    lines = [f"FairBatching ablation, {out['case']}, {out['workload']} (reference arrivals: {out['arrivals']}), "
             f"TTFT {out['ttft_slo'] * 1e3:.0f} ms / TPOT {out['tpot_slo'] * 1e3:.0f} ms, capacity = highest "
             f"stable rate with attainment >= {out['attainment']:g} (req/s, {out['requests']} requests per probe, "
             f"resolution {out['resolution'] * 100:g}%)", header(budgets)]
    lines += [line(r, budgets) for r in out["rows"]]
    for r in out["rows"]:
        for lat in r.get("latency", ()):
            lines.append(f"P99 TTFT at {lat['rate']:g} req/s ({lat['load']:g} x best baseline), {r['level']}: FB-v "
                         f"{lat['FB-v']['ttft_p99_ms']:.0f} ms, vLLM-sara ({lat['sarathi_budget']}) "
                         f"{lat['vLLM-sara']['ttft_p99_ms']:.0f} ms, "
                         f"vLLM-vani {lat['vLLM-vani']['ttft_p99_ms']:.0f} ms; sara / FB-v = "
                         f"{lat['p99_ttft_sara_over_fb_v']:.2f}x (paper 2.29x); P50 sara / vani "
                         f"{lat['vLLM-sara']['ttft_p50_ms'] / lat['vLLM-vani']['ttft_p50_ms']:.2f}x (paper 1.78x)")
    for r in out["rows"]:
        cl = r.get("cluster")
        if not cl:
            continue
        lines.append(f"cluster of {cl['replicas']}, {r['level']}, shared capacity: " + ", ".join(
            f"{k} {v:.3f}" for k, v in cl["capacity"].items()) + "; " + gains_text(cl))
        for label, v in cl.get("sweep", {}).items():
            lines.append(f"  sweep {label}: peak EffRPS {v['peak_effrps']:.3f} at {v['peak_at_rate']:g} req/s"
                         f"{' (top of the grid: a floor)' if v['peak_at_top'] else ''}, grid capacity "
                         f"{v['grid_capacity']:g}")
        for name, g in cl.get("sweep_gains", {}).items():
            lines.append(f"  by {name.replace('_', ' ')}: {gains_text(g)}")
    lines.append(f"({out['wall_s']:.0f} s)")
    return "\n".join(lines)


def gains_text(g: dict) -> str:
    extra = "".join(f", {k} vs vLLM-LB+FB-v {_pct(v)}" for k, v in g["vs_vllm_lb_fb_pct"].items())
    return (f"PAB-LB vs vLLM-LB (FB-v engines) {_pct(g['pab_lb_vs_vllm_lb_fb_pct'])} (paper +34.9%), PAB-LB+FB-v "
            f"vs best baseline {_pct(g['pab_lb_vs_best_baseline_pct'])} (paper +54.3%){extra}")


def parse_floats(option: str, text: str, count: int | None = None) -> tuple:
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(v > 0 and math.isfinite(v) for v in values) or (count and len(values) != count):
        raise ValueError(f"{option}: write {count or 'one or more'} positive numbers separated by commas, got "
                         f"{text!r}")
    return values


def settings(*, fast: bool = False, case: str | None = None, factors: str | None = None, requests: int | None = None,
             resolution: float | None = None, parts: str | None = None, workload: str = PRESET,
             arrivals: str = "trace", slo: str | None = None, replicas: int = 4, cluster_systems: str | None = None,
             sweep: bool = False, loads: str | None = None, latency_budgets: str | None = None,
             jobs: int = 1) -> Settings:
    """The study's levels and sizes, checked: ``factors``, ``parts``, ``cluster_systems``, ``loads`` and
    ``latency_budgets`` comma-separated, ``slo`` "TTFT,TPOT" in seconds; ``fast`` gives CI sizes."""
    case = case or "llama-3.1-8b/a800"
    if case not in CASES:
        raise ValueError(f"--case: unknown {case!r}; valid: {', '.join(CASES)}")
    known = {lv.factor for lv in LEVELS}
    if factors:
        asked = [x.strip() for x in factors.split(",") if x.strip() and x.strip() != "none"]
        bad = [x for x in asked if x not in known]
        if bad:
            raise ValueError(f"--factors: unknown {', '.join(bad)}; valid: {', '.join(sorted(known - {'reference'}))}")
        levels = tuple(lv for lv in LEVELS if lv == REFERENCE or lv.factor in asked)
    elif fast:
        levels = tuple(lv for lv in LEVELS if lv.factor in FAST_LEVELS)
    else:
        levels = LEVELS
    n = requests or (60 if fast else 300)
    resolution = resolution or (0.25 if fast else 0.04)
    if n < 20:
        raise ValueError(f"--requests must be at least 20, got {n}")
    if not 0 < resolution < 1:
        raise ValueError(f"--resolution must be in (0, 1), e.g. 0.04, got {resolution}")
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    chosen = tuple(x.strip() for x in (parts or ("single,latency" if fast else ",".join(PARTS))).split(",")
                   if x.strip())
    bad = [x for x in chosen if x not in PARTS]
    if bad or "single" not in chosen:
        raise ValueError(f"--parts: {', '.join(bad) or 'single is required'}; valid: {', '.join(PARTS)} "
                         f"(single always runs: the others use its tuned budgets)")
    if workload not in LENGTH_PRESETS:
        raise ValueError(f"--workload: unknown {workload!r}; valid: {', '.join(LENGTH_PRESETS)}")
    if arrivals != "trace":
        parse_arrivals(arrivals)
    if replicas < 2:
        raise ValueError(f"--replicas must be >= 2, got {replicas}")
    ttft, tpot = parse_floats("--slo", slo, 2) if slo else (TTFT, TPOT)
    systems = CORE_CLUSTER
    if cluster_systems:
        asked = tuple(CLUSTER_SYSTEMS) if cluster_systems.strip() == "all" else \
            tuple(x.strip() for x in cluster_systems.split(",") if x.strip())
        bad = [x for x in asked if x not in CLUSTER_SYSTEMS]
        if bad or not asked:
            raise ValueError(f"--cluster-systems: unknown {', '.join(bad) or '(none given)'}; valid: "
                             f"{', '.join(CLUSTER_SYSTEMS)} or all")
        systems = asked
    sweep_rates = (SWEEP[0], SWEEP[4], SWEEP[-1]) if sweep and fast else SWEEP if sweep else ()
    load_list = parse_floats("--loads", loads) if loads else (1.2,)
    budgets = parse_floats("--latency-budgets", latency_budgets) if latency_budgets else ()
    if any(b != int(b) for b in budgets):
        raise ValueError(f"--latency-budgets: token budgets are whole numbers, got {latency_budgets!r}")
    return Settings(case, levels, n, (128, 512) if fast else BUDGETS, resolution, jobs, chosen, replicas, workload,
                    arrivals, ttft, tpot, systems, sweep_rates, load_list, tuple(int(b) for b in budgets))

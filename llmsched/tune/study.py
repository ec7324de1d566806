"""The search: Optuna's TPE over a scheduler's declared parameters, the objective its capacity.

Trial 0 is the untuned setting (the paper's values, or what the user set): its capacity is the floor a tuned
setting must beat, and TPE is told of it (the values it can represent), so the search starts from the paper.
Trials are asked ``batch`` at a time and their capacity searches run side by side (``find_capacities``: one
round's probes in parallel on the executor); the sequence of asks and tells depends only on the seed, the batch
and the probe verdicts, so the answer is the same on any executor and any number of workers. Each trial's search
starts at the best capacity found so far (fewer probes: a good setting brackets in one doubling). A setting that
meets the SLOs at no rate scores 0. Probes go through the shared probe cache: a repeated setting costs nothing.
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass, field

from ..capacity.probe import at_rate
from ..capacity.rate_search import CapacityResult, find_capacities
from ..capacity.slo import RATIOS, SLO
from ..run_config import RunConfig
from ..schedulers.tunable import Choice, FloatRange, IntRange
from .space import Param, apply

DEFAULT_BUDGET = 24
DEFAULT_BATCH = 2
DEFAULT_RESOLUTION = 0.05
STARTUP_TRIALS = 6  # random trials before TPE models the history (Optuna's default is 10: too many for 24)


@dataclass
class Trial:
    number: int
    values: dict            # the tuned parameters' values in this trial (the untuned trial: its own)
    capacity: float | None  # None: no rate met the SLOs
    interval: tuple
    probes: int
    note: str = ""
    origin: str = "tpe"     # "untuned" for trial 0
    result: CapacityResult | None = field(default=None, repr=False)

    @property
    def score(self) -> float:
        return self.capacity or 0.0

    def to_dict(self) -> dict:
        return {"number": self.number, "origin": self.origin, "values": self.values, "capacity": self.capacity,
                "interval": list(self.interval), "probes": self.probes, "note": self.note}


@dataclass
class TuneResult:
    scheduler: str
    unit: str
    params: list[Param]
    trials: list[Trial]
    seed: int
    seeds: tuple
    resolution: float
    wall_s: float
    probe_runs: int

    @property
    def untuned(self) -> Trial:
        return self.trials[0]

    @property
    def best(self) -> Trial:
        """The highest capacity; a tie goes to the earlier trial (the untuned one first)."""
        return max(self.trials, key=lambda t: (t.score, -t.number))


def distribution(rng):
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    if isinstance(rng, IntRange):
        return IntDistribution(rng.low, rng.high, log=rng.log)
    if isinstance(rng, FloatRange):
        return FloatDistribution(rng.low, rng.high, log=rng.log)
    if isinstance(rng, Choice):
        return CategoricalDistribution(list(rng.options))
    raise TypeError(f"unknown range {rng!r}")


def starting_at(cfg: RunConfig, x: float | None) -> RunConfig:
    """``cfg`` with its search's start at ``x`` (a rate, or a closed loop's concurrency)."""
    if x is None:
        return cfg
    if cfg.concurrency is not None:
        return dataclasses.replace(cfg, concurrency=max(1, int(x)))
    return at_rate(cfg, x)


def tune(base: RunConfig, slos: list[SLO], params: list[Param], budget: int = DEFAULT_BUDGET, seed: int = 0,
         seeds=(0,), resolution: float = DEFAULT_RESOLUTION, executor=None, cache=None, batch: int = DEFAULT_BATCH,
         progress: bool = False, max_rate: float | None = None) -> TuneResult:
    """Search ``params`` of ``base.scheduler`` for the highest capacity under ``slos``: ``budget`` capacity
    searches, the first the untuned setting."""
    import optuna
    if not isinstance(budget, int) or budget < 1:
        raise ValueError(f"--budget {budget}: give at least 1 capacity search (the first is the untuned setting)")
    if batch < 1:
        raise ValueError(f"--batch {batch}: give at least 1 trial per round")
    if not params:
        raise ValueError("tune: no parameter to search")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    t0 = time.perf_counter()
    hits0 = cache.hits if cache is not None else 0
    sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(STARTUP_TRIALS, max(1, budget // 3)),
                                         multivariate=True, group=True, constant_liar=True)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    dists = {p.name: distribution(p.range) for p in params}

    def search(configs: dict[str, RunConfig]) -> dict[str, CapacityResult]:
        return find_capacities(configs, slos, resolution, seeds, executor, cache, progress=progress,
                               max_rate=max_rate)

    untuned_values = {p.name: p.start for p in params}
    first = search({"untuned": base})["untuned"]
    trials = [_trial(0, untuned_values, first, "untuned")]
    known = {p.name: p.start for p in params if p.range.contains(p.start)}
    study.add_trial(optuna.trial.create_trial(params=known, distributions={k: dists[k] for k in known},
                                              value=trials[0].score))
    best = trials[0].capacity
    while len(trials) < budget:
        asked = [study.ask(dists) for _ in range(min(batch, budget - len(trials)))]
        configs = {f"trial {len(trials) + i}": starting_at(apply(base, t.params, params), best)
                   for i, t in enumerate(asked)}
        results = search(configs)
        for (label, result), t in zip(results.items(), asked):
            trial = _trial(len(trials), dict(t.params), result)
            trials.append(trial)
            study.tell(t, trial.score)
            if trial.capacity is not None and (best is None or trial.capacity > best):
                best = trial.capacity
    runs = (cache.hits - hits0 if cache is not None else 0)
    return TuneResult(base.scheduler, first.unit, params, trials, seed, tuple(seeds), resolution,
                      time.perf_counter() - t0, runs)


def _trial(number: int, values: dict, result: CapacityResult, origin: str = "tpe") -> Trial:
    return Trial(number, values, result.capacity, result.interval, len(result.probes), result.note, origin, result)


def best_probe(trials: list[Trial], slos: list[SLO]) -> str:
    """The probe of any trial that came closest to its SLOs (the worst SLO's value over its limit), for the
    message when no setting meets them."""
    best = None
    for t in trials:
        for p in t.result.probes if t.result else ():
            worst = 0.0 if p.verdict == "stable" else 1.0
            for s in slos:
                v = p.values.get(s.key, math.nan)
                if math.isnan(v):
                    ratio = math.inf
                elif s.metric in RATIOS:
                    ratio = s.limit / v if v > 0 else math.inf
                else:
                    ratio = v / s.limit
                worst = max(worst, ratio)
            if best is None or worst < best[0]:
                best = (worst, t, p)
    if best is None:
        return "no probe ran"
    _, t, p = best
    shown = ", ".join(f"{s.key} {p.values.get(s.key, math.nan):g}{'' if s.metric in RATIOS else ' s'} "
                      f"(limit {s.limit:g})" for s in slos)
    return (f"closest probe: trial {t.number} ({_values_text(t.values)}) at {p.rate:g}: {p.verdict}"
            + (f", {shown}" if shown else ""))


def _values_text(values: dict) -> str:
    return ", ".join(f"{k}={_short(v)}" for k, v in values.items())


def _short(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)

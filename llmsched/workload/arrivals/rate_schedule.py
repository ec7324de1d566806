"""``--rate-schedule``: a rate that changes with time, written as one base and any number of bursts, ``;`` between
terms.

Bases (exactly one):

* ``START:RATE,...`` steps: RATE requests/s from each START (seconds; the first at 0) to the next, the last forever;
* ``stages:RATE@DURATION,...`` back-to-back stages, as inference-perf's ``load.stages`` (rate, duration), the rate 0
  after the last: a run without ``--num-requests`` or ``--duration`` ends with them;
* ``diurnal:peak=R,trough=R[,period=S][,peak_at=S]`` the sinusoid ``(peak+trough)/2 + (peak-trough)/2 *
  cos(2 pi (t - peak_at) / period)`` requests/s: ``period`` 86400 s (a day) and ``peak_at`` half a period (a run
  starting at the trough) unless given;
* a path ending in ``.yaml``, ``.yml`` or ``.json``: an inference-perf config whose ``load.stages`` are read as
  ``stages:`` are, with the pause inference-perf makes between two stages (``load.interval``, default 1 s, plus the
  1 s lead each stage gives its first request: ``loadgen/load_generator.py``'s ``run_stage`` and ``mp_run``); the
  wait for a stage's requests to finish before the next starts depends on the server and is not modelled.

Bursts (any number, not overlapping): ``burst:at=T,x=K,for=D`` multiplies the rate by K on ``[T, T + D)``.

Example: ``diurnal:peak=48,trough=12;burst:at=43200,x=3,for=600`` is a day at 30 requests/s on average, 4:1 from
peak to trough, with a threefold burst of ten minutes at noon.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llmsched.user_files import read_user_file
from llmsched.workload.arrivals.rate_shape import RateShape, Sinusoid

DAY = 86400.0
FILE_SUFFIXES = (".yaml", ".yml", ".json")
STAGE_LEAD = 1.0  # inference-perf's run_stage: the first request of a stage is timed from 1 s after it starts
DEFAULT_INTERVAL = 1.0  # inference-perf's LoadConfig.interval default: seconds between stages
UNSUPPORTED_LOADS = {"concurrent": "a closed loop: use --concurrency N --num-requests M",
                     "trace_replay": "a trace's own times: use --trace FILE",
                     "trace_session_replay": "sessions replayed from a trace: use --trace FILE"}
DIURNAL_KEYS = ("peak", "trough", "period", "peak_at")
BURST_KEYS = ("at", "x", "for")
EXAMPLE = "'0:2,300:4', 'stages:2@60,4@60' or 'diurnal:peak=48,trough=12;burst:at=43200,x=3,for=600'"


@dataclass(frozen=True)
class Burst:
    at: float
    factor: float
    length: float

    @property
    def end(self) -> float:
        return self.at + self.length


@dataclass(frozen=True)
class RateSchedule:
    """A parsed schedule: its rate as a ``RateShape``, the bursts in it and what its base was."""

    shape: RateShape
    bursts: tuple[Burst, ...] = ()
    base: str = "steps"  # steps, stages, diurnal or the inference-perf file read
    load_type: str = "constant"  # an inference-perf file's load.type (its default for stages: text), which
    # --arrival inference-perf times each stage's requests by (stage_counts.py)

    def check_run(self, duration: float | None = None, num_requests: int | None = None) -> None:
        """A burst must start while the run's arrivals still come: before ``duration``, or before the time the
        ``num_requests``-th arrival is expected."""
        if duration is not None:
            end, what = duration, f"the run's arrivals end at --duration {duration:g} s"
        elif num_requests is not None and num_requests < self.shape.total:
            end = float(self.shape.inverse(np.array([float(num_requests)]))[0])
            what = f"request {num_requests} (the last) is expected at {end:.6g} s"
        else:
            return
        for b in self.bursts:
            if b.at >= end:
                raise ValueError(f"burst at {b.at:g} s is outside the run: {what}; move the burst earlier or run "
                                 f"longer")

    def describe(self) -> dict:
        return {"base": self.base, "bursts": [{"at": b.at, "x": b.factor, "for": b.length} for b in self.bursts],
                **self.shape.describe()}


def parse_rate_schedule(text: str) -> RateSchedule:
    """A schedule's text (module docstring) as a RateSchedule; a ValueError names the term that is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"write a rate schedule, e.g. {EXAMPLE}")
    bases, bursts, load_type = [], [], "constant"
    for term in (t.strip() for t in text.split(";")):
        if not term:
            raise ValueError(f"an empty term between two ';'; write terms like {EXAMPLE}")
        kind, _, body = term.partition(":")
        kind = kind.strip().lower()
        if kind == "burst":
            bursts.append(parse_burst(body))
        elif kind == "stages":
            bases.append(("stages", stages_shape(parse_stages(body))))
        elif kind == "diurnal":
            bases.append(("diurnal", diurnal_shape(body)))
        elif term.lower().endswith(FILE_SUFFIXES):
            stages, gap, where, load_type = read_stage_file(term)
            bases.append((f"inference-perf {term}", stages_shape(stages, gap, where)))
        else:
            bases.append(("steps", steps_shape(term)))
    if len(bases) != 1:
        raise ValueError(f"give exactly one base (START:RATE steps, stages:, diurnal: or an inference-perf file) "
                         f"and any bursts; this schedule has {len(bases)} bases")
    base, shape = bases[0]
    return RateSchedule(with_bursts(shape, bursts), tuple(sorted(bursts, key=lambda b: b.at)), base, load_type)


def number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} {text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be finite, got {text.strip()!r}")
    return value


def steps_shape(text: str) -> RateShape:
    """``START:RATE,...``."""
    try:
        pairs = [tuple(float(x) for x in part.split(":")) for part in text.split(",")]
        if any(len(p) != 2 for p in pairs):
            raise ValueError
    except ValueError:
        raise ValueError(f"write START:RATE pairs, e.g. '0:2,300:4,600:1' (or {EXAMPLE})") from None
    starts = [s for s, _ in pairs]
    for s, r in pairs:
        if not (r >= 0 and math.isfinite(r)):
            raise ValueError(f"the rate from {s:g} s is {r!r}: a rate must be a finite number of requests/s >= 0")
    if starts[0] != 0:
        raise ValueError(f"the first step must start at t=0, got {starts[0]:g}")
    for i, (a, b) in enumerate(zip(starts, starts[1:])):
        if not (b > a and math.isfinite(b)):
            raise ValueError(f"step starts must be finite and strictly increasing: {b:g} (step {i + 2}) comes after "
                             f"{a:g}; list the steps in time order, one per start")
    if not any(r > 0 for _, r in pairs):
        raise ValueError("every step has rate 0, so no request would ever arrive")
    return RateShape(tuple(starts), tuple(r for _, r in pairs))


def parse_stages(text: str) -> list[tuple[float, float]]:
    """``RATE@DURATION,...`` as (rate, duration) pairs."""
    stages = []
    for i, part in enumerate(text.split(","), 1):
        rate, at, duration = part.partition("@")
        if not at:
            raise ValueError(f"stage {i} {part.strip()!r}: write RATE@DURATION (requests/s @ seconds), e.g. "
                             f"'stages:2@60,4@60'")
        stages.append((number(rate, f"stage {i}'s rate"), number(duration, f"stage {i}'s duration")))
    return stages


def stages_shape(stages: list[tuple[float, float]], gap: float = 0.0, where: str = "stage") -> RateShape:
    """Stages back to back (``gap`` seconds at rate 0 between two), the rate 0 after the last."""
    starts, levels, t = [], [], 0.0
    for i, (rate, duration) in enumerate(stages):
        label = f"{where} {i + 1}" if where == "stage" else f"{where}[{i}]"
        if not rate >= 0:
            raise ValueError(f"{label}: rate {rate:g} is negative; a rate is requests/s >= 0")
        if not duration > 0:
            raise ValueError(f"{label}: duration {duration:g} s; a stage lasts a positive number of seconds")
        if i and gap:
            starts.append(t)
            levels.append(0.0)
            t += gap
        starts.append(t)
        levels.append(rate)
        t += duration
    if not any(levels):
        raise ValueError("every stage has rate 0, so no request would ever arrive")
    return RateShape(tuple(starts) + (t,), tuple(levels) + (0.0,))


def key_values(text: str, keys: tuple[str, ...], what: str) -> dict[str, float]:
    values = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        key = key.strip().lower().replace("-", "_")
        if not eq or key not in keys:
            raise ValueError(f"{what}: {part.strip()!r} is not KEY=VALUE with KEY one of {', '.join(keys)}")
        if key in values:
            raise ValueError(f"{what}: {key} is given twice")
        values[key] = number(value, f"{what} {key}")
    return values


def diurnal_shape(text: str) -> RateShape:
    values = key_values(text, DIURNAL_KEYS, "diurnal")
    missing = [k for k in ("peak", "trough") if k not in values]
    if missing:
        raise ValueError(f"diurnal needs {' and '.join(missing)} (requests/s), e.g. 'diurnal:peak=48,trough=12'")
    peak, trough = values["peak"], values["trough"]
    period = values.get("period", DAY)
    if trough < 0:
        raise ValueError(f"diurnal trough {trough:g} is negative; a rate is requests/s >= 0")
    if peak < trough:
        raise ValueError(f"diurnal peak {peak:g} is below its trough {trough:g}; give peak >= trough")
    if peak <= 0:
        raise ValueError("diurnal peak 0: no request would ever arrive; give a peak > 0")
    if period <= 0:
        raise ValueError(f"diurnal period {period:g} s: a period is a positive number of seconds (a day is 86400)")
    peak_at = values.get("peak_at", period / 2)
    return RateShape((0.0,), (1.0,), Sinusoid(peak, trough, period, peak_at))


def parse_burst(text: str) -> Burst:
    values = key_values(text, BURST_KEYS, "burst")
    missing = [k for k in BURST_KEYS if k not in values]
    if missing:
        raise ValueError(f"burst needs {', '.join(missing)}: 'burst:at=T,x=K,for=D' multiplies the rate by K for D "
                         f"seconds from T")
    burst = Burst(values["at"], values["x"], values["for"])
    if burst.at < 0:
        raise ValueError(f"burst at {burst.at:g} s: a burst starts at a time >= 0")
    if burst.factor < 0:
        raise ValueError(f"burst x={burst.factor:g}: the factor is a rate multiplier >= 0")
    if burst.length <= 0:
        raise ValueError(f"burst for={burst.length:g} s: a burst lasts a positive number of seconds")
    return burst


def with_bursts(shape: RateShape, bursts: list[Burst]) -> RateShape:
    """``shape`` with each burst's factor on its interval: new pieces at the bursts' edges."""
    if not bursts:
        return shape
    ordered = sorted(bursts, key=lambda b: b.at)
    for a, b in zip(ordered, ordered[1:]):
        if b.at < a.end:
            raise ValueError(f"bursts at {a.at:g} s (for {a.length:g} s) and at {b.at:g} s overlap; give bursts that "
                             f"do not overlap (one burst with the combined factor for the common part)")
    if shape.end < math.inf:
        for b in ordered:
            if b.at >= shape.end:
                raise ValueError(f"burst at {b.at:g} s starts after the schedule's rate has fallen to 0 for good (at "
                                 f"{shape.end:g} s); move it inside the schedule")
    edges = sorted(set(shape.starts) | {b.at for b in ordered} | {b.end for b in ordered})
    levels = []
    for t in edges:
        level = float(shape.rate(t)) if shape.wave is None else float(shape.levels[
            int(np.searchsorted(shape.starts, t, side="right")) - 1])
        for b in ordered:
            if b.at <= t < b.end:
                level *= b.factor
        levels.append(level)
    if not any(levels):
        raise ValueError("the bursts set the rate to 0 everywhere, so no request would ever arrive")
    return RateShape(tuple(edges), tuple(levels), shape.wave)


def read_stage_file(path: str) -> tuple[list[tuple[float, float]], float, str, str]:
    """An inference-perf config's ``load.stages`` (each ``rate`` and ``duration``), the pause between two stages,
    the prefix its errors name fields by and its ``load.type`` (constant or poisson)."""
    data = read_config_file(Path(path))
    load = data.get("load", data) if isinstance(data, dict) else None
    where = f"{path}: load" if isinstance(data, dict) and "load" in data else f"{path}:"
    if not isinstance(load, dict) or not isinstance(load.get("stages"), list) or not load["stages"]:
        raise ValueError(f"{path}: no load.stages list; an inference-perf config gives load: stages: - rate: R "
                         f"duration: S")
    kind = str(load.get("type", "constant")).lower()
    if kind in UNSUPPORTED_LOADS:
        raise ValueError(f"{where}.type {kind}: its stages are not rates; this is {UNSUPPORTED_LOADS[kind]}")
    if kind not in ("constant", "poisson"):
        raise ValueError(f"{where}.type {kind!r}: inference-perf's rate loads are constant and poisson")
    stages = []
    for i, stage in enumerate(load["stages"]):
        label = f"{where}.stages[{i}]"
        if not isinstance(stage, dict) or "rate" not in stage or "duration" not in stage:
            raise ValueError(f"{label}: a stage needs rate (requests/s) and duration (seconds)")
        stages.append((file_number(stage["rate"], f"{label}.rate"), file_number(stage["duration"],
                                                                               f"{label}.duration")))
    interval = file_number(load.get("interval", DEFAULT_INTERVAL), f"{where}.interval")
    if interval < 0:
        raise ValueError(f"{where}.interval {interval:g}: the pause between stages is seconds >= 0")
    try:
        stages_shape(stages, where=f"{where}.stages")
    except ValueError as e:
        raise ValueError(str(e)) from None
    return stages, interval + STAGE_LEAD, f"{where}.stages", kind


def read_config_file(path: Path):
    """A YAML or JSON file's data (safe loading: data only); errors name the file."""
    text = read_user_file(path, "the rate schedule file")
    if path.suffix == ".json":
        import json
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    import yaml
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{path}{line}: not valid YAML ({getattr(e, 'problem', None) or e})") from None


def file_number(value, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{label} = {value!r}: must be a number")
    return float(value)

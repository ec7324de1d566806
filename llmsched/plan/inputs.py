"""What a plan is asked for, checked before any probe: the target rates (or a trace's own), the prices, the
frontier's latency metric, and every candidate runnable as far as can be told without simulating."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ..capacity.probe import check_base
from ..capacity.slo import RATIOS, canonical_metric
from ..experiment import build_source
from ..hardware.models import model as model_preset
from ..hardware.prices import load_prices


def target_rates(text: str) -> list[float]:
    """``--target-rate``: R, R1,R2,... or START:STOP:STEP, in req/s."""
    try:
        if ":" in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if not (step > 0 and stop >= start):
                raise ValueError
            rates = [round(start + i * step, 10) for i in range(int(round((stop - start) / step)) + 1)
                     if start + i * step <= stop + 1e-9]
        else:
            rates = [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--target-rate {text!r}: give R, R1,R2,... or START:STOP:STEP with STEP > 0") from None
    if not rates or any(not r > 0 for r in rates):
        raise ValueError(f"--target-rate {text!r}: rates must be positive req/s")
    return rates


def trace_rate(cfg) -> float:
    """The mean arrival rate of the trace ``cfg`` replays (requests over the span of their arrivals)."""
    times = build_source(dataclasses.replace(cfg, rate=None)).arrival_times
    span = float(times.max() - times.min())
    if not span > 0:
        raise ValueError(f"--trace {cfg.trace}: its arrivals span no time; give --target-rate")
    return (len(times) - 1) / span


def plan_rates(text: str | None, base) -> list[float]:
    """The rates to plan for: ``text`` (``--target-rate``), else the mean rate of the trace ``base`` replays."""
    if text is not None:
        return target_rates(text)
    if base.trace:
        return [round(trace_rate(base), 6)]
    raise ValueError("plan needs --target-rate (or --trace to plan for the trace at its own rate)")


def read_prices(path: str | None, gpus=()):
    """--prices FILE over the built-in table, with a price for each of ``gpus`` (one without is an error now,
    before any simulation); a path that is no file is named as what it is."""
    if path is None or Path(path).exists():
        prices = load_prices(path)
        for g in dict.fromkeys(gpus):
            prices.price(g)
        return prices
    if not path.lstrip().startswith(("{", "[")):
        raise ValueError(f"--prices {path}: no such file; give a JSON file of USD per GPU-hour")
    try:
        json.loads(path)
    except ValueError as e:
        raise ValueError(f"--prices {path!r}: neither a file nor valid JSON ({e}); give a JSON file of USD per "
                         f"GPU-hour, e.g. one holding {{\"a100\": 1.79}}") from None
    raise ValueError(f"--prices {path!r}: JSON, not a file; --prices takes a JSON file: write this to one and give "
                     f"its path")


def pareto_metric(name: str | None, slos) -> str:
    """The frontier's latency: ``name`` (``--pareto-metric``), else the first latency SLO, else e2e_p90."""
    if name is None:
        latency = [s.metric for s in slos if s.metric not in RATIOS and s.tier is None]
        return latency[0] if latency else "e2e_p90"
    metric = canonical_metric(name)
    if metric in RATIOS:
        raise ValueError(f"--pareto-metric {name}: give a latency (e.g. ttft_p90), not a fraction")
    return metric


def check_runnable(bases: dict) -> None:
    """What fails before any simulation, said now: options a probe cannot honour (--sketch), an unknown model
    (the error lists the valid ones)."""
    for cfg in bases.values():
        check_base(cfg)
    model_preset(next(iter(bases.values())).model)

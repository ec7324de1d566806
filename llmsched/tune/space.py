"""The search space of one scheduler: its declared ranges (``Scheduler.tunable``), narrowed by the user.

Each parameter is the scheduler's own or a run field (``max_num_seqs``...); the starting point is the value the
run would use untuned (the registered default, or what ``--param``/run options set). A range the user gives is
checked by building the scheduler (or the run field) at both ends, so a bound the policy rejects is refused up
front with the policy's own reason.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..run_config import RUN_FIELDS, RunConfig, check_field
from ..schedulers.registry import create_scheduler, scheduler_info
from ..schedulers.tunable import Choice, FloatRange, IntRange, Range


@dataclass(frozen=True)
class Param:
    name: str
    range: Range
    run_field: bool  # a RunConfig field (max_num_seqs...) rather than a scheduler parameter
    start: object    # the untuned run's value (it may lie outside the range: deferred-prefill's K="auto")


def declared(scheduler: str) -> dict[str, Range]:
    return dict(getattr(scheduler_class(scheduler), "tunable", {}) or {})


def scheduler_class(name: str):
    return type(create_scheduler(name))


def parse_ranges(items: list[str]) -> dict[str, tuple[float, float]]:
    """``NAME=LOW:HIGH`` items (``--range``)."""
    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        lo, sep2, hi = text.partition(":")
        try:
            if not (sep and sep2 and name.strip()):
                raise ValueError
            bounds = float(lo), float(hi)
        except ValueError:
            raise ValueError(f"--range {item!r}: write NAME=LOW:HIGH, e.g. token_budget=128:2048") from None
        if not bounds[0] <= bounds[1]:
            raise ValueError(f"--range {item!r}: LOW must be <= HIGH")
        out[name.strip().replace("-", "_")] = bounds
    return out


def search_space(base: RunConfig, only: list[str] | None = None,
                 ranges: dict[str, tuple[float, float]] | None = None) -> list[Param]:
    """The parameters to tune for ``base.scheduler``: all it declares, or ``only`` those; ``ranges`` narrow or
    widen them (each end checked against the policy)."""
    name = base.scheduler
    table = declared(name)
    own = set(scheduler_info(name)["params"])
    if not table:
        raise ValueError(f"scheduler {name!r} declares no tunable parameters (its class has no `tunable`); tune "
                         f"one that does: {', '.join(tunable_schedulers())}")
    chosen = list(table) if not only else only
    for key in list(chosen) + list(ranges or {}):
        if key not in table:
            what = (f"a parameter of {name!r} but not a tunable one" if key in own else
                    f"a run field {name!r} does not declare tunable" if key in RUN_FIELDS else
                    f"not a parameter of {name!r} nor a run field")
            raise ValueError(f"{key!r} is {what}; its tunable parameters: {', '.join(table)}")
    params = []
    for key in dict.fromkeys(chosen):
        rng = table[key]
        if ranges and key in ranges:
            rng = rng.with_bounds(*ranges[key])
            for end in (rng.low, rng.high):
                check_value(base, key, end, key not in own)
        start = getattr(base, key) if key not in own else base.scheduler_params.get(
            key, scheduler_info(name)["params"][key])
        params.append(Param(key, rng, key not in own, start))
    return params


def check_value(base: RunConfig, key: str, value, run_field: bool) -> None:
    """A ValueError naming the bound when the policy (or the run field's schema) refuses ``value``."""
    try:
        if run_field:
            check_field(key, value)
        else:
            create_scheduler(base.scheduler, **{**base.scheduler_params, key: value})
    except (ValueError, TypeError) as e:
        raise ValueError(f"--range {key}: {value:g} is not a valid {key} for {base.scheduler!r} ({e})") from None


def apply(base: RunConfig, values: dict, params: list[Param]) -> RunConfig:
    """``base`` with ``values`` set (scheduler parameters merged into its own)."""
    by = {p.name: p for p in params}
    run = {k: v for k, v in values.items() if by[k].run_field}
    sched = {k: v for k, v in values.items() if not by[k].run_field}
    return dataclasses.replace(base, scheduler_params={**base.scheduler_params, **sched}, **run)


def split(values: dict, params: list[Param]) -> tuple[dict, dict]:
    """(scheduler parameters, run fields) of ``values``."""
    by = {p.name: p for p in params}
    return ({k: v for k, v in values.items() if not by[k].run_field},
            {k: v for k, v in values.items() if by[k].run_field})


def tunable_schedulers() -> list[str]:
    from ..schedulers.registry import scheduler_names
    return [n for n in scheduler_names() if declared(n) and not n.startswith("test-")]


def describe(params: list[Param]) -> str:
    return ", ".join(f"{p.name} {p.range.text()}" + f" from {p.start}"
                     for p in params)


__all__ = ["Choice", "FloatRange", "IntRange", "Param", "apply", "declared", "parse_ranges", "search_space",
           "split", "tunable_schedulers"]

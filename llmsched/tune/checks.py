"""The tuned setting on other traffic (``llmsched tune --check-on``): the untuned and the best setting measured
again with some run options changed (another seed, workload or rate process), on seeds of their own, so a gain
that holds only for the traffic it was tuned on shows."""
from __future__ import annotations

from ..capacity.rate_search import find_capacities
from .space import Param, apply


def check_on(checks: list, best_values: dict, params: list[Param], slos, resolution: float, num_seeds: int,
             executor=None, cache=None, max_rate: float | None = None) -> list[dict]:
    """For each ``(text, config)`` of ``checks`` (``text`` as the user wrote the change), the capacities of the
    untuned setting (``config``) and of ``best_values`` applied to it, each on ``num_seeds`` seeds from the
    config's own."""
    out = []
    for text, cfg in checks:
        seeds = tuple(range(cfg.seed, cfg.seed + num_seeds))
        found = find_capacities({"untuned": cfg, "best": apply(cfg, best_values, params)}, slos, resolution,
                                seeds, executor, cache, max_rate=max_rate)
        out.append({"check_on": text, "seeds": list(seeds), "untuned": found["untuned"].capacity,
                    "best": found["best"].capacity, "notes": {k: v.note for k, v in found.items() if v.note}})
    return out

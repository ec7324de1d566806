"""What a tuning prints and writes besides best.json: every trial's capacity and values, the best against the
untuned, the checks on other traffic, and history.json's record of the whole search."""
from __future__ import annotations

import dataclasses

from .study import TuneResult


def history(result: TuneResult, base, slos, batch: int, budget: int, checked: list[dict]) -> dict:
    """history.json: the search's settings, its space, every trial and the checks on other traffic."""
    return {"scheduler": base.scheduler, "unit": result.unit, "slos": [s.text for s in slos],
            "search_seed": result.seed, "batch": batch, "budget": budget, "seeds": list(result.seeds),
            "resolution": result.resolution, "wall_s": result.wall_s,
            "space": {p.name: {"range": p.range.text(), "start": p.start, "run_field": p.run_field}
                      for p in result.params},
            "base_config": dataclasses.asdict(base), "best_trial": result.best.number,
            "trials": [t.to_dict() for t in result.trials], "checks": checked}


def lines(result: TuneResult, checked: list[dict]) -> list[str]:
    """The trials (the best marked *), the best against the untuned, and each check's capacities."""
    untuned, best = result.untuned, result.best
    names = [p.name for p in result.params]
    out = [f"{'trial':>5}  {'capacity':>9}  " + "  ".join(f"{n:>14}" for n in names) + "  probes"]
    for t in result.trials:
        cap = "none" if t.capacity is None else f"{t.capacity:.4g}"
        mark = " *" if t is best else ""
        out.append(f"{t.number:>5}  {cap:>9}  " + "  ".join(f"{short(t.values.get(n)):>14}" for n in names)
                   + f"  {t.probes}{mark}")
    gain = (f" ({best.capacity / untuned.capacity:.3f}x the untuned {untuned.capacity:.4g})"
            if best.capacity and untuned.capacity else "")
    cap = "none" if best.capacity is None else f"{best.capacity:.4g} {result.unit}"
    out.append(f"best: trial {best.number}, capacity {cap}{gain}")
    for c in checked:
        u, b = c["untuned"], c["best"]
        out.append(f"check on {c['check_on']} (seeds {', '.join(map(str, c['seeds']))}): untuned "
                   f"{'none' if u is None else f'{u:.4g}'}, best {'none' if b is None else f'{b:.4g}'} {result.unit}")
    return out


def short(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)

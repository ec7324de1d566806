"""A fleet run's requests by pool: requests.csv's pool column and each pool's request counts in summary.json.

The log keeps each request's replica (an index unique across the fleet); the fleet gives each replica's pool
(``RequestLog.pools``: the pool names and, per replica index, its pool's position among them), so the pool column
costs a run nothing until it is written. A request that found no replica serving (replica -1) has no pool.
"""
from __future__ import annotations

import numpy as np

from ..request import Status

POOL_COLUMN = "pool"
OUTCOMES = (("finished", int(Status.FINISHED)), ("rejected", int(Status.REJECTED)),
            ("unfinished", int(Status.UNFINISHED)), ("aborted", int(Status.ABORTED)))


def pool_index(pools: tuple[list[str], list[int]], replica: np.ndarray) -> np.ndarray:
    """Each request's pool as an index into the names, -1 for none."""
    _, of = pools
    table = np.asarray(list(of) + [-1], dtype=np.int64)  # replica -1 reads the last entry: no pool
    return table[np.where(replica >= 0, replica, len(of))]


def pool_names(pools: tuple[list[str], list[int]], replica: np.ndarray) -> list[str]:
    names = list(pools[0]) + [""]
    return [names[i] for i in pool_index(pools, replica).tolist()]


def pool_counts(pools: tuple[list[str], list[int]], replica: np.ndarray, status: np.ndarray) -> dict:
    """Per pool, its requests finished, rejected, unfinished and aborted (every request the run recorded)."""
    where = pool_index(pools, replica)
    out = {}
    for i, name in enumerate(pools[0]):
        mine = status[where == i]
        out[name] = {key: int((mine == code).sum()) for key, code in OUTCOMES}
    return out


def add_counts(total: dict, more: dict) -> dict:
    for name, counts in more.items():
        mine = total.setdefault(name, dict.fromkeys(counts, 0))
        for key, n in counts.items():
            mine[key] += n
    return total


def fleet_section(fleet: dict, counts: dict) -> dict:
    """summary.json's ``fleet``: the fleet's accounting (``FleetState.summary``) with each pool's request counts."""
    pools = {name: {**counts.get(name, {key: 0 for key, _ in OUTCOMES}), **figures}
             for name, figures in fleet["pools"].items()}
    return {**fleet, "pools": pools}


def with_cost_per_good(summary: dict) -> None:
    """An autoscaled run's summary: its fleet's cost (GPU-hours, USD) with the SLO attainment over the run and the
    requests that met their SLOs per dollar (the measurement window's; the whole run without a warm-up)."""
    cost = summary.get("fleet", {}).get("cost")
    if cost is None:
        return
    cost = summary["fleet"]["cost"] = dict(cost)
    good = summary["goodput"]["good_requests"]
    cost["slo_attainment"] = summary["goodput"]["fraction"]
    cost["good_requests"] = good
    cost["good_per_usd"] = good / cost["usd"] if cost["usd"] else float("nan")

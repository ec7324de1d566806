"""Per-request SLO checks of FairBatching's evaluation (Lyu et al. §5.1; which TPOT it checks is a gap in the paper), from a
run's RequestLog.

A request meets its SLO when it finished, its TTFT is within target, and its TPOT is, by one of:

* **M2, envelope** (the default, a gap in the paper; our resolution): max_j (t_j − arrival − TTFT_slo)/j ≤ TPOT_slo, i.e. every
  token j ≥ 1 is out by its envelope deadline arrival + TTFT_slo + j·TPOT_slo — what FairBatching
  schedules for;
* **M1, cumulative**: max_j (t_j − t_0)/j ≤ TPOT_slo, the paper's §5.1 "maximum TPOT over all output
  tokens" measured from the first token;
* **M3, mean**: (t_last − t_0)/(n − 1) ≤ TPOT_slo, the foundation's standard ``tpot`` (for reference).

Token times are rebuilt from the log's first-token column plus its inter-token gaps, so the run must
keep gaps (not ``--sketch``). Rejected and unfinished requests violate (Lyu et al. §5.1).
"""
from __future__ import annotations

import numpy as np

from ..request import Status
from .requests import RequestLog

CHECKS = ("envelope", "cumulative", "mean")


def tpot_values(log: RequestLog, ttft_slo: float | None = None) -> dict[str, np.ndarray]:
    """Per request: its envelope, cumulative-max and mean TPOT (s); NaN for one-token or unfinished requests.

    ``ttft_slo`` fills the requests that carry no TTFT target of their own.
    """
    n = len(log)
    gaps = log.gaps_of(None)
    num = log.column("num_gaps")
    off = log.column("gap_offset")
    first = log.column("first_token")
    arrival = log.column("arrival")
    target = log.column("ttft_slo").copy()
    if ttft_slo is not None:
        target[np.isnan(target)] = ttft_slo
    env = np.full(n, np.nan)
    cum = np.full(n, np.nan)
    has = num > 0
    if has.any():
        idx = np.flatnonzero(has)
        counts = num[idx]
        starts = np.cumsum(np.r_[0, counts[:-1]])
        take = np.repeat(off[idx] - starts, counts) + np.arange(counts.sum())
        g = gaps[take]
        owner = np.repeat(np.arange(len(idx)), counts)
        cs = np.cumsum(g)
        before = np.r_[0.0, cs][starts]            # cumulative sum before each request's first gap
        since_first = cs - before[owner]            # t_j − t_0
        j = np.arange(len(g)) - starts[owner] + 1   # token index j >= 1
        lead = (first - arrival - target)[idx][owner]
        cum[idx] = np.maximum.reduceat(since_first / j, starts)
        env[idx] = np.maximum.reduceat((since_first + lead) / j, starts)
    finished = log.column("status") == int(Status.FINISHED)
    mean = np.where(finished, log.column("tpot"), np.nan)
    env[~finished] = np.nan
    cum[~finished] = np.nan
    return {"envelope": env, "cumulative": cum, "mean": mean}


def slo_met(log: RequestLog, ttft_slo: float | None = None, tpot_slo: float | None = None,
            check: str = "envelope") -> np.ndarray:
    """Boolean per request: finished, TTFT ≤ target and TPOT (by ``check``) ≤ target.

    ``ttft_slo``/``tpot_slo`` fill the requests without targets of their own; a request with
    no target for a metric meets it.
    """
    if check not in CHECKS:
        raise ValueError(f"unknown TPOT check {check!r}; valid: {', '.join(CHECKS)}")
    ttft_t = _fill(log.column("ttft_slo"), ttft_slo)
    tpot_t = _fill(log.column("tpot_slo"), tpot_slo)
    tpot = tpot_values(log, ttft_slo)[check]
    finished = log.column("status") == int(Status.FINISHED)
    ttft = log.column("ttft")
    with np.errstate(invalid="ignore"):
        ok_ttft = np.isnan(ttft_t) | (ttft <= ttft_t)
        ok_tpot = np.isnan(tpot_t) | np.isnan(tpot) | (tpot <= tpot_t)
    return finished & ok_ttft & ok_tpot


def attainment(log: RequestLog, ttft_slo: float | None = None, tpot_slo: float | None = None) -> dict:
    """Fraction of all requests (offered) meeting the SLO by each TPOT check, plus TTFT alone."""
    n = len(log)
    out = {check: float(slo_met(log, ttft_slo, tpot_slo, check).sum() / n) if n else float("nan")
           for check in CHECKS}
    ttft_t = _fill(log.column("ttft_slo"), ttft_slo)
    finished = log.column("status") == int(Status.FINISHED)
    with np.errstate(invalid="ignore"):
        ok = finished & (np.isnan(ttft_t) | (log.column("ttft") <= ttft_t))
    out["ttft"] = float(ok.sum() / n) if n else float("nan")
    return out


def _fill(col: np.ndarray, value: float | None) -> np.ndarray:
    col = col.copy()
    if value is not None:
        col[np.isnan(col)] = value
    return col

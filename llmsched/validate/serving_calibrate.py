"""``validate-serving --calibrate NAME``: fit named efficiency terms of the GPU model on declared runs.

The terms (default the roofline's ``compute_eff`` and ``mem_eff``) are fitted by replaying the calibration runs:
Nelder–Mead in the logarithms of the terms (so no term turns negative; an efficiency above 1 is refused),
minimising the mean squared log ratio simulated/real of each run's TTFT P50, TPOT P50, E2E P50 and output
throughput. The result is stored as a profile (batchtime/named.py) that names its calibration runs, so a later
``validate-serving --batch-time NAME`` labels those runs "calibration" and every other one "validation".
"""
from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np

from ..batchtime.profiled import nelder_mead
from ..batchtime.registry import BATCH_TIME_MODELS, resolve_kind
from ..experiment import build_replicas, run as run_config
from .serving import measured, proven_by, replay_config, simulated
from .serving_run import ServingRun, gpu_of

DEFAULT_TERMS = ("compute_eff", "mem_eff")
FITTED_ON = (("ttft", "p50"), ("tpot", "p50"), ("e2e", "p50"), ("throughput", "output_tps"))
MAX_EVALUATIONS = 80


def start_values(run: ServingRun, gpu: str | None, batch_time: str, params: dict, terms, model) -> dict:
    """Each term's value in the model as it stands (the fit starts there)."""
    about = build_replicas(replay_config(run, gpu, batch_time, params, model))[0].batch_time.describe()
    inner = about.get("gpu_model", about)
    missing = [t for t in terms if not isinstance(inner.get(t), float)]
    if missing:
        raise ValueError(f"--fit-terms {', '.join(missing)}: not a numeric term of batch-time model {batch_time!r}; "
                         f"its terms: {', '.join(k for k, v in inner.items() if isinstance(v, float))}")
    return {t: inner[t] for t in terms}


def calibrate(runs: list[ServingRun], gpu: str | None, batch_time: str, params: dict, terms=DEFAULT_TERMS,
              model: str | None = None) -> tuple[dict, dict]:
    """The fitted terms and a record of the fit (loss before and after, evaluations)."""
    if not runs:
        raise ValueError("--calibrate needs at least one calibration run")
    kind, _ = resolve_kind(batch_time)
    start = start_values(runs[0], gpu, batch_time, params, terms, model)
    reals = [measured(r) for r in runs]

    def loss_of(values: dict) -> float:
        total, n = 0.0, 0
        for run, real in zip(runs, reals):
            sim = simulated(run_config(replay_config(run, gpu, batch_time, {**params, **values}, model),
                                       ran=proven_by(run, gpu, model)), with_itl=False)
            for metric, stat in FITTED_ON:
                total += math.log(sim[metric][stat] / real[metric][stat]) ** 2
                n += 1
        return total / n

    evaluations = 0

    def loss(z) -> float:
        nonlocal evaluations
        values = dict(zip(terms, (float(v) for v in np.exp(z))))
        if any(t.endswith("_eff") and v > 1 for t, v in values.items()):
            return math.inf
        evaluations += 1
        return loss_of(values)

    z0 = np.log([start[t] for t in terms])
    before = loss(z0)
    z = nelder_mead(loss, z0, 0.15, tol=1e-6, max_iter=MAX_EVALUATIONS)
    fitted = {t: round(float(v), 5) for t, v in zip(terms, np.exp(z))}
    after = loss_of(fitted)
    record = {"kind": kind, "base": batch_time, "terms": list(terms), "start": start, "fitted": fitted,
              "rms_log_error_before": round(math.sqrt(before), 5), "rms_log_error_after": round(math.sqrt(after), 5),
              "evaluations": evaluations, "fitted_on": [f"{m} {s}" for m, s in FITTED_ON],
              "calibrated_on": [r.name for r in runs], "gpus": sorted({gpu_of(r, gpu) for r in runs})}
    return fitted, record


def profile_payload(name: str, params: dict, fitted: dict, record: dict) -> dict:
    """The stored profile: the kind, every parameter (given and fitted) and where the fitted ones came from."""
    stored = {**params, **fitted}
    if "measured_stream" in BATCH_TIME_MODELS[record["kind"]]["params"]:
        stored.setdefault("measured_stream", True)  # fitted with decode attention at the measured copy rate
    return {"name": name, "kind": record["kind"], "params": stored,
            "calibrated_on": record["calibrated_on"], "gpus": record["gpus"],
            **({"command": record["command"]} if record.get("command") else {}),
            "method": f"llmsched validate-serving --calibrate: {', '.join(record['terms'])} fitted (Nelder-Mead in "
                      f"log space) to minimise the mean squared log ratio simulated/real of "
                      f"{', '.join(record['fitted_on'])} over the calibration runs",
            "fit": record, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d")}

"""Fit the ``engine`` batch-time model's terms to a declared calibration part of measured step times.

The split is declared here, once, and every report labels each cell with it: the engine terms are fitted to
the Splitwise Llama-2-70B cells at tensor parallelism 2 (both GPUs); everything else (TP 4 and 8, BLOOM-176B)
is held out. The GEMM efficiencies come from Vidur's per-operator profiles (``scripts/calibrate_profiles.py``).
"""
from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np

from ..batchtime.profiled import nelder_mead
from ..batchtime.roofline import RooflineBatchTime
from ..batchtime.serving_engine import FITTED_TERMS
from ..hardware.gpus import gpu as gpu_preset
from ..hardware.models import model as model_preset
from .datasets import Point

CALIBRATION_SPLIT = "Splitwise Llama-2-70B at TP 2 (A100 and H100) + Vidur per-operator profiles"


def is_calibration(dataset: str, model: str, tp: int) -> bool:
    """Whether the (dataset, model, tp) cell was used to fit the engine terms (Vidur: the GEMM efficiencies)."""
    return dataset == "vidur" or (dataset == "splitwise" and model == "llama-2-70b" and tp == 2)


def _params(z) -> dict:
    """Search coordinates are logarithms (efficiencies, and host seconds in units of 10 µs), so every step is
    relative and no figure can turn negative."""
    comm, layer, prefill_layer, per_seq, serial, sharp = np.exp(np.asarray(z, dtype=float))
    return {"comm_eff": float(comm), "host_layer": float(layer) * 1e-5, "host_prefill_layer": float(prefill_layer) * 1e-5,
            "host_per_seq": float(per_seq) * 1e-5, "host_step": float(serial) * 1e-5, "host_sharpness": 1.0 + float(sharp)}


def fit_engine(points: list[Point], gpu: str) -> dict:
    """Fit the engine terms for one GPU to ``points`` (prefill and decode steps), minimising the mean squared
    log ratio predicted/measured: comm_eff, the host terms and host_sharpness by a coarse grid then Nelder–Mead
    (restarted), once with a GQA-aware decode kernel and once with one that reads a KV copy per query head;
    the variant with the lower calibration loss is kept. Deterministic."""
    steps = [p for p in points if p.gpu == gpu and p.batch is not None]
    if not steps:
        raise ValueError(f"no calibration steps for GPU {gpu!r}")
    best = None
    for gqa in (True, False):
        fit = _fit(steps, gpu, gqa)
        if best is None or fit["rms_log_error"] < best["rms_log_error"]:
            best = fit
    return best


def _fit(steps: list[Point], gpu: str, gqa: bool) -> dict:
    cells = sorted({(p.model, p.tp) for p in steps})
    log_measured = np.log([p.measured for p in steps])

    def loss(z) -> float:
        params = _params(z)
        if not params["comm_eff"] <= 1:
            return math.inf
        models = {c: RooflineBatchTime(model_preset(c[0]).with_tp(c[1]), gpu, allreduce_hop_latency=_hop(gpu),
                                       decode_gqa=gqa, **params) for c in cells}
        pred = np.log([models[(p.model, p.tp)].step_time(p.batch) for p in steps])
        r = pred - log_measured
        return float(r @ r) / len(r)

    grid = [np.log((c, h, hp, s, a, q)) for c in (0.1, 0.3, 0.7) for h in (1.0, 30.0, 60.0) for hp in (1.0, 20.0)
            for s in (1.0, 20.0, 50.0) for a in (1.0, 100.0, 500.0) for q in (1.0, 3.0, 20.0)]
    z = min(grid, key=loss)
    for _ in range(4):
        z = nelder_mead(loss, z, 0.3)
    fitted = {k: round(v, 9) for k, v in _params(z).items()}
    fitted["decode_gqa"] = gqa
    assert set(fitted) == set(FITTED_TERMS)
    return {**fitted, "rms_log_error": round(math.sqrt(loss(z)), 5), "points": len(steps),
            "cells": [f"{m} tp{tp}" for m, tp in cells]}


def _hop(gpu: str) -> float:
    return gpu_preset(gpu).link_latency


def calibration_payload(fits: dict, sources: list[str]) -> dict:
    return {"generated_by": "scripts/calibrate_timing.py", "split": CALIBRATION_SPLIT,
            "method": "per GPU, comm_eff, host_layer, host_prefill_layer, host_per_seq, host_step and "
                      "host_sharpness minimising the mean squared log ratio of the engine model's step time to "
                      "the measured prefill and mean decode-iteration times of the calibration cells, for each "
                      "decode kernel (decode_gqa true/false), keeping the lower loss",
            "data": sources, "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "engines": {"splitwise-dgx": {"source": "Splitwise (Patel et al., ISCA 2024) end-to-end timings on "
                                                    "DGX-A100 / DGX-H100, via Mutinifni/splitwise-sim "
                                                    "data/perf_model.csv", "gpus": fits}}}

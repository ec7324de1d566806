"""Predict every measured point with each batch-time model and summarise the errors per cell and phase."""
from __future__ import annotations

import numpy as np

from ..batchtime.registry import make_batch_time_model
from ..hardware.models import model as model_preset
from .calibrate import is_calibration
from .datasets import Point


def predict(points: list[Point], kind: str, params: dict | None = None) -> list[float | None]:
    """Predicted seconds per point (None where the model cannot predict it: a layer point for a model without
    a per-layer breakdown)."""
    models: dict[tuple, object] = {}
    out: list[float | None] = []
    for p in points:
        key = (p.model, p.gpu, p.tp)
        if key not in models:
            models[key] = make_batch_time_model(kind, model_preset(p.model).with_tp(p.tp), p.gpu, **(params or {}))
        bt = models[key]
        if p.phase == "layer":
            layer = getattr(bt, "layer_nonattention_time", None)
            out.append(float(layer(p.tokens)) if layer else None)
        else:
            out.append(bt.step_time(p.batch))
    return out


def summarise(points: list[Point], predicted: list[float | None], kind: str) -> list[dict]:
    """One row per (dataset, model, gpu, tp, phase): median and P90 of the absolute and of the signed % error."""
    groups: dict[tuple, list[float]] = {}
    for p, pred in zip(points, predicted):
        if pred is None:
            continue
        groups.setdefault((*p.cell, p.phase), []).append(100.0 * (pred - p.measured) / p.measured)
    rows = []
    for (dataset, model, gpu, tp, phase), errs in sorted(groups.items()):
        e = np.array(errs)
        rows.append({"dataset": dataset, "model": model, "gpu": gpu, "tp": tp, "phase": phase, "batch_time": kind,
                     "split": "calibration" if is_calibration(dataset, model, tp) else "held-out",
                     "points": len(e), "median_abs_pct": round(float(np.median(np.abs(e))), 2),
                     "p90_abs_pct": round(float(np.percentile(np.abs(e), 90)), 2),
                     "median_pct": round(float(np.median(e)), 2), "p90_pct": round(float(np.percentile(e, 90)), 2)})
    return rows

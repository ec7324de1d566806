"""A measured step-time grid (``scripts/gpu_step_grid.py``'s CSV) against the roofline's GPU part.

The grid times one engine step of a model built from its config.json, as a CUDA graph on a real GPU, over
prefill chunks, chunks over cached context, decode batches × contexts and mixed batches, each with attention
(``full``) and without it (``noattn``). What the grid measures is the GPU's work alone (no scheduling, input
preparation or detokenisation), so the prediction is the roofline without its host terms: ``step_overhead`` 0,
efficiencies as calibrated for the GPU's chip family (``calibration.json``; nothing here is fitted to the grid).
A ``noattn`` row is predicted as the step minus :meth:`RooflineBatchTime.attention_time`.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..batchtime.base import Batch
from ..batchtime.roofline import RooflineBatchTime

COLUMNS = ("model", "kind", "mode", "chunks", "decodes", "context", "median_s")


@dataclass(frozen=True)
class GridPoint:
    model: str          # the grid's name for the model
    kind: str           # prefill, chunk, decode, mixed
    mode: str           # full, noattn
    batch: Batch
    measured: float     # seconds (median of the replays)
    line: int


def load_grid(path: str | Path) -> list[GridPoint]:
    """The grid's rows as points; a missing column or a malformed row is an error naming the file and line."""
    path = Path(path)
    points = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)} (a scripts/gpu_step_grid.py CSV)")
        for line, row in enumerate(reader, start=2):
            try:
                chunks = [tuple(int(x) for x in part.split("@")) for part in row["chunks"].split(";") if part]
                decodes, context = int(row["decodes"]), int(row["context"])
                measured = float(row["median_s"])
            except ValueError:
                raise ValueError(f"{path} line {line}: chunks (NEW@CACHED;...), decodes, context and median_s "
                                 f"must be numbers") from None
            if measured <= 0:
                raise ValueError(f"{path} line {line}: median_s must be positive, got {measured}")
            batch = Batch([c for c, _ in chunks], [m for _, m in chunks], [context] * decodes)
            points.append(GridPoint(row["model"], row["kind"], row["mode"], batch, measured, line))
    return points


def gpu_part(model, gpu, **params) -> RooflineBatchTime:
    """The roofline without host terms (``step_overhead`` 0), efficiencies as calibrated for ``gpu``."""
    return RooflineBatchTime(model, gpu, step_overhead=0.0, **params)


def predict_grid(points: list[GridPoint], models: dict[str, RooflineBatchTime]) -> list[float]:
    """Predicted seconds per point; ``models`` maps the grid's model names to batch-time models."""
    out = []
    for p in points:
        bt = models[p.model]
        t = bt.step_time(p.batch)
        out.append(t - bt.attention_time(p.batch) if p.mode == "noattn" else t)
    return out


def grid_errors(points: list[GridPoint], predicted: list[float]) -> list[dict]:
    """Per (model, kind, mode): points, median and max absolute % error, median signed % error."""
    groups: dict[tuple, list[float]] = {}
    for p, y in zip(points, predicted):
        groups.setdefault((p.model, p.kind, p.mode), []).append(100.0 * (y - p.measured) / p.measured)
    rows = []
    for (model, kind, mode), errs in groups.items():
        e = np.array(errs)
        rows.append({"model": model, "kind": kind, "mode": mode, "points": len(e),
                     "median_abs_pct": round(float(np.median(np.abs(e))), 1),
                     "max_abs_pct": round(float(np.max(np.abs(e))), 1),
                     "median_pct": round(float(np.median(e)), 1)})
    return rows

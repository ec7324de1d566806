"""``llmsched validate-timing``'s run: every measured step predicted by each batch-time model, the errors per data
set × model/GPU/TP cell × phase (``prediction_errors.summarise``), the table it prints and validation.json's
record."""
from __future__ import annotations

from .calibrate import CALIBRATION_SPLIT
from .prediction_errors import predict, summarise


def validate_timing(datasets, kinds: list[str]) -> tuple[list[dict], dict]:
    """Per batch-time kind, the error rows of every cell and the (point, prediction) pairs it could predict."""
    points = [p for d in datasets for p in d.points]
    rows, pairs = [], {}
    for kind in kinds:
        predicted = predict(points, kind)
        rows += summarise(points, predicted, kind)
        pairs[kind] = [(p, y) for p, y in zip(points, predicted) if y is not None]
    return rows, pairs


def record(datasets, kinds: list[str], rows: list[dict]) -> dict:
    """validation.json: the calibration split, the kinds, each data set's points and exclusions, every cell."""
    return {"split": CALIBRATION_SPLIT, "batch_time": kinds,
            "data": [{"name": d.name, "file": str(d.path), "points": len(d.points), "excluded": d.excluded}
                     for d in datasets], "cells": rows}


def format_table(rows: list[dict]) -> str:
    """Markdown: one line per cell and phase, one column group per batch-time model (median abs / median
    signed / P90 abs %)."""
    kinds = list(dict.fromkeys(r["batch_time"] for r in rows))
    keyed = {(r["dataset"], r["model"], r["gpu"], r["tp"], r["phase"], r["batch_time"]): r for r in rows}
    cells = list(dict.fromkeys((r["dataset"], r["model"], r["gpu"], r["tp"], r["phase"], r["split"]) for r in rows))
    head = "| data | model | GPU | TP | phase | split | n | " + " | ".join(
        f"{k}: median abs / signed / P90 abs" for k in kinds) + " |"
    lines = [head, "|---" * (7 + len(kinds)) + "|"]
    for dataset, model, gpu, tp, phase, split in cells:
        parts, n = [], ""
        for k in kinds:
            r = keyed.get((dataset, model, gpu, tp, phase, k))
            if r is None:
                parts.append("—")
                continue
            n = r["points"]
            parts.append(f"{r['median_abs_pct']:.1f}% / {r['median_pct']:+.1f}% / {r['p90_abs_pct']:.1f}%")
        lines.append(f"| {dataset} | {model} | {gpu} | {tp} | {phase} | {split} | {n} | " + " | ".join(parts) + " |")
    return "\n".join(lines)

"""``llmsched validate-timing``: batch-time models against measured step times, per cell, with the split."""
from __future__ import annotations

import json
from pathlib import Path

from ..batchtime.registry import BATCH_TIME_MODELS
from ..validate.calibrate import CALIBRATION_SPLIT, is_calibration
from ..validate.datasets import load
from ..validate.prediction_errors import predict, summarise

DEFAULT_KINDS = ("roofline", "roofline-staircase", "engine")


def add(sub) -> None:
    p = sub.add_parser("validate-timing", help="batch-time models vs measured GPU step times (Splitwise, Vidur, "
                                               "steps.csv)",
                       description="Predict every measured step with each batch-time model and report, per data "
                                   "set × model/GPU/TP cell × model, the median and P90 absolute and signed % "
                                   "errors for prefill and decode steps (and per-layer rows of Vidur profiles). "
                                   "Cells used to fit the engine model are labelled 'calibration', the rest "
                                   f"'held-out' ({CALIBRATION_SPLIT}). Writes validation.json and "
                                   "predicted_vs_measured.png to --out.")
    p.add_argument("--data", action="append", required=True, metavar="FILE",
                   help="a Splitwise perf_model.csv, a Vidur mlp.csv or a steps.csv (repeatable)")
    p.add_argument("--batch-time", action="append", metavar="KIND",
                   help=f"batch-time model kind (repeatable; default {', '.join(DEFAULT_KINDS)})")
    p.add_argument("--model", help="model preset of a steps.csv (e.g. llama-3-8b, llama-2-70b-tp4)")
    p.add_argument("--gpu", help="GPU preset of a steps.csv (e.g. a100)")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=validate_timing)


def validate_timing(args) -> int:
    kinds = list(args.batch_time or DEFAULT_KINDS)
    unknown = [k for k in kinds if k not in BATCH_TIME_MODELS]
    if unknown:
        raise ValueError(f"--batch-time {', '.join(unknown)}: unknown; valid kinds: {', '.join(BATCH_TIME_MODELS)}")
    datasets = [load(path, args.model, args.gpu) for path in args.data]
    points = [p for d in datasets for p in d.points]
    if not points:
        raise ValueError(f"--data {', '.join(args.data)}: no usable measurements")
    rows, pairs = [], {}
    for kind in kinds:
        predicted = predict(points, kind)
        rows += summarise(points, predicted, kind)
        pairs[kind] = [(p, y) for p, y in zip(points, predicted) if y is not None]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {"split": CALIBRATION_SPLIT, "batch_time": kinds,
               "data": [{"name": d.name, "file": str(d.path), "points": len(d.points), "excluded": d.excluded}
                        for d in datasets], "cells": rows}
    (out / "validation.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(format_table(rows))
    for d in datasets:
        for line in d.excluded:
            print(f"excluded ({d.name}): {line}")
    plot(pairs, out / "predicted_vs_measured.png")
    print(f"wrote {out / 'validation.json'} and {out / 'predicted_vs_measured.png'}")
    return 0


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


def plot(pairs: dict, path: Path) -> None:
    """Predicted against measured step time, one panel per batch-time model: colour by split, marker by phase;
    the diagonal solid and ±10% dotted. One legend beside the panels (every panel has the same series)."""
    from ..report.sheet import Sheet
    sheet = Sheet(1, len(pairs), panel=(3.6, 3.6))
    for ax, (kind, items) in zip(sheet.axes[0], pairs.items()):
        for phase, marker in (("prefill", "o"), ("decode", "s"), ("mixed", "^"), ("layer", ".")):
            for split, color in (("calibration", "tab:blue"), ("held-out", "tab:red")):
                sel = [(p.measured, y) for p, y in items if p.phase == phase
                       and ("calibration" if is_calibration(p.dataset, p.model, p.tp) else "held-out") == split]
                if sel:
                    xs, ys = zip(*sel)
                    ax.scatter([x * 1e3 for x in xs], [y * 1e3 for y in ys], s=10, marker=marker, color=color,
                               alpha=0.6, label=f"{phase}, {split}")
        lo = min(min(p.measured, y) for p, y in items) * 1e3
        hi = max(max(p.measured, y) for p, y in items) * 1e3
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.plot([lo, hi], [lo * 1.1, hi * 1.1], "k:", lw=0.6)
        ax.plot([lo, hi], [lo * 0.9, hi * 0.9], "k:", lw=0.6)
        ax.set(xscale="log", yscale="log", xlabel="measured (ms)", ylabel="predicted (ms)", title=kind)
        ax.grid(True, which="major", alpha=0.3)
    sheet.legend(title="phase, split (line: exact, dotted: ±10%)")
    sheet.save(path)

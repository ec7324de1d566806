"""``llmsched validate-timing``: batch-time models against measured step times, per cell, with the split."""
from __future__ import annotations

import json
from pathlib import Path

from ..batchtime.registry import BATCH_TIME_MODELS
from ..validate.calibrate import CALIBRATION_SPLIT
from ..validate.datasets import load

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
    p.set_defaults(func=validate_timing_command)


def validate_timing_command(args) -> int:
    from ..validate.timing import format_table, record, validate_timing
    from ..validate.timing_figure import plot_predicted_vs_measured
    kinds = list(args.batch_time or DEFAULT_KINDS)
    unknown = [k for k in kinds if k not in BATCH_TIME_MODELS]
    if unknown:
        raise ValueError(f"--batch-time {', '.join(unknown)}: unknown; valid kinds: {', '.join(BATCH_TIME_MODELS)}")
    datasets = [load(path, args.model, args.gpu) for path in args.data]
    points = [p for d in datasets for p in d.points]
    if not points:
        raise ValueError(f"--data {', '.join(args.data)}: no usable measurements")
    rows, pairs = validate_timing(datasets, kinds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "validation.json").write_text(json.dumps(record(datasets, kinds, rows), indent=2) + "\n")
    print(format_table(rows))
    for d in datasets:
        for line in d.excluded:
            print(f"excluded ({d.name}): {line}")
    plot_predicted_vs_measured(pairs, out / "predicted_vs_measured.png")
    print(f"wrote {out / 'validation.json'} and {out / 'predicted_vs_measured.png'}")
    return 0

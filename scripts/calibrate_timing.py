#!/usr/bin/env python
"""Fit the ``engine`` batch-time model's terms to the declared calibration part of measured whole-model steps.

    python scripts/calibrate_timing.py ../shared/data/profiles/splitwise_dgx_perf_model.csv \
        [--out llmsched/batchtime/engine_calibration.json] [--dry-run]

Only the calibration cells (``llmsched.validate.calibrate.is_calibration``: Splitwise Llama-2-70B at TP 2, per
GPU) are used; ``llmsched validate-timing`` reports the errors on the held-out cells. Writes a few numbers per
GPU, no measured data. Run ``scripts/calibrate_profiles.py`` first (the GEMM efficiencies come from it).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmsched.batchtime.serving_engine import ENGINE_CALIBRATION_PATH  # noqa: E402
from llmsched.validate.calibrate import calibration_payload, fit_engine, is_calibration  # noqa: E402
from llmsched.validate.datasets import load_splitwise  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("splitwise", type=Path, help="Splitwise perf_model.csv")
    parser.add_argument("--out", type=Path, default=ENGINE_CALIBRATION_PATH)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    data = load_splitwise(args.splitwise)
    calibration = [p for p in data.points if is_calibration(p.dataset, p.model, p.tp)]
    fits = {g: fit_engine(calibration, g) for g in sorted({p.gpu for p in calibration})}
    payload = calibration_payload(fits, [args.splitwise.name])
    print(json.dumps(fits, indent=2))
    if not args.dry_run:
        args.out.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

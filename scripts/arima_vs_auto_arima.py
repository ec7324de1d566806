#!/usr/bin/env python
"""The dynamo-sla planner's load predictor (a fixed ARIMA(2,1,0), llmsched/fleet/load_predictor.py) against what
NVIDIA Dynamo runs, ``pmdarima.auto_arima`` refitted on the window at every interval (components/planner,
utils/load_predictor.py ``ARIMAPredictor``), on a ramp and a step of per-interval request counts. pmdarima is not
one of llmsched's dependencies: install it apart (``pip install --target DIR pmdarima``) and run

    PYTHONPATH=.:DIR python scripts/arima_vs_auto_arima.py
"""
from __future__ import annotations

import warnings

import pmdarima

from llmsched.fleet.load_predictor import MIN_POINTS, Predictor

SERIES = {"ramp": [10.0 * k for k in range(1, 11)], "step": [100.0] * 6 + [400.0] * 4}


def main() -> None:
    warnings.filterwarnings("ignore")
    for name, values in SERIES.items():
        ours, theirs = Predictor("arima"), []
        predicted = []
        for k, value in enumerate(values):
            ours.add(value)
            if k + 1 < MIN_POINTS:
                continue
            model = pmdarima.auto_arima(values[:k + 1], suppress_warnings=True, error_action="ignore")
            theirs.append(float(model.predict(n_periods=1)[0]))
            predicted.append(ours.predict())
        print(f"{name} {values}: next value after each of the last three: ours "
              f"{[round(v, 1) for v in predicted[-3:]]}, auto_arima {[round(v, 1) for v in theirs[-3:]]}")


if __name__ == "__main__":
    main()

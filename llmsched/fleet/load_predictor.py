"""Next-interval load predictors of NVIDIA Dynamo's SLA planner (ai-dynamo/dynamo, components/planner/src/dynamo/
planner/utils/load_predictor.py: ``constant``, ``arima``, ``prophet``), the simple ones:

* ``constant``: the last interval's value (Dynamo's ``ConstantPredictor``);
* ``arima``: Dynamo fits ``pmdarima.auto_arima`` to the last ``window`` values (its default window 50) once it has 5
  of them and predicts one period ahead. Here the model is fixed, ARIMA(2,1,0) (the differences regressed on their
  two previous values and a constant, least squares), the simplest member of the family auto_arima searches with a
  trend; below 5 values it is the last value, as Dynamo's. Prophet (Meta's seasonal model) is not implemented.

A prediction is never below 0 (a load).
"""
from __future__ import annotations

import numpy as np

MIN_POINTS = 5  # Dynamo's BasePredictor minimum_data_points
PREDICTORS = ("constant", "arima")


class Predictor:
    def __init__(self, kind: str, window: int = 50):
        if kind not in PREDICTORS:
            raise ValueError(f"unknown load predictor {kind!r}; valid: {', '.join(PREDICTORS)}")
        self.kind, self.window = kind, window
        self.values: list[float] = []

    def add(self, value: float) -> None:
        self.values.append(0.0 if value != value else float(value))  # NaN counts as 0, as Dynamo's
        if len(self.values) > self.window:
            del self.values[:-self.window]

    def predict(self) -> float:
        if not self.values:
            return 0.0
        last = self.values[-1]
        if self.kind == "constant" or len(self.values) < MIN_POINTS:
            return last
        d = np.diff(np.asarray(self.values))
        if len(d) < 4 or not np.any(d):
            return last
        rows = np.column_stack((np.ones(len(d) - 2), d[1:-1], d[:-2]))
        coef, *_ = np.linalg.lstsq(rows, d[2:], rcond=None)
        step = float(coef @ np.array([1.0, d[-1], d[-2]]))
        return max(0.0, last + step)

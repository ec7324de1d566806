"""The step-time predictor ``a + b·new_tokens + c·Σcontext`` (Lyu et al. §3.2).

Fitted offline to the replica's batch-time model (or to measured steps) and, as the
paper does ("built offline ... and continuously calibrated"), optionally refitted online
from the steps the engine actually ran: a sliding window of the last ``window`` observed
steps, refitted every ``every`` steps by non-negative least squares (coefficients stay ≥ 0).
The token-only strawman ``a' + b'·new_tokens`` (FB-TB's capacity rule) is the same class
with ``c = 0`` and ``terms=("const", "per_token")``.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ...batchtime.base import BatchTimeModel
from ...batchtime.linear import LinearBatchTime, nnls

FULL = ("const", "per_token", "per_context")
TOKEN_ONLY = ("const", "per_token")
_CACHE: dict = {}


class StepPredictor:
    """Predicts a step's seconds from (Σ new tokens, Σ context); refits itself from observed steps."""

    def __init__(self, a: float, b: float, c: float = 0.0, *, token_only: bool = False, online: bool = False,
                 window: int = 2000, every: int = 200):
        for name, v in (("a", a), ("b", b), ("c", c)):
            if not (v >= 0 and np.isfinite(v)):
                raise ValueError(f"step predictor: {name} must be a finite number >= 0, got {v!r}")
        if b <= 0:
            raise ValueError(f"step predictor: b (seconds per new token) must be > 0, got {b!r}")
        if window < 3 or every < 1:
            raise ValueError(f"step predictor: window must be >= 3 and every >= 1, got {window}, {every}")
        self.a, self.b, self.c = float(a), float(b), 0.0 if token_only else float(c)
        self.token_only = token_only
        self.online = online
        self.every = every
        self.obs: deque = deque(maxlen=window)
        self.refits = 0
        self._since = 0

    @classmethod
    def fit_to(cls, model: BatchTimeModel, token_only: bool = False, max_tokens: int = 8192,
               max_context: int = 8192, loss: str = "relative", **kw) -> "StepPredictor":
        """Offline fit to a batch-time model over a grid of decode-only, prefill-only and mixed batches."""
        key = (id(model), token_only, max_tokens, max_context, loss)
        coef = _CACHE.get(key)
        if coef is None or coef[0] is not model:
            lin, _ = LinearBatchTime.approximate(model, TOKEN_ONLY if token_only else FULL, max_tokens=max_tokens,
                                                 max_context=max_context, loss=loss)
            k = lin.coefficients
            coef = _CACHE[key] = (model, k["const"], k["per_token"], k["per_context"])
        _, a, b, c = coef
        return cls(a, max(b, 1e-9), c, token_only=token_only, **kw)

    @classmethod
    def from_steps(cls, steps_csv, token_only: bool = False, **kw) -> "StepPredictor":
        """Offline fit to measured steps (a ``steps.csv``), ordinary least squares in seconds."""
        lin, _ = LinearBatchTime.fit(steps_csv, TOKEN_ONLY if token_only else FULL, loss="absolute")
        k = lin.coefficients
        return cls(k["const"], max(k["per_token"], 1e-9), k["per_context"], token_only=token_only, **kw)

    def predict(self, tokens: int, context: int) -> float:
        return self.a + self.b * tokens + self.c * context

    def observe(self, tokens: int, context: int, duration: float) -> None:
        """Record one step that ran; refit every ``every`` observations when online."""
        if not self.online:
            return
        self.obs.append((tokens, context, duration))
        self._since += 1
        if self._since >= self.every and len(self.obs) >= 3:
            self._since = 0
            self.refit()

    def refit(self) -> None:
        data = np.asarray(self.obs, dtype=float)
        cols = [np.ones(len(data)), data[:, 0]] + ([] if self.token_only else [data[:, 1]])
        X = np.column_stack(cols)
        norms = np.linalg.norm(X, axis=0)
        norms[norms == 0] = 1.0
        coef = nnls(X / norms, data[:, 2]) / norms
        if coef[1] <= 0:  # too little variety in the window to identify b: keep the old fit
            return
        self.a, self.b = float(coef[0]), float(coef[1])
        self.c = 0.0 if self.token_only else float(coef[2])
        self.refits += 1

    def describe(self) -> dict:
        return {"a": self.a, "b": self.b, "c": self.c, "token_only": self.token_only, "online": self.online,
                "refits": self.refits}


def prediction_errors(predictor: StepPredictor, steps) -> dict:
    """Absolute % errors of ``predictor`` on a run's steps (a StepLog): mean, p99 and max."""
    tokens = steps.column("prefill_tokens") + steps.column("num_decodes")
    context = steps.column("context_sum")
    duration = steps.column("duration")
    if not len(duration):
        return {"steps": 0, "mape": float("nan"), "p99_ape": float("nan"), "max_ape": float("nan")}
    ape = 100 * np.abs(predictor.a + predictor.b * tokens + predictor.c * context - duration) / duration
    return {"steps": int(len(ape)), "mape": float(ape.mean()), "p99_ape": float(np.percentile(ape, 99)),
            "max_ape": float(ape.max())}

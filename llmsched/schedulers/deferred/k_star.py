"""K* for a run: the timing constants fitted to the run's batch-time model, α̂ = 1/mean output (the paper's
implicit choice for non-geometric workloads row 14), then the argmax of the exact Theorem 1."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...batchtime.base import BatchTimeModel
from .throughput import exact_throughput, optimal_K, prop1_throughput
from .timing_constants import TimingFit, timing_from_batch_time


def alpha_from_mean_output(mean_output: float) -> float:
    """Per-iteration departure probability of geometric outputs with this mean (output tokens, >= 1)."""
    if not (isinstance(mean_output, (int, float)) and mean_output > 1):
        raise ValueError(f"mean_output must be a number of output tokens > 1, got {mean_output!r}")
    return 1.0 / float(mean_output)


@dataclass(frozen=True)
class Prediction:
    C: int
    alpha: float
    fit: TimingFit
    rho: np.ndarray      # exact ρ(K), index K
    rho_prop1: np.ndarray

    @property
    def K(self) -> int:
        return optimal_K(self.rho)

    @property
    def K_prop1(self) -> int:
        return optimal_K(self.rho_prop1)

    def summary(self) -> dict:
        K = self.K
        return {"K": K, "K_prop1": self.K_prop1, "rho_K": float(self.rho[K]), "rho_1": float(self.rho[1]),
                "gain": float(self.rho[K] / self.rho[1]), "alpha": self.alpha, "C": self.C,
                "prompt_len": self.fit.prompt_len, **self.fit.timing.as_dict()}


def predict(model: BatchTimeModel, C: int, prompt_len: float, mean_output: float,
            max_num_batched_tokens: int | None = None) -> Prediction:
    alpha = alpha_from_mean_output(mean_output)
    fit = timing_from_batch_time(model, C, max(1, round(prompt_len)), alpha, max_num_batched_tokens)
    return Prediction(C, alpha, fit, exact_throughput(C, alpha, fit.timing), prop1_throughput(C, alpha, fit.timing))

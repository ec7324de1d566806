"""FairBatching (seed 002) support: envelope deadlines, step-time predictor, Algorithm 1, PAB, SLO attainment.

The scheduler itself is ``llmsched/schedulers/fairbatching.py``; the routers (PAB, vLLM's DP
score) are in ``llmsched/routers.py``.
"""
from .envelope import DEFAULT_TPOT, DEFAULT_TTFT, request_slo, slack, token_deadline
from .formation import Task, budget_and_groups, form_batch
from .pab import compute_pab, pab_from_slacks
from .predictor import StepPredictor, prediction_errors

__all__ = ["DEFAULT_TPOT", "DEFAULT_TTFT", "request_slo", "slack", "token_deadline", "Task", "budget_and_groups",
           "form_batch", "compute_pab", "pab_from_slacks", "StepPredictor", "prediction_errors"]

"""FairBatching (Lyu, Liu, Wu, Chen, *FairBatching: Fairness-Aware Batch Formation for LLM Inference*):
the scheduler and what it forms batches from — per-token envelope deadlines, the step-time predictor, Algorithm 1's
batch formation and the Prefill Admission Budget (PAB). The PAB routers are in ``llmsched/routing/pab.py``, the paper's
SLO checks in ``llmsched/metrics/tpot_attainment.py``.
"""

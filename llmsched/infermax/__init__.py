"""InferMax (seed 001) support: the length histogram of the proposed policy, exact optimal schedules (CP-SAT)
and a brute-force cross-check. The scheduler itself is ``llmsched/schedulers/infermax.py``."""

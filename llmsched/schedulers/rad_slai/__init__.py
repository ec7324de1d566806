"""RAD and SLAI (Bari, Hegde, de Veciana, *Optimal Scheduling Algorithms for LLM Inference: Theory and Practice*;
Bari et al.): the throughput-optimal RAD and the latency-aware SLAI with its four variants. Theorems 1 and 2 and the
simulated check of the capacity bound are in ``llmsched/theory/rad_slai/``."""

"""What ``llmsched reproduce deferred-prefill`` runs (Mohanty et al., *Deferred prefill for throughput maximization
in LLM inference*): the paper's request model, its always-backlogged closed loop, and Table 1's step times
rebuilt from public measurements."""

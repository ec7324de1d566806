"""Deferred prefill (Mohanty, Bolar, Patil, Devi, George et al., *Deferred prefill for throughput maximization in
LLM inference*): the scheduler that refills the batch only after K departures, and what its ``K="auto"``
needs — the exact renewal-reward throughput ρ(K), the timing constants and K* for a run. The closed-loop
experiment and Table 1's measured step times are in ``llmsched/reproduce/deferred_prefill_runs/``."""

"""Seed 004, deferred prefill: the renewal analysis (ρ(K), K*), its timing constants, and the closed-loop
experiment. The scheduler itself is ``llmsched/schedulers/deferred_prefill.py``."""
from .renewal import CycleStats, cycle_stats, prop1_iterations
from .throughput import exact_throughput, optimal_K, prop1_throughput, r_interval
from .timing import Timing, TimingFit, timing_from_batch_time, timing_from_steps

__all__ = ["CycleStats", "cycle_stats", "prop1_iterations", "exact_throughput", "optimal_K", "prop1_throughput",
           "r_interval", "Timing", "TimingFit", "timing_from_batch_time", "timing_from_steps"]

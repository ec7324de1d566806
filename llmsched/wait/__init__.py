"""Seed 003 (WAIT / Nested WAIT, Ao et al.): the fluid model, thresholds and the safety buffer.

Units are the paper's: a prompt type is (rate λ, input length l, decode length l'), with l' + 1 stages (one
prefill, l' decodes) and l + k KV tokens after stage k. In the engine (vLLM's convention: the prefill step
samples the first token) the same prompt is a request with ``prompt_len = l`` and ``output_len = l' + 1``:
the same number of steps and the same KV after each, so the fluid model describes the simulator exactly.
"""
from .fluid import Equilibrium, Overloaded, PromptType, batch_cap_thresholds, check_wait_thresholds, fluid, \
    feasible_cycle_times, parse_types, wait_thresholds
from .nested import Segment, memory_requirement, nested_thresholds, segment_memory, segments, \
    theta_star_binomial, theta_star_poisson
from .timing import wait_coefficients

__all__ = ["Equilibrium", "Overloaded", "PromptType", "batch_cap_thresholds", "check_wait_thresholds", "fluid",
           "feasible_cycle_times", "parse_types", "wait_thresholds", "Segment", "memory_requirement",
           "nested_thresholds", "segment_memory", "segments", "theta_star_binomial", "theta_star_poisson",
           "wait_coefficients"]

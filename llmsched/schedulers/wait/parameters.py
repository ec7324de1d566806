"""What WAIT and Nested WAIT derive once from their parameters and the replica: types and iteration time."""
from __future__ import annotations

from .fluid_model import PromptType, parse_types
from .iteration_time import wait_coefficients
from .prompt_types import length_samples, parse_edges, types_from_lengths


def scheduler_types(types: str, lengths: str, bins: int, edges: str, rate: float) -> list[PromptType]:
    """Explicit ``types`` (RATE:L:L',... paper units), else bins of the ``lengths`` distribution."""
    if types:
        return sorted(parse_types(types), key=lambda t: (t.decode, t.prompt))
    if not rate > 0:
        raise ValueError(f"rate must be > 0 prompts/s, got {rate!r}")
    prompts, outputs = length_samples(lengths)
    return types_from_lengths(prompts, outputs, rate, bins, parse_edges(edges) if edges else None)


def iteration_coefficients(d0: float, d1: float, view) -> tuple[float, float]:
    """(d0, d1) as given, or fitted to the replica's batch-time model when d0 is 0."""
    if d0 > 0:
        return d0, d1
    if view.batch_time is None:
        raise ValueError("the fluid threshold rule needs d0= and d1= (no batch-time model to fit them to)")
    fit_d0, fit_d1, _ = wait_coefficients(view.batch_time)
    return fit_d0, fit_d1


def parse_thresholds(text: str, count: int, what: str) -> list[int]:
    try:
        n = [int(x) for x in str(text).split(",")]
    except ValueError:
        raise ValueError(f"thresholds {text!r}: write integers separated by commas, one per {what}") from None
    if len(n) != count or min(n) < 1:
        raise ValueError(f"thresholds {text!r}: need {count} integers >= 1, one per {what}")
    return n

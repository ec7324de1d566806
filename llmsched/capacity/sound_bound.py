"""The sound throughput bound as an invariant of every capacity search.

No schedule keeps up with more than the bound of llmsched/theory/throughput_bound.py allows on a probe's own
requests and engine limits. A capacity is a rate whose probe was stable: its backlog grew by less than
``GROWTH_MIN`` (5%) of the arriving work (stability.py), so the probe served at least ``1 - GROWTH_MIN`` of the
offered work, and the bound at that served fraction applies (the one the planner prunes with, plan/prune.py). The
search compares its capacity with that bound, computed on the capacity probe's own requests (each seed's: a
different seed or rate draws other requests) at its own limits, and fails with ``SoundBoundViolation`` naming both
where the capacity is higher: that is a bug of the simulator, of the bound or of the verdict, not a result.

The replicas bounded are the most that serve at once (a DP group's ranks, an autoscaler's ``max_replicas``).
Left unchecked: a closed loop's capacity (a concurrency, not an arrival rate), a batch-time model the bound has
no decomposition for (``busy_time_form``), a fleet file's pools and a disaggregated deployment (not one pool of
alike replicas), and a prefix cache over prompts that share prefixes (its hits skip prefill work the bound counts).
"""
from __future__ import annotations

from ..experiment import RunConfig
from ..theory.throughput_bound import ThroughputBound, bound_for_config
from .probe import probe_config
from .stability import GROWTH_MIN

SERVED_FRACTION = 1 - GROWTH_MIN  # of the offered work, that a stable probe served at the least


class SoundBoundViolation(ValueError):
    """A capacity above the sound throughput bound of its own probe's requests and limits."""


def capacity_bound(base: RunConfig, rate: float, seeds) -> tuple[ThroughputBound, int] | None:
    """The least sound bound over ``seeds`` of ``base``'s probe at ``rate``, and its seed; None where there is
    none (a closed loop, or a batch-time model without a bound)."""
    if base.concurrency is not None:
        return None
    least = None
    for seed in seeds:
        try:
            bound = bound_for_config(probe_config(base, rate, seed), SERVED_FRACTION)
        except ValueError:  # no decomposition of this batch-time model's step time, or a fleet: no bound
            return None
        if least is None or bound.requests_per_s < least[0].requests_per_s:
            least = (bound, seed)
    return least


def above_bound(base: RunConfig, rate: float, seeds) -> str | None:
    """Why a probe of ``base`` at ``rate`` req/s cannot be stable, where the rate is above the sound bound of the
    probe's own requests (None where it is not, or there is no bound). A proof the trend verdict needs where its
    window is too short to see growth: a trace probe of a few hundred requests at a high rate arrives in a
    fraction of a second, well inside one request's stay, and its batch means are too noisy to call growth."""
    found = capacity_bound(base, rate, seeds)
    if found is None or rate <= found[0].requests_per_s * (1 + 1e-9):
        return None
    return (f"stability: {rate:g} req/s is above the sound throughput bound of its own requests, "
            f"{found[0].requests_per_s:.4g} req/s (seed {found[1]}; binding limit {found[0].binding})")


def check_capacity(label: str, base: RunConfig, capacity: float | None, seeds) -> None:
    """Raise ``SoundBoundViolation`` where ``capacity`` (req/s) is above the bound of its own probe."""
    if capacity is None:
        return
    found = capacity_bound(base, capacity, seeds)
    if found is None:
        return
    bound, seed = found
    if capacity > bound.requests_per_s * (1 + 1e-9):
        raise SoundBoundViolation(
            f"capacity {label}: {capacity:g} req/s is above the sound throughput bound of its own probe, "
            f"{bound.requests_per_s:.6g} req/s (seed {seed}: {bound.offered} requests, serving {SERVED_FRACTION:g} "
            f"of their work, as a stable probe must; binding limit {bound.binding}): a bug of the simulator, the "
            f"bound or the stability verdict, not a capacity (see llmsched/capacity/sound_bound.py)")

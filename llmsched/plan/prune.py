"""Prune before simulating, only with sound reasons.

* **Memory**: the model's weights and activation reserve leave no KV memory on the GPU at that tensor
  parallelism (the figures are reported).
* **Throughput bound**: no schedule on r replicas keeps up with more than r × the sound bound of
  llmsched/theory/throughput_bound.py, computed for the probe's own requests (each seed's). A stable probe
  must serve all but ``GROWTH_MIN`` (5%) of the offered work (llmsched/capacity/stability.py), so the bound is
  taken at that served fraction; the least replicas any search needs is ⌈rate / that bound⌉, and a candidate
  whose least replicas exceed --max-replicas is pruned without a probe.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..capacity.probe import probe_config
from ..capacity.sound_bound import SERVED_FRACTION
from ..experiment import RunConfig
from ..theory.throughput_bound import config_lengths, engine_of, throughput_bound
from .candidates import Candidate, memory_fit


@dataclass
class Screened:
    """A candidate at one target rate after pruning: ``pruned`` says why it needs no probe (empty: search it)."""

    candidate: Candidate
    rate: float
    memory: dict
    bound_rps_per_replica: float | None = None     # the sound bound (None: no bound for this batch-time model)
    min_replicas: int = 1
    pruned: str = ""
    notes: list = field(default_factory=list)


class LengthCache:
    """The probe's requests' lengths per (rate, seed): the same for every candidate."""

    def __init__(self):
        self._lengths = {}

    def get(self, cfg: RunConfig):
        key = (cfg.rate, cfg.seed)
        if key not in self._lengths:
            self._lengths[key] = config_lengths(cfg)
        return self._lengths[key]


def screen(candidate: Candidate, base: RunConfig, rate: float, seeds, max_replicas: int,
           lengths: LengthCache) -> Screened:
    fit = memory_fit(base.model, candidate.gpu, candidate.tp, base)
    out = Screened(candidate, rate, fit)
    if not fit["fits"]:
        out.pruned = ("tp: " if fit.get("tp") else "memory: ") + fit["reason"]
        return out
    per_replica = math.inf
    if candidate.config(base, rate, 1).kv_offload:
        out.notes.append("no bound pruning: KV tiers cut the prefill work the bound counts")
        return out
    for seed in seeds:
        cfg = probe_config(candidate.config(base, rate, 1), rate, seed)
        try:
            prompts, outputs = lengths.get(cfg)
            bt, limits = engine_of(cfg)
            bound = throughput_bound(bt, prompts, outputs, limits, 1, SERVED_FRACTION)
        except ValueError as e:
            out.notes.append(f"no bound pruning: {e}")
            return out
        per_replica = min(per_replica, bound.per_replica_rps)
    out.bound_rps_per_replica = per_replica
    if per_replica <= 0:
        out.pruned = "bound: requests the engine can never hold exceed the 5% of work a stable run may leave"
        return out
    out.min_replicas = max(1, math.ceil(rate / per_replica - 1e-9))
    if out.min_replicas > max_replicas:
        out.pruned = (f"bound: needs >= {out.min_replicas} replicas ({rate:g} req/s over at most "
                      f"{per_replica:.3g} req/s per replica), above --max-replicas {max_replicas}")
    return out


def probes_saved(min_replicas: int) -> int:
    """Probes a search starting at one replica spends below ``min_replicas`` (it tries 1, 2, 4, ... while they
    fail): what the bound's lower limit saves a candidate."""
    saved, r = 0, 1
    while r < min_replicas:
        saved += 1
        r *= 2
    return saved

"""Prune before simulating, only with sound reasons.

* **Memory**: the model's weights and activation reserve leave no KV memory on the GPU at that tensor
  parallelism (the figures are reported).
* **Throughput bound**: no schedule on r replicas keeps up with more than r × the sound bound of
  llmsched/theory/throughput_bound.py, computed for the probe's own requests (each seed's). A stable probe
  must serve all but ``GROWTH_MIN`` (5%) of the offered work (llmsched/capacity/stability.py), so the bound is
  taken at that served fraction; the least replicas any search needs is ⌈rate / that bound⌉, and a candidate
  whose least replicas exceed --max-replicas is pruned without a probe.
* **Pools** (a disaggregated candidate, units of a prefill and b decode replicas): each pool's bound is the same
  theorem for the part of every request it serves (``throughput_bound(..., stage=...)``: the prompt and one
  token; the prompt's last token and the decodes), still counting the whole requests' work as what must be
  served, and a fleet keeps up only where both pools do: a unit serves at most min(a × prefill bound, b × decode
  bound). The pool that sets it binds (reported). With a decider that serves some requests whole on the decode
  pool, the prefill pool's bound does not hold (it may serve fewer prompts) and only the decode pool's is used.

No bound, no pruning: where a prefix cache serves prompts that share content (``--workload shared-prefix``, a
Mooncake or session trace), its hits skip prefill work the bound counts as computed, so the bound does not hold
(a 150-request shared-prefix probe of sarathi on one A100 is stable at 75 req/s, above the full-prompt bound of
69.6); likewise with KV offload tiers or a batch-time model without a bound. Such a candidate is probed from one
replica, and the note says why it was not pruned.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..capacity.probe import probe_config
from ..capacity.sound_bound import SERVED_FRACTION
from ..experiment import RunConfig, carries_content
from ..theory.throughput_bound import config_lengths, engine_of, throughput_bound
from .candidates import Candidate, memory_fit

NO_BOUND = "no bound pruning: "  # a candidate's note where no sound bound exists, so it is probed, never pruned


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
    binding: str = ""                                # a disaggregated candidate's pool that sets its bound


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
    if candidate.pd is not None:
        gp, tpp, gd, tpd, _, _ = candidate.pd
        fits = [memory_fit(base.model, gp, tpp, base), memory_fit(base.model, gd, tpd, base)]
        fit = fits[1] if fits[0]["fits"] else fits[0]
        fit = {**fit, "prefill_kv_tokens": fits[0].get("kv_tokens", 0)}
    else:
        fit = memory_fit(base.model, candidate.gpu, candidate.tp, base)
    out = Screened(candidate, rate, fit)
    if not fit["fits"]:
        out.pruned = ("tp: " if fit.get("tp") else "memory: ") + fit["reason"]
        return out
    per_replica = math.inf
    one = candidate.config(base, rate, 1)
    if one.kv_offload:
        out.notes.append(f"{NO_BOUND}KV tiers cut the prefill work the bound counts")
        return out
    if one.prefix_caching and carries_content(one):
        out.notes.append(f"{NO_BOUND}a prefix cache over shared prompts skips prefill work the bound counts")
        return out
    for seed in seeds:
        cfg = probe_config(candidate.config(base, rate, 1), rate, seed)
        try:
            prompts, outputs = lengths.get(cfg)
            if candidate.pd is not None:
                bound, out.binding = pool_bound(cfg, candidate.pd, prompts, outputs)
            else:
                bt, limits = engine_of(cfg)
                bound = throughput_bound(bt, prompts, outputs, limits, 1, SERVED_FRACTION).per_replica_rps
        except ValueError as e:
            out.notes.append(f"{NO_BOUND}{e}")
            return out
        per_replica = min(per_replica, bound)
    out.bound_rps_per_replica = per_replica
    if per_replica <= 0:
        out.pruned = "bound: requests the engine can never hold exceed the 5% of work a stable run may leave"
        return out
    out.min_replicas = max(1, math.ceil(rate / per_replica - 1e-9))
    if out.min_replicas > max_replicas:
        out.pruned = (f"bound: needs >= {out.min_replicas} replicas ({rate:g} req/s over at most "
                      f"{per_replica:.3g} req/s per replica), above --max-replicas {max_replicas}")
    return out


def pool_bound(cfg: RunConfig, pd: tuple, prompts, outputs) -> tuple[float, str]:
    """A disaggregated unit's bound (req/s) and the pool that sets it (module docstring)."""
    from ..fleet_setup import fleet_of, pool_configs
    _, _, _, _, a, b = pd
    configs = pool_configs(cfg, fleet_of(cfg))
    bt, limits = engine_of(configs["decode"])
    decode = b * throughput_bound(bt, prompts, outputs, limits, 1, SERVED_FRACTION, "decode").per_replica_rps
    if cfg.pd_decider != "always":
        return decode, f"decode pool ({decode:.3g} req/s; the prefill pool's bound does not hold under decider " \
                       f"{cfg.pd_decider})"
    bt, limits = engine_of(configs["prefill"])
    prefill = a * throughput_bound(bt, prompts, outputs, limits, 1, SERVED_FRACTION, "prefill").per_replica_rps
    if prefill <= decode:
        return prefill, f"prefill pool ({prefill:.3g} req/s a unit; decode {decode:.3g})"
    return decode, f"decode pool ({decode:.3g} req/s a unit; prefill {prefill:.3g})"


def probes_saved(min_replicas: int) -> int:
    """Probes a search starting at one replica spends below ``min_replicas`` (it tries 1, 2, 4, ... while they
    fail): what the bound's lower limit saves a candidate."""
    saved, r = 0, 1
    while r < min_replicas:
        saved += 1
        r *= 2
    return saved

"""Per candidate, the fewest replicas that carry the target rate: a monotone search over the replica count.

Starting at the sound bound's least replicas, a failing probe moves up — when the run was unstable, to where
its measured throughput says the rate would fit (r · rate / throughput) but at least 1.5r, so that a backlog
that barely grows cannot walk the search one replica at a time; else to 2r — and once one count meets and a
smaller one fails, bisection finds the smallest that meets. The search assumes more replicas never hurt
(each replica serves a share of the arrivals). All candidates advance in lock-step, so one round's probes run
together on the executor; the path depends only on verdicts, so every executor gives the same answer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..capacity.lockstep import run_lockstep
from ..capacity.probe import Probe, make_probe, probe_config
from ..experiment import RunConfig
from .prune import Screened


@dataclass
class Searched:
    screened: Screened
    replicas: int | None = None                      # fewest that met (None: none up to --max-replicas)
    probes: dict = field(default_factory=dict)       # replica count -> Probe
    configs: dict = field(default_factory=dict)      # replica count -> the seed-0 probe RunConfig


def _search(start: int, rate: float, max_replicas: int):
    """Generator: yields replica counts, receives their Probes, returns the fewest that met (or None)."""
    fail, meet = start - 1, None
    r = start
    while True:
        p: Probe = yield r
        if p.meets:
            meet = r
        else:
            fail = r
        if meet is not None:
            if meet - fail <= 1:
                return meet
            r = (fail + meet) // 2
            continue
        if r >= max_replicas:
            return None
        if p.verdict != "stable" and p.throughput_rps > 0:
            jump = max(math.ceil(r * rate / p.throughput_rps), math.ceil(1.5 * r))
        else:
            jump = 2 * r
        r = min(max_replicas, max(r + 1, jump))


def search_replicas(screened: list[Screened], bases: dict[str, RunConfig], slos, seeds, max_replicas: int,
                    executor=None, cache=None, progress: bool = False) -> list[Searched]:
    """Search every unpruned candidate; ``bases`` maps scheduler name -> its run options."""
    out = [Searched(s) for s in screened if not s.pruned]
    searches = {i: _search(item.screened.min_replicas, item.screened.rate, max_replicas)
                for i, item in enumerate(out)}

    def configs_for(i, replicas):
        s = out[i].screened
        cfg = s.candidate.config(bases[s.candidate.scheduler], s.rate, replicas)
        return [probe_config(cfg, s.rate, seed) for seed in seeds]

    def record(i, replicas, probe, configs):
        out[i].probes[replicas] = probe
        out[i].configs[replicas] = configs[0]
        return f"{out[i].screened.candidate.label} x{replicas} {'meets' if probe.meets else 'fails'}"

    answers = run_lockstep(searches, configs_for,
                           lambda i, replicas, records: make_probe(out[i].screened.rate, seeds, records, slos),
                           executor, cache, record, "plan" if progress else None)
    for i, item in enumerate(out):
        item.replicas = answers[i]
    return out

"""The planning run (``llmsched plan``, docs/plan.md): every candidate at every rate screened (memory fit, the
sound bound's least replicas), the unpruned ones searched for their fewest replicas on the executor, and the
deployments that met priced, with the cheapest and the cost-vs-latency Pareto frontier."""
from __future__ import annotations

from dataclasses import dataclass

from .candidates import Candidate
from .prune import LengthCache, Screened, screen
from .replica_search import Searched, search_replicas
from .report import Deployment, cheapest, deployments, offload_verdicts, pareto


@dataclass
class PlanResult:
    """A plan's inputs (as the outputs name them) and everything it found."""

    base: object                      # the first scheduler's run options: model, workload, seed
    candidates: list[Candidate]
    rates: list[float]
    slos: list
    seeds: tuple
    max_replicas: int
    metric: str                       # the frontier's latency
    screened: list[Screened]
    searched: list[Searched]
    deployments: list[Deployment]     # every (candidate, replicas) that met, priced
    cheapest: list[Deployment]        # each candidate's fewest replicas that met, cheapest first
    frontier: list[Deployment]
    host_cost: object = None          # a replica's host memory (its CPU KV tier) in USD per hour, or None
    offload: list[str] = ()           # where KV offload pays (report.offload_verdicts)


def plan(candidates: list[Candidate], bases: dict, rates: list[float], slos, seeds: tuple, max_replicas: int,
         price_of, metric: str, executor=None, cache=None, progress: bool = False, host_cost=None) -> PlanResult:
    """Plan ``candidates`` (each run with its scheduler's options in ``bases``) for each of ``rates``;
    ``price_of(gpu)`` is USD per GPU-hour, ``host_cost(candidate)`` a replica's host memory for its KV tiers in USD
    per hour (docs/kv-offload.md), ``metric`` the frontier's latency."""
    lengths = LengthCache()
    screened = [screen(c, bases[c.scheduler], rate, seeds, max_replicas, lengths)
                for rate in rates for c in candidates]
    searched = search_replicas(screened, bases, slos, seeds, max_replicas, executor, cache, progress=progress)
    deps = deployments(searched, price_of, metric, host_cost)
    cheap = cheapest(deps)
    return PlanResult(next(iter(bases.values())), candidates, rates, slos, seeds, max_replicas, metric, screened,
                      searched, deps, cheap, pareto(deps), host_cost, offload_verdicts(cheap, candidates))

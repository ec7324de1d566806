"""Kim et al. §3/§5.1 in one call: heuristic schedules, the CP-SAT optimum warm-started from them,
optional brute force.

The heuristics are InferMax settings run offline on the replica with the same cost model; every one of their
schedules lies inside the CSP's horizon, so the CSP's answer is never worse than any of them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...batchtime.linear import LinearBatchTime
from .bruteforce import solve_exact
from .csp import CspResult, solve
from .offline import offline_replica, run_offline
from .schedule import Instance, Schedule, from_batches

HEURISTICS = ("infermax-vllm", "infermax-vllm-ef", "infermax-sarathi", "infermax-sarathi-ef", "infermax-sarathi-pc",
              "infermax")


@dataclass
class Heuristic:
    name: str
    latency: float
    evictions: int
    schedule: Schedule


@dataclass
class OptimalReport:
    instance: Instance
    heuristics: list[Heuristic]
    csp: CspResult
    whole_pass: tuple[float, Schedule] | None = None  # exact optimum over whole-pass schedules (Dijkstra)
    brute_force: tuple[float, Schedule] | None = None  # exact optimum over all schedules (Dijkstra, tiny only)
    notes: list[str] = field(default_factory=list)

    @property
    def best_latency(self) -> float:
        """The best latency any method found (the CSP's when it solved)."""
        found = [h.latency for h in self.heuristics]
        if self.csp.latency is not None:
            found.append(self.csp.latency)
        return min(found)


def run_heuristics(instance: Instance, cost: LinearBatchTime, names=HEURISTICS) -> list[Heuristic]:
    out = []
    for name in names:
        params = {}
        if instance.prefill_tokens is not None:
            own = 512 if name.startswith("infermax-sarathi") and "-pc" not in name else instance.P
            params["prefill_tokens"] = min(own, instance.P)
        rep = offline_replica(name, cost, instance.kv_slots, instance.batch_tokens, oracle=True, **params)
        res = run_offline(rep, instance.requests(), record=True)
        if res.rejected:
            continue
        out.append(Heuristic(name, res.latency, res.evictions, from_batches(res.batches)))
    return out


def optimal_schedule(instance: Instance, cost: LinearBatchTime, time_limit: float = 30.0, workers: int = 1,
                     horizon: int | None = None, chunking: bool = True, brute_force: bool = False,
                     whole_pass: bool = True) -> OptimalReport:
    heuristics = run_heuristics(instance, cost)
    hints = sorted(heuristics, key=lambda h: h.latency)
    report = OptimalReport(instance, heuristics, CspResult("unknown", None, None, None, 0, 0.0))
    seeds = [h.schedule for h in hints]
    if whole_pass and max(instance.inputs) > instance.P:
        report.notes.append(f"no whole-pass schedule: a prompt of {max(instance.inputs)} tokens is longer than the "
                            f"{instance.P} prompt tokens a batch takes, so only chunked schedules finish it")
    elif whole_pass:
        report.whole_pass = solve_exact(instance, cost, chunking=False)
        if not hints or report.whole_pass[0] < hints[0].latency:
            seeds.insert(0, report.whole_pass[1])
    report.csp = solve(instance, cost, horizon=horizon, time_limit=time_limit, workers=workers, hints=seeds,
                       chunking=chunking)
    if brute_force:
        report.brute_force = solve_exact(instance, cost, chunking=chunking)
    return report

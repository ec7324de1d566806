"""WAIT: Waiting for Accumulated Inference Threshold (seed 003, Ao et al., §4.2 Algorithm 1).

Types are known at arrival (here through the oracle: a request's type is the bin of its true output length).
A type starts only when n_j of its prompts wait at stage 0; it then admits exactly n_j and advances all its
in-flight prompts one stage, so each type moves in lockstep cohorts of n_j and peak KV is Σ n_j c_j: with
memory ≥ that bound WAIT never evicts. Types below threshold are paused (their KV stays).

Deviations, all options: ``max_wait`` > 0 lets a type whose oldest prompt (or paused cohort) waited that long
run with a partial cohort, so a finite run drains (the paper has no such rule; its authors' code drops the
leftovers instead, spec §9.5); a type whose cohort would exceed the token budget, the sequence cap or the free
KV is paused this iteration (the paper assumes (11a) makes that impossible).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from ..engine.plan import BatchPlan
from ..wait.cohorts import CohortPlan
from ..wait.fluid import batch_cap_thresholds, wait_thresholds
from ..wait.setup import iteration_coefficients, parse_thresholds, scheduler_types
from .base import Scheduler
from .registry import register


@register
@dataclass
class Wait(Scheduler):
    """WAIT (seed 003 Alg. 1): a type starts when n_j prompts wait, then advances in lockstep cohorts."""

    name = "wait"
    source = "seed 003 (Ao et al., Fluid-Guided Online Scheduling with Memory Constraints) §4.2, Algorithm 1"
    needs_oracle = True

    types: str = ""            # "RATE:L:L',..." in the paper's units; empty: bins of `lengths`
    lengths: str = "sharegpt"  # length preset, WAIT workload or trace file the types are binned from
    bins: int = 10             # equal-share output bins (when no `edges`)
    edges: str = ""            # output-length bin edges in tokens, e.g. "50,100,...,500"
    rate: float = 1.0          # total arrival rate of the `lengths` types (the fluid rule needs the true one)
    thresholds: str = ""       # explicit n_j, one per type
    rule: str = "batch-cap"    # "batch-cap" (§6.1: Σ n_j(l'_j+1) ≈ B) or "fluid" (smallest n meeting (11))
    batch_cap: int = 0         # B; 0: the replica's max_num_seqs
    d0: float = 0.0            # fluid rule: iteration time d0 + d1·KV tokens; 0: fitted to the batch-time model
    d1: float = 0.0
    slack: float = 0.0         # fluid rule: thresholds from τ = T*·(1 + slack) (> 0: negative drift)
    start: str = "any"         # "any": every type that meets its threshold runs (Alg. 1); "all": only when all do
    max_wait: float = 0.1      # s; a type waiting this long runs a partial cohort (0: never, as in the paper)
    guard_memory: bool = True  # pause a cohort that does not fit the free KV; False: the replica evicts
    gate: str = "type"         # "type": Alg. 1 (a type below threshold pauses); "entry": only admission waits

    def __post_init__(self):
        if self.rule not in ("batch-cap", "fluid"):
            raise ValueError(f"wait rule must be 'batch-cap' or 'fluid', got {self.rule!r}")
        if self.start not in ("any", "all"):
            raise ValueError(f"wait start must be 'any' or 'all', got {self.start!r}")
        if self.gate not in ("type", "entry"):
            raise ValueError(f"wait gate must be 'type' or 'entry', got {self.gate!r}")
        if self.max_wait < 0:
            raise ValueError(f"max_wait must be >= 0 seconds, got {self.max_wait}")

    def _setup(self, view):
        types = scheduler_types(self.types, self.lengths, self.bins, self.edges, self.rate)
        if self.thresholds:
            n = parse_thresholds(self.thresholds, len(types), "type")
        elif self.rule == "batch-cap":
            n = batch_cap_thresholds(types, self.batch_cap or view.max_num_seqs)
        else:
            d0, d1 = iteration_coefficients(self.d0, self.d1, view)
            n = wait_thresholds(types, d0, d1, view.total_blocks * view.block_size, self.slack)
        self.types_, self.n = types, n
        self._decodes = [t.decode for t in types]
        self._type = {}

    def type_of(self, req, view) -> int:
        j = self._type.get(req.id)
        if j is None:
            decode = view.oracle_output_len(req) - 1
            j = min(bisect.bisect_left(self._decodes, decode), len(self._decodes) - 1)
            same = [i for i, d in enumerate(self._decodes) if d == self._decodes[j]]
            if len(same) > 1:
                j = min(same, key=lambda i: abs(self.types_[i].prompt - req.prompt_len))
            self._type[req.id] = j
        return j

    def schedule(self, view) -> BatchPlan:
        if not hasattr(self, "n"):
            self._setup(view)
        m = len(self.n)
        queues = [[] for _ in range(m)]
        flying = [[] for _ in range(m)]
        for r in view.waiting:
            queues[self.type_of(r, view)].append(r)
        for r in view.running:
            flying[self.type_of(r, view)].append(r)
        now, wait = view.now, self.max_wait
        full = [len(queues[j]) >= self.n[j] for j in range(m)]
        late = [bool(wait) and (_oldest(queues[j], flying[j]) + wait <= now) for j in range(m)]
        if self.start == "all" and not all(full):
            ready = [j for j in range(m) if late[j]]
        else:
            ready = [j for j in range(m) if full[j] or late[j]]
        batch = CohortPlan(view, self.guard_memory)
        if self.gate == "entry":  # the authors' modified_booking_limit: in-flight prompts always advance
            for j in range(m):
                batch.add(flying[j])
            for j in ready:
                batch.add(queues[j][:self.n[j]])
        else:
            for j in ready:
                batch.add(queues[j][:self.n[j]] + flying[j])
        plan = batch.finish()
        if not plan.has_work and wait:
            since = (_oldest(queues[j], flying[j]) for j in range(m))
            pending = [t + wait for t in since if now < t + wait < float("inf")]
            if pending:
                plan.wait_until = min(pending)
        return plan

    def on_step_end(self, view, plan, duration):
        if len(self._type) > 4 * (len(view.waiting) + len(view.running)) + 1024:
            live = {r.id for r in view.waiting} | {r.id for r in view.running}
            self._type = {k: v for k, v in self._type.items() if k in live}


def _oldest(queue, flying) -> float:
    """Since when this group has waited: its oldest queued prompt's arrival or its cohort's last token."""
    t = queue[0].arrival if queue else float("inf")
    for r in flying:
        last = r.last_token if r.last_token == r.last_token else r.arrival
        t = min(t, last)
    return t

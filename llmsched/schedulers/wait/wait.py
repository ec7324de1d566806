"""WAIT: Waiting for Accumulated Inference Threshold (Ao et al. §4.2 Algorithm 1).

Types are known at arrival (here through the oracle: a request's type is the bin of its true output length).
A type starts only when n_j of its prompts wait at stage 0; it then admits exactly n_j and advances all its
in-flight prompts one stage, so each type moves in lockstep cohorts of n_j and peak KV is Σ n_j c_j: with
memory ≥ that bound WAIT never evicts. Types below threshold are paused (their KV stays).

Deviations, all options: ``max_wait`` > 0 lets a type whose oldest prompt (or paused cohort) waited that long
run with a partial cohort, so a finite run drains (the paper has no such rule; its authors' code drops the
leftovers instead); a type whose cohort would exceed the token budget, the sequence cap or the free
KV is paused this iteration (the paper assumes (11a) makes that impossible). ``reserve`` (default) makes the
memory check the one (11a) stands for: a new cohort enters only if the KV of every resident prompt plus the
cohort stays within M at every future iteration (``llmsched.schedulers.wait.reserve``), so WAIT does not preempt.
"""
from __future__ import annotations

import bisect
import warnings
from dataclasses import dataclass

from ...bounds import MAX_SECONDS
from ...engine.plan import BatchPlan
from ..registry import register
from .cohorts import CohortPlan
from .fluid_model import batch_cap_thresholds, wait_thresholds
from .parameters import iteration_coefficients, parse_thresholds, scheduler_types
from .reserve import ProfileCohortPlan
from .threshold_policy import ThresholdPolicy, wake_when_late
from .thresholds import RandomisedThresholds, fluid_or_memory_means, report_violations, wait_violations


@register
@dataclass
class Wait(ThresholdPolicy):
    """WAIT (Ao et al. Alg. 1): a type starts when n_j prompts wait, then advances in lockstep cohorts.

    With a prefix cache: thresholds and memory guards count a prompt's whole length (a bound: the replica's free
    blocks count a shared block once); the replica starts each admission after its cached blocks.
    """

    name = "wait"
    family = "WAIT"
    source = "Ao et al., Fluid-Guided Online Scheduling with Memory Constraints §4.2, Algorithm 1"
    needs_oracle = True
    chunks_prompts = False  # cohorts are prefilled whole: a longer prompt is rejected at arrival

    types: str = ""            # "RATE:L:L',..." in the paper's units; empty: bins of `lengths`
    lengths: str = "sharegpt"  # length preset, WAIT workload or trace file the types are binned from
    bins: int = 10             # equal-share output bins (when no `edges`)
    edges: str = ""            # output-length bin edges in tokens, e.g. "50,100,...,500"
    rate: float = 1.0          # total arrival rate of the `lengths` types (the fluid rule needs the true one)
    thresholds: str = ""       # explicit n_j, one per type
    rule: str = "batch-cap"    # "batch-cap" (§6.1: Σ n_j(l'_j+1) ≈ B), "fluid" (smallest integers meeting (11))
    #                            or "fluid-random" (per-iteration draws with mean λ_j T*(1+slack), seeded)
    batch_cap: int = 0         # B; 0: the replica's max_num_seqs
    d0: float = 0.0            # fluid rule: iteration time d0 + d1·KV tokens; 0: fitted to the batch-time model
    d1: float = 0.0
    slack: float = 0.0         # fluid rule: thresholds from τ = T*·(1 + slack) (> 0: negative drift)
    start: str = "any"         # "any": every type that meets its threshold runs (Alg. 1); "all": only when all do
    max_wait: float = 0.1      # s; a type waiting this long runs a partial cohort (0: never, as in the paper)
    guard_memory: bool = True  # pause a cohort that does not fit the free KV; False: the replica evicts
    reserve: bool = True       # admit only cohorts whose future KV, with everyone resident, stays within M
    gate: str = "type"         # "type": Alg. 1 (a type below threshold pauses); "entry": only admission waits;
    #                            "budget": the authors' code (vidur_or modified_booking_limit), per-type budgets
    seed: int = 0              # rule fluid-random: the draws' generator
    strict: bool = False       # thresholds that break (11): error instead of a warning

    def __post_init__(self):
        if self.rule not in ("batch-cap", "fluid", "fluid-random"):
            raise ValueError(f"wait rule must be 'batch-cap', 'fluid' or 'fluid-random', got {self.rule!r}")
        if self.start not in ("any", "all"):
            raise ValueError(f"wait start must be 'any' or 'all', got {self.start!r}")
        if self.gate not in ("type", "entry", "budget"):
            raise ValueError(f"wait gate must be 'type', 'entry' or 'budget', got {self.gate!r}")
        if not 0 <= self.max_wait <= MAX_SECONDS:
            raise ValueError(f"max_wait must be from 0 to {MAX_SECONDS:g} seconds, got {self.max_wait}")

    def setup(self, view):
        types = scheduler_types(self.types, self.lengths, self.bins, self.edges, self.rate)
        memory = view.total_blocks * view.block_size
        self.random_ = None
        if self.thresholds:
            n = parse_thresholds(self.thresholds, len(types), "type")
        elif self.rule == "batch-cap":
            n = batch_cap_thresholds(types, self.batch_cap or view.max_num_seqs)
        elif self.rule == "fluid":
            d0, d1 = iteration_coefficients(self.d0, self.d1, view)
            try:
                n = wait_thresholds(types, d0, d1, memory, self.slack)
            except ValueError as e:  # overloaded, or no integer thresholds fit this KV cache at the run's rate
                if self.strict:
                    raise
                warnings.warn(f"wait rule=fluid: {e}; using the batch-cap rule's thresholds instead (strict=True "
                              f"makes this an error)", stacklevel=2)
                n = batch_cap_thresholds(types, self.batch_cap or view.max_num_seqs)
        else:
            d0, d1 = iteration_coefficients(self.d0, self.d1, view)
            means, over = fluid_or_memory_means("wait", types, None, d0, d1, self.slack, memory, view.max_num_seqs)
            if over:
                warnings.warn(f"wait rule=fluid-random: the load has no fluid equilibrium at d0={d0:.4g}, "
                              f"d1={d1:.4g} (ρ >= 1); thresholds scaled to fill the KV instead", stacklevel=2)
            self.random_ = RandomisedThresholds(means, self.seed)
            n = [max(1, round(x)) for x in self.random_.means]
        self.types_, self.n = types, n
        self._decodes = [t.decode for t in types]
        self._type = {}
        self.violations = self._check(view, types, self.random_.means if self.random_ else n, memory)

    def _check(self, view, types, n, memory) -> list[str]:
        """(11) for the thresholds in use (their means when randomised), under d0, d1 given or fitted."""
        if not self.d0 and view.batch_time is None:
            return []
        d0, d1 = iteration_coefficients(self.d0, self.d1, view)
        return report_violations("wait", n, wait_violations(types, n, d0, d1, memory), d0, d1, memory,
                                 self.strict, "(11)")

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

    def decide(self, view, n) -> BatchPlan:
        m = len(self.n)
        queues = [[] for _ in range(m)]
        flying = [[] for _ in range(m)]
        known = self._type.get  # type_of's memo, read inline: this runs for every request at every decision
        for r in view.waiting:
            j = known(r.id)
            queues[self.type_of(r, view) if j is None else j].append(r)
        for r in view.running:
            j = known(r.id)
            flying[self.type_of(r, view) if j is None else j].append(r)
        now, wait = view.now, self.max_wait
        full = [len(queues[j]) >= n[j] for j in range(m)]
        late = [bool(wait) and (_oldest(queues[j], flying[j]) + wait <= now) for j in range(m)]
        n = [max(1, x) if late[j] else x for j, x in enumerate(n)]
        if self.start == "all" and not all(full):
            ready = [j for j in range(m) if late[j]]
        else:
            ready = [j for j in range(m) if full[j] or late[j]]
        if self.reserve:  # Alg. 1's types pause independently: bound memory by the sum of per-type peaks
            if self.gate == "type":
                batch = ProfileCohortPlan(view, self.guard_memory, lambda r: self.type_of(r, view),
                                          {j: flying[j] for j in range(m) if flying[j]})
            else:
                batch = ProfileCohortPlan(view, self.guard_memory)
        else:
            batch = CohortPlan(view, self.guard_memory)
        if self.gate == "entry":  # in-flight prompts always advance; a type waits only to enter
            for j in range(m):
                batch.add(flying[j])
            for j in ready:
                batch.add(queues[j][:n[j]])
        elif self.gate == "budget":  # vidur_or modified_booking_limit
            budget = self._budgets(view)
            want = [min(n[j], int(budget[j] - len(flying[j]))) for j in range(m)]
            if any(len(queues[j]) >= want[j] or late[j] for j in range(m)):
                for j in range(m):
                    batch.add(flying[j])
                for j in range(m):
                    batch.add(queues[j][:max(want[j], 0)])
        else:
            for j in ready:
                batch.add(queues[j][:n[j]] + flying[j])
        return wake_when_late(batch.finish(), (_oldest(queues[j], flying[j]) for j in range(m)), wait, now)

    def _budgets(self, view) -> list[float]:
        """gate=budget: type j may hold B_j = B·λ_j(l'_j+1)/Σλ(l'+1) prompts in flight (the authors' per-type
        booking limit). A batch forms when some type has min(n_j, B_j − in flight) prompts waiting (a type at its
        budget always qualifies); then every in-flight prompt advances and every type admits up to that many."""
        if not hasattr(self, "budget_"):
            B = self.batch_cap or view.max_num_seqs
            total = sum(t.rate * t.stages for t in self.types_)
            self.budget_ = [max(B * t.rate * t.stages / total, nj) for t, nj in zip(self.types_, self.n)]
        return self.budget_

    def on_step_end(self, view, plan, duration):
        if len(self._type) > 4 * (len(view.waiting) + len(view.running)) + 1024:
            live = {r.id for r in view.waiting} | {r.id for r in view.running}
            self._type = {k: v for k, v in self._type.items() if k in live}


def _oldest(queue, flying) -> float:
    """Since when this group has waited: its oldest queued prompt's arrival or its cohort's last token."""
    t = queue[0].arrival if queue else float("inf")
    for r in flying:
        last = r.last_token
        if last != last:  # NaN: no token yet
            last = r.arrival
        if last < t:
            t = last
    return t

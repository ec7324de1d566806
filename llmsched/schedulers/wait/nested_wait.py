"""Nested WAIT (Ao et al. §5.1 Algorithm 2): WAIT for unknown output lengths.

The decode lengths of a length distribution's bins cut the stages into segments (segment 1: the prefill and the
first l'_1 decodes; segment s: decodes l'_{s−1}+1..l'_s). Prompts classify themselves on the fly: one that
emits EOS inside a segment leaves, one that reaches a segment's end waits at the next segment's boundary with its
KV. Each iteration, for s = 1, 2, ...: if fewer than n_s prompts wait at segment s's boundary, segment s and all
later ones pause; otherwise n_s of them enter and every prompt inside s advances one stage. Thresholds descend,
n_s ∝ Λ_s (the rate that reaches segment s), scaled by the batch cap B (§6.2 and the authors' code).

The scheduler never reads a request's output length: only its progress (tokens generated so far).

Deviations, all options: ``max_wait`` > 0 lets a segment whose oldest waiting prompt (or paused cohort) waited
that long run with a partial cohort, so that a finite run drains and low load does not stall (the
authors' older code used a 1 s timeout); a segment whose cohort does not fit the token budget, the sequence cap
or the free KV pauses like one below threshold; ``reserve`` (default) admits a cohort only if every resident
prompt can still reach the end of its segment (``llmsched.schedulers.wait.reserve``). Prompts longer than the
last bin stay in the last segment.
Time-varying rates (§7.1): ``adapt_window`` > 0 rescales the thresholds to the arrival rate seen in that window
(with rule "fluid"; under "batch-cap" only the rates' ratios matter). Segment design (§7.2): ``bins``/``edges``
merge the types into S segments.
"""
from __future__ import annotations

import bisect
import warnings
from collections import deque
from dataclasses import dataclass

from ...bounds import MAX_SECONDS
from ...engine.plan import BatchPlan
from ...request import Status
from ..registry import register
from ..tunable import FloatRange, IntRange
from .cohorts import CohortPlan
from .fluid_model import Overloaded, fluid
from .nested import nested_thresholds, segments
from .parameters import iteration_coefficients, parse_thresholds, scheduler_types
from .reserve import ReservingCohortPlan, segment_need
from .threshold_policy import ThresholdPolicy, wake_when_late
from .thresholds import RandomisedThresholds, fluid_or_memory_means, nested_violations, report_violations


@register
@dataclass
class NestedWait(ThresholdPolicy):
    """Nested WAIT (Ao et al. Alg. 2): segments by output length, descending thresholds, lengths unknown.

    With a prefix cache: as WAIT, thresholds and memory guards count a prompt whole (the replica's free blocks count
    a shared block once); admissions start after their cached blocks.
    """

    name = "nested-wait"
    family = "WAIT"
    source = "Ao et al., Fluid-Guided Online Scheduling with Memory Constraints §5.1, Algorithm 2"
    chunks_prompts = False  # cohorts are prefilled whole: a longer prompt is rejected at arrival

    lengths: str = "sharegpt"  # length preset, WAIT workload or trace file the segments are cut from
    bins: int = 10             # S equal-share output bins (when no `edges`)
    edges: str = ""            # output-length segment ends in tokens, e.g. "50,100,...,500"
    types: str = ""            # or explicit "RATE:L:L',..." (paper units); one segment per decode length
    rate: float = 1.0          # total arrival rate (the fluid rule needs the true one)
    thresholds: str = ""       # explicit n_s, one per segment
    rule: str = "batch-cap"    # "batch-cap": n_s = ⌈B·Λ_s/Σ c̃Λ⌉; "fluid": n_1 = ⌈Λ_1 T(n)(1+slack)⌉, n_s ∝ Λ_s;
    #                            "fluid-random": per-iteration draws with mean Λ_s T*(1+slack)^s (seeded)
    batch_cap: int = 0         # B; 0: the replica's max_num_seqs
    d0: float = 0.0            # fluid rule: iteration time d0 + d1·KV tokens; 0: fitted to the batch-time model
    d1: float = 0.0
    slack: float = 0.0
    max_wait: float = 0.1      # s; a segment waiting this long runs a partial cohort (0: never, as in the paper)
    guard_memory: bool = True  # pause a cohort that does not fit the free KV; False: the replica evicts
    reserve: bool = True       # admit only cohorts whose KV to their segment's end fits what others are owed
    adapt_window: float = 0.0  # s; > 0 with rule "fluid": re-derive thresholds from the recent arrival rate
    gate: str = "nested"       # "nested": Alg. 2 pausing; "entry": only admissions wait; "budget": Alg. 2 with
    #                            the authors' per-segment budgets (vidur_or general_nested_booking_limit)
    seed: int = 0              # rule fluid-random: the draws' generator
    strict: bool = False       # thresholds that break (12) or M(n) <= M: error instead of a warning
    # cohorts prefill whole: the engine's token cap is its prefill budget, max_num_seqs its batch cap B
    tunable = {"bins": IntRange(1, 20), "max_wait": FloatRange(0.005, 2.0, log=True),
               "max_num_seqs": IntRange(16, 1024, log=True), "max_num_batched_tokens": IntRange(2048, 32768, log=True)}

    def __post_init__(self):
        if self.rule not in ("batch-cap", "fluid", "fluid-random"):
            raise ValueError(f"nested-wait rule must be 'batch-cap', 'fluid' or 'fluid-random', got {self.rule!r}")
        if self.gate not in ("nested", "entry", "budget"):
            raise ValueError(f"nested-wait gate must be 'nested', 'entry' or 'budget', got {self.gate!r}")
        if not (0 <= self.max_wait <= MAX_SECONDS and 0 <= self.adapt_window <= MAX_SECONDS):
            raise ValueError(f"max_wait and adapt_window must be from 0 to {MAX_SECONDS:g} seconds")

    def setup(self, view):
        types = scheduler_types(self.types, self.lengths, self.bins, self.edges, self.rate)
        self.types_ = types
        self.segments_ = segments(types)
        self._ends = [s.last for s in self.segments_]
        self._ends[-1] = 1 << 60  # longer prompts stay in the last segment
        self._firsts = [s.first for s in self.segments_]
        self._lasts = [s.last for s in self.segments_]
        self._arrivals = deque()
        self._prompt = sum(t.rate * t.prompt for t in types) / sum(t.rate for t in types)
        self._coef = None
        self.random_ = None
        if self.rule == "fluid-random" and not self.thresholds:
            d0, d1 = iteration_coefficients(self.d0, self.d1, view)
            means, over = fluid_or_memory_means("nested", types, self.segments_, d0, d1, self.slack,
                                                view.total_blocks * view.block_size, view.max_num_seqs)
            if over:
                warnings.warn(f"nested-wait rule=fluid-random: the load has no fluid equilibrium at d0={d0:.4g}, "
                              f"d1={d1:.4g} (ρ >= 1); thresholds scaled to fill the KV instead", stacklevel=2)
            self.random_ = RandomisedThresholds(means, self.seed)
            self.n = [max(1, round(x)) for x in self.random_.means]
        else:
            try:
                self.n = self._thresholds(view, self.segments_[0].rate)
            except Overloaded as e:  # the run's own rate is beyond the fluid model's capacity
                if self.strict:
                    raise
                warnings.warn(f"nested-wait rule=fluid: {e}; using the batch-cap rule's thresholds instead "
                              f"(strict=True makes this an error)", stacklevel=2)
                self.n = nested_thresholds(self.segments_, self.batch_cap or view.max_num_seqs)
        self.adapted = [(view.now, self.n[0])]  # (time, n_1) each time adapt_window changes the thresholds
        self.violations = self._check(view, self.random_.means if self.random_ else self.n)

    def _check(self, view, n) -> list[str]:
        """(12) and M(n) <= M for the thresholds in use (their means when randomised), d0, d1 given or fitted."""
        if not self.d0 and view.batch_time is None:
            return []
        d0, d1 = iteration_coefficients(self.d0, self.d1, view)
        memory = view.total_blocks * view.block_size
        return report_violations("nested-wait", n, nested_violations(self.segments_, n, self._prompt, d0, d1, memory),
                                 d0, d1, memory, self.strict)

    def _thresholds(self, view, total_rate: float) -> list[int]:
        segs = self.segments_
        if self.thresholds:
            return parse_thresholds(self.thresholds, len(segs), "segment")
        if self.rule == "batch-cap":
            return nested_thresholds(segs, self.batch_cap or view.max_num_seqs)
        if self._coef is None:
            self._coef = iteration_coefficients(self.d0, self.d1, view)
        d0, d1 = self._coef
        scale = total_rate / segs[0].rate
        types = [type(t)(t.rate * scale, t.prompt, t.decode) for t in self.types_]
        tau = fluid(types, d0, d1).T * (1 + self.slack)
        return [max(1, -int(-(s.rate * scale * tau) // 1)) for s in segs]

    def segment_of(self, stage: int) -> int:
        return bisect.bisect_left(self._ends, stage)

    def on_arrival(self, req, view):
        if self.adapt_window:
            if not hasattr(self, "n"):
                self.setup(view)
            self._arrivals.append(view.now)
        return None

    def decide(self, view, n) -> BatchPlan:
        now, wait = view.now, self.max_wait
        if self.adapt_window and self.rule == "fluid":
            while self._arrivals and self._arrivals[0] < now - self.adapt_window:
                self._arrivals.popleft()
            if len(self._arrivals) >= 10:
                try:
                    n = self._thresholds(view, len(self._arrivals) / self.adapt_window)
                except Overloaded:  # no finite thresholds for this rate (ρ ≥ 1): keep the last ones
                    n = self.n
                if n != self.n:
                    self.adapted.append((now, n[0]))
                    self.n = n
        segs = self.segments_
        m = len(segs)
        queues = [[] for _ in range(m)]
        flying = [[] for _ in range(m)]
        queues[0].extend(view.waiting)
        ends, firsts, lasts = self._ends, self._firsts, self._lasts
        locate = bisect.bisect_left
        reserve, bs, owed = self.reserve, view.block_size, 0
        for r in view.running:
            k = r.num_generated
            s = locate(ends, k)  # self.segment_of(k), inlined (this loop is per request)
            (queues if s and k == firsts[s] else flying)[s].append(r)
            if reserve:  # the blocks r may still take by the end of its segment (segment_need)
                need = -(-(r.prompt_len + (lasts[s] if lasts[s] > k else k)) // bs) - r.num_blocks
                if need > 0:
                    owed += need
        for q in queues[1:]:
            q.sort(key=lambda r: r.last_token)  # first to reach the boundary enters first
        since = [_since(queues[s], flying[s]) for s in range(m)]
        late = [bool(wait) and t + wait <= now for t in since]
        n = [max(1, x) if late[s] else x for s, x in enumerate(n)]
        batch = self._plan(view, owed)
        if self.gate == "entry":
            return self._entry_gated(view, batch, queues, flying, late, n)
        budget = self._budgets(view) if self.gate == "budget" else None
        for s in range(m):
            q, f = queues[s], flying[s]
            want = n[s] if budget is None else min(n[s], int(budget[s] - len(f)))
            if len(q) < want and not late[s]:
                if q or f or not any(late[s + 1:]):
                    break  # pause segment s and every later one
                continue  # drain: an empty segment does not hold back later ones that waited max_wait
            if not batch.add(q[:max(want, 0)] + f):
                break
        return wake_when_late(batch.finish(), since, wait, now)

    def _plan(self, view, owed: int) -> CohortPlan:
        """The batch under construction; ``owed``: the running requests' promised blocks (``reserve`` only)."""
        if not self.reserve:
            return CohortPlan(view, self.guard_memory)
        segs, ends = self.segments_, self._ends
        end = lambda r: segs[min(bisect.bisect_left(ends, r.num_generated), len(segs) - 1)].last  # noqa: E731
        return ReservingCohortPlan(view, segment_need(view, end), view.running, self.guard_memory, owed)

    def _budgets(self, view) -> list[float]:
        """gate=budget: segment s may hold B·c̃_sΛ_s/Σc̃Λ prompts (vidur_or general_nested_booking_limit's
        seg_total_limit); a segment at its budget runs without waiting for its threshold."""
        if not hasattr(self, "budget_"):
            B = self.batch_cap or view.max_num_seqs
            total = sum(s.stages * s.rate for s in self.segments_)
            # at least n_s: the authors' int() gives tiny segments a budget of 0 and strands their prompts
            self.budget_ = [max(int(B * s.stages * s.rate / total), n) for s, n in zip(self.segments_, self.n)]
        return self.budget_

    def _entry_gated(self, view, batch, queues, flying, late, n) -> BatchPlan:
        """The authors' later code (vidur_or, general_nested_booking_limit): prompts inside any segment advance
        every iteration; only entry into segment s waits for n_s prompts at its boundary (or max_wait); segments
        do not hold each other back. Later segments first, so admissions never crowd out prompts holding KV."""
        for s in reversed(range(len(queues))):
            batch.add(flying[s])
        for s in range(len(queues)):
            q = queues[s]
            if q and (len(q) >= n[s] or late[s]):
                batch.add(q[:n[s]])
        return wake_when_late(batch.finish(), (_since(q, []) for q in queues), self.max_wait, view.now)


def _since(queue, flying) -> float:
    """Since when this segment has waited: its oldest queued prompt's arrival (segment 1) or boundary time, or
    its in-flight cohort's last token."""
    t = float("inf")
    for r in queue[:1]:
        t = r.arrival if r.status is Status.WAITING else r.last_token
    for r in flying:
        last = r.last_token if r.last_token == r.last_token else r.arrival
        if last < t:
            t = last
    return t

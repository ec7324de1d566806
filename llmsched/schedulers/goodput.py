"""goodput: the five papers' levers in one policy, each kept only where an ablation pays for it (docs/goodput.md).

A step is built in four moves.

1. **Every running decode, always** (Sarathi-Serve's stall-free rule): a TBT or TPOT target is a constraint, so no
   decode is ever deferred to make room; the only freedom is how long the step is.
2. **A time budget from the tightest decode slack** (FairBatching, Lyu et al. §3.2): the step may last
   ``step_fill`` times the least time any decode has left before its target (TBT: its last token + the target; TPOT:
   its envelope first token + j·TPOT, so early tokens bank slack), predicted by a linear step-time model ``a +
   b·tokens + c·context`` fitted to the replica's batch-time model and corrected online by the ratio of observed to
   predicted step times (the view's recent step times; in vLLM, the engine's real ones). The time budget works
   inside ``token_budget`` (tokens a step, lowered to the replica's cap before a run), which alone bounds a step
   with no decode running (no TBT at stake). Where the decodes alone overrun the target (a device too slow for it)
   it cannot be met this step and prompts get ``token_budget``; otherwise the first prompt still advances
   ``MIN_CHUNK`` tokens, so prompts are never starved. ``time_budget=False`` leaves ``token_budget`` alone (the
   ablation).
3. **Prefills in an SLO-aware shortest-first order** (RAD/SLAI's shortest-prefill-first, Bari et al. §6-7;
   InferMax Rank_I): by uncached prompt tokens left (a prefix cache makes a hit cost nothing: the view's cached
   tokens, where it has them, are subtracted). A request that has already missed its TTFT target, or cannot make it
   even if started now, no longer changes the TTFT percentile it counts in: it goes behind every request that still
   can, oldest first, so it is served (the capacity verdict counts a backlog) but never at the expense of one that
   can still meet. Requests resuming after a preemption come first (their TTFT is spent, their gap is growing).
   ``order="spf"`` drops the missed-target rule, ``"fcfs"`` the shortest-first order.
4. **Memory-aware admission** (WAIT's thresholds, Ao et al.; SLAI's watermark): a new prompt is admitted
   only while the KV held plus every admitted prompt's remaining blocks plus this one stays under ``kv_admit`` of
   the cache, so that decodes growing into the rest do not cascade into evictions. On an idle replica a prompt past
   the threshold runs only if no other prompt can: prompts that already hold their KV (a prefill instance sent
   them) would otherwise wait behind one that can never grow into the cache they hold. When a decode still finds no
   block, the victim is the **cheapest to recompute** (InferMax's cost-aware eviction, Kim et al. §6:
   least KV computed first), not the newest. ``evict="newest"`` is vLLM's rule (the ablation). The step then
   decodes only; if no decode is left, the prompts in progress run on the freed blocks.

Deferred prefill's lever (Mohanty et al.,: amortise a step's fixed cost over more prefills) is
``defer_tokens``: with no decode running, a prefill of fewer tokens than that waits (while every waiting request
still has TTFT slack) for more to arrive. Mixed steps already share their fixed cost with the decodes, so it only
acts at low load; off by default (docs/goodput.md has the measurement).

Requests without their own targets use ``ttft_target``, ``tbt_target`` and ``tpot_target`` (seconds; a TPOT target,
when set, paces decodes by the envelope instead of the gap). The policy never reads true output lengths.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from operator import attrgetter

from ..engine.plan import BatchPlan
from ..engine.view import ReplicaView
from .fairbatching.predictor import StepPredictor
from ..request import Request, Status
from .base import Scheduler
from .decode_pass import add_decodes
from .registry import register, register_variant
from .tunable import FloatRange, IntRange

ORDERS = ("slo-spf", "spf", "fcfs")
EVICTIONS = ("cheapest", "newest")
ARRIVAL = attrgetter("arrival")
NUM_COMPUTED = attrgetter("num_computed")
WAITING = Status.WAITING
# The correction ratio (observed / predicted step time) follows overruns fast and underruns slowly, so that it
# tracks a high quantile of the error rather than its mean: a TBT target is met by the tail of the steps.
RATIO_UP, RATIO_DOWN = 0.3, 0.02
RATIO_BOUNDS = (0.5, 2.0)
# The first prompt of a step advances by at least this many tokens even when the time budget is spent, so a decode
# batch that fills the budget cannot starve prompts: on a GPU that is a few ms, inside step_fill's margin.
MIN_CHUNK = 64


@register
@dataclass
class Goodput(Scheduler):
    """goodput: every decode, a step as long as the tightest decode slack allows, SLO-aware shortest-first
    prefills, KV-threshold admission and cheapest-first eviction (the five papers' levers, ablated)."""

    name = "goodput"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks
    family = "goodput"
    source = ("llmsched's own design, with levers from Bari et al. (SLAI SPF, watermark), Kim et al. (InferMax "
              "cost-aware eviction), Lyu et al. (FairBatching time budget, online-corrected predictor), Ao et al. "
              "(WAIT memory thresholds), Mohanty et al. (deferred prefill); ablation in docs/goodput.md")
    ttft_target: float = 2.0
    tbt_target: float | None = 0.1
    tpot_target: float | None = None
    step_fill: float = 0.9
    time_budget: bool = True
    # the step's token cap, inside which the time budget works: large, so that on a fast device the time budget is
    # what binds (Sarathi's 512 cut goodput's capacity under a tight TTFT target: docs/goodput.md)
    token_budget: int = 2048
    order: str = "slo-spf"
    kv_admit: float = 0.95
    evict: str = "cheapest"
    online: bool = True
    defer_tokens: int = 0
    token_budgets = ("token_budget",)  # above the replica's cap it is lowered to it before the run
    tunable = {"step_fill": FloatRange(0.3, 1.0), "kv_admit": FloatRange(0.5, 1.0),
               "ttft_target": FloatRange(0.1, 10.0, log=True), "max_num_seqs": IntRange(16, 1024, log=True),
               "token_budget": IntRange(64, 8192, log=True)}

    def __post_init__(self):
        for label in ("ttft_target", "tbt_target", "tpot_target"):
            v = getattr(self, label)
            if v is not None and not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
                raise ValueError(f"goodput: {label} must be a positive number of seconds (or None), got {v!r}")
        if self.tbt_target is None and self.tpot_target is None:
            raise ValueError("goodput: give tbt_target or tpot_target (the decode target of requests without one)")
        if not 0 < self.step_fill <= 1:
            raise ValueError(f"goodput: step_fill must be in (0, 1], got {self.step_fill}")
        if not 0 < self.kv_admit <= 1:
            raise ValueError(f"goodput: kv_admit must be in (0, 1], got {self.kv_admit}")
        if self.token_budget < 1:
            raise ValueError(f"goodput: token_budget must be >= 1, got {self.token_budget}")
        if self.defer_tokens < 0:
            raise ValueError(f"goodput: defer_tokens must be >= 0, got {self.defer_tokens}")
        if self.order not in ORDERS:
            raise ValueError(f"goodput: order must be one of {', '.join(ORDERS)}, got {self.order!r}")
        if self.evict not in EVICTIONS:
            raise ValueError(f"goodput: evict must be one of {', '.join(EVICTIONS)}, got {self.evict!r}")
        self._pred: StepPredictor | None = None
        self._ratio = [1.0, 1.0]  # correction of decode-only steps, and of steps with prompt chunks
        self._pending = 0.0  # the running step's predicted seconds (0: nothing to learn from)
        self._targets: dict = {}

    def describe(self) -> dict:
        pred = self._pred
        return {**super().describe(), "predictor": None if pred is None else
                {"a": pred.a, "b": pred.b, "c": pred.c, "ratio_decode": self._ratio[0],
                 "ratio_prefill": self._ratio[1]}}

    # --- targets and prediction ---------------------------------------------------------------------------
    def targets(self, r: Request) -> tuple[float, float, bool]:
        """(TTFT, decode target, whether the decode target is a TPOT envelope) of ``r``, once per SLO object."""
        t = self._targets.get(r.slo)
        if t is None:
            slo = r.slo
            ttft = slo.ttft if slo.ttft is not None else self.ttft_target
            if slo.tbt is not None:
                t = (ttft, slo.tbt, False)
            elif slo.tpot is not None:
                t = (ttft, slo.tpot, True)
            elif self.tpot_target is not None and self.tbt_target is None:
                t = (ttft, self.tpot_target, True)
            else:
                t = (ttft, self.tbt_target if self.tpot_target is None else min(self.tbt_target, self.tpot_target),
                     False)
            self._targets[r.slo] = t
        return t

    def predictor(self, view: ReplicaView) -> StepPredictor | None:
        if self._pred is None and self.time_budget and view.batch_time is not None:
            self._pred = StepPredictor.fit_to(view.batch_time)
        return self._pred

    def on_step_end(self, view: ReplicaView, plan: BatchPlan, duration: float) -> None:
        if self._pending > 0 and self.online and duration > 0:
            i = 1 if plan.prefills else 0
            old = self._ratio[i]
            seen = duration / self._pending * old  # the ratio this step called for
            r = old + (RATIO_UP if seen > old else RATIO_DOWN) * (seen - old)
            self._ratio[i] = min(max(r, RATIO_BOUNDS[0]), RATIO_BOUNDS[1])
        self._pending = 0.0

    # --- one step -----------------------------------------------------------------------------------------
    def schedule(self, view: ReplicaView) -> BatchPlan:
        plan = BatchPlan()
        now = view.now
        running = view.running
        bs = view.block_size
        decodes, partial = plan.decodes, []
        context = grow = 0
        for r in running:
            g = r.num_generated
            k = r.num_computed
            if g and k == r.prompt_len + g - 1:  # r.is_decode
                decodes.append(r)
                context += k + 1
                if k >= r.num_blocks * bs:
                    grow += 1
            else:
                partial.append(r)
        free = view.free_blocks
        if grow > free:  # a decode finds no block: evict, then this step decodes only
            self._evict(view, plan, running)
            if plan.decodes or not partial:
                return plan
            # every decode was evicted: the prompts in progress run on the blocks that freed (a plan of evictions
            # alone would leave the replica with nothing to run)
            gone = {r.id for r in plan.preempt}
            left = [r for r in partial if r.id not in gone]
            freed = view.free_blocks + sum(view.preempt_frees(r) for r in plan.preempt)
            if left:
                self._prefills(view, plan, left, (), self.token_budget, math.inf, 0.0, 0.0, freed, now)
            return plan
        free -= grow
        pred = self.predictor(view)
        cap = self.token_budget - len(decodes)
        waiting = view.waiting
        if cap > 0 and (partial or waiting):  # only a step with prompts needs the decodes' slack
            if pred is None:
                per_token = per_context = 0.0
                left = math.inf
            else:
                slack, tightest = self._slack(decodes, now)
                ratio = self._ratio[1]  # the step is planned as one with prompt chunks
                per_token, per_context = pred.b * ratio, pred.c * ratio
                spent = pred.a * ratio + per_token * len(decodes) + per_context * context
                left = slack * self.step_fill - spent if decodes else math.inf
                if spent >= tightest * self.step_fill:  # these decodes alone overrun the target: it cannot be
                    left = math.inf                      # met this step, so prompts get the token budget
            self._prefills(view, plan, partial, waiting, cap, left, per_token, per_context, free, now)
        if not plan.has_work and partial and any(r.num_blocks for r in waiting):
            # a prompt in progress found no block while the waiting hold theirs (prompts a prefill instance sent,
            # KV a tier loaded): vLLM preempts then, and the prompt's blocks let a held one run; the cheapest, as
            # ``_evict`` orders them (a plan of that alone: the replica asks again)
            plan.preempt.append(sorted(sorted(partial, key=ARRIVAL, reverse=True), key=NUM_COMPUTED)[0])
            return plan
        if pred is not None and plan.has_work:
            tokens = len(decodes) + sum(n for _, n in plan.prefills)
            ctx = context + sum(r.num_computed + n for r, n in plan.prefills)
            self._pending = (pred.a + pred.b * tokens + pred.c * ctx) * self._ratio[1 if plan.prefills else 0]
        return plan

    def _slack(self, decodes, now: float) -> tuple[float, float]:
        """(the least time any decode has before its target, the tightest decode target among them)."""
        slack = tightest = math.inf
        slo = t = None  # the last request's SLO object and targets: most requests share their tier's
        for r in decodes:
            if r.slo is not slo:
                slo = r.slo
                t = self.targets(r)
                if t[1] < tightest:
                    tightest = t[1]
            s = (r.first_token + t[1] * r.num_generated if t[2] else r.last_token + t[1]) - now
            if s < slack:
                slack = s
        return slack, tightest

    def _prefills(self, view, plan, partial, waiting, cap, left, per_token, per_context, free, now) -> None:
        """Prompt chunks in priority order while tokens, time, seats and KV (below the admission threshold) last."""
        if self.defer_tokens and not view.num_running:
            wake = self._defer(waiting, now)
            if wake is not None:
                plan.wait_until = wake
                return
        seats = view.max_num_seqs - len(view.running)
        if seats < 1:  # no seat for a new prompt: order only those that hold one (an overloaded queue is long)
            waiting = [r for r in waiting if r.status is not WAITING]
        pending = self._ordered(view, partial, waiting, now, per_token)
        seated = len(pending) - sum(1 for r in waiting if r.status is WAITING)  # prompts that need no new seat
        bs = view.block_size
        total = view.total_blocks
        # KV promised to admitted prompts (their whole remaining prompt) counts as used for admission
        promised = sum(view.extra_blocks(r, r.prompt_len + r.num_generated) for r in partial)
        used = total - free + promised
        limit = self.kv_admit * total
        alone = None  # the first prompt over the threshold while nothing runs: admitted only if nothing else can be
        for _, r in pending:
            if cap <= 0 or (left <= 0 and plan.prefills):
                break
            admit = r.status is WAITING
            if not admit:
                seated -= 1
            elif seats < 1:  # the seats ran out: only prompts already seated can still run
                if not seated:
                    break
                continue
            k = r.num_computed
            n = r.prompt_len + r.num_generated - k
            if n > cap:
                n = cap
            if left < math.inf:
                fit = int((left - per_context * k) / (per_token + per_context))
                if not plan.prefills and fit < MIN_CHUNK:
                    fit = MIN_CHUNK
                if fit < n:
                    n = fit
            if n < 1:
                continue
            need = -(-(k + n) // bs) - r.num_blocks
            if admit:
                whole = -(-(r.prompt_len + r.num_generated) // bs) - r.num_blocks  # (a sent prompt holds its own)
                if need > free:
                    continue
                if whole and used + whole > limit:
                    if alone is None and not view.num_running:
                        alone = (r, n)
                    continue
                seats -= 1
                used += whole
            elif need > free:
                continue
            plan.prefills.append((r, n))
            free -= need
            cap -= n
            left -= per_token * n + per_context * (k + n)
        if alone is not None and not plan.prefills:
            plan.prefills.append(alone)  # an empty replica serves it past the threshold: nothing else can run

    def _ordered(self, view, partial, waiting, now: float, per_token: float) -> list:
        """(priority, request) for every prompt to run, lowest first: requests resuming after a preemption (their
        TTFT is spent, their gap grows), then those that can still meet their TTFT target by uncached prompt
        left, then those that cannot, oldest first. Ties keep running order, then queue order."""
        if self.order == "fcfs":
            return [(None, r) for r in sorted(partial, key=ARRIVAL)] + [(None, r) for r in waiting]
        cached = getattr(view, "cached_tokens", None)  # a prefix cache's hits, where the view reports them
        aware = self.order == "slo-spf"
        out = []
        slo = ttft = None
        for group in (partial, waiting):
            for r in group:
                g = r.num_generated
                if g:
                    out.append(((-1, r.arrival), r))
                    continue
                left = r.prompt_len - r.num_computed
                if cached is not None and group is waiting and not r.num_computed:
                    left -= cached(r)
                if aware:
                    if r.slo is not slo:
                        slo = r.slo
                        ttft = self.targets(r)[0]
                    if now - r.arrival + left * per_token > ttft:
                        out.append(((1, r.arrival), r))
                        continue
                out.append(((0, left), r))
        out.sort(key=_first)
        return out

    def _defer(self, waiting, now) -> float | None:
        """Deferred prefill: with nothing running, hold a prefill smaller than ``defer_tokens`` while every waiting
        request has more than half its TTFT target left; the time to ask again (when the first would not), or
        None to run it now."""
        tokens = sum(r.prompt_len + r.num_generated - r.num_computed for r in waiting)
        if tokens >= self.defer_tokens:
            return None
        due = min(r.arrival + self.targets(r)[0] / 2 for r in waiting)
        return due if due > now else None

    def _evict(self, view, plan: BatchPlan, running) -> BatchPlan:
        """Decodes short of KV: preempt the cheapest to recompute (least KV computed; prompts in progress count
        the same way) until every remaining decode has its block; ``evict="newest"`` preempts as vLLM does."""
        plan.decodes.clear()
        if self.evict == "newest":
            add_decodes(view, plan, running)
            return plan
        bs = view.block_size
        free = view.free_blocks
        victims = sorted(sorted(running, key=ARRIVAL, reverse=True), key=NUM_COMPUTED)
        gone = set()
        need = sum(1 for r in running if r.is_decode and r.num_computed >= r.num_blocks * bs)
        for v in victims:
            if need <= free:
                break
            gone.add(v.id)
            plan.preempt.append(v)
            free += view.preempt_frees(v)  # its own blocks: those another running request shares stay held
            if v.is_decode and v.num_computed >= v.num_blocks * bs:
                need -= 1
        plan.decodes.extend(r for r in running if r.is_decode and r.id not in gone)
        return plan


def _first(item):
    return item[0]


register_variant("goodput-fixed-budget", Goodput, "goodput without the time budget: a fixed token budget (ablation)",
                 time_budget=False)

"""FairBatching (Lyu et al.): envelope deadlines, a time-budgeted step and fair batch formation.

Registered as ``fairbatching`` (FB-vanilla), ``fairbatching-pab`` (with PAB admission
control) and the ablations of §5.4.1: ``fairbatching-fb`` (FB-FB: fixed token budget,
FB ordering) and ``fairbatching-tb`` (FB-TB: token budget derived from the time budget
with the token-only predictor). Support code: the modules beside this one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from operator import attrgetter

from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ...request import Request, Status
from ..base import Scheduler
from ..decode_pass import add_decodes
from ..registry import register, register_variant
from ..tunable import FloatRange, IntRange
from .envelope import DEFAULT_TPOT, DEFAULT_TTFT, request_slo
from .formation import Task, budget_and_groups, form_batch, form_batch_exact
from .pab import compute_pab, node_requests
from .predictor import StepPredictor

CAPACITIES = ("time", "token", "fixed")
ADMISSIONS = ("none", "pab")
ADMIT_RULES = ("prompt", "positive")
PREDICTIONS = ("linear", "exact")
SLACK = attrgetter("slack")
NUM_COMPUTED = attrgetter("num_computed")
RUNNING, SWAPPED, WAITING = Status.RUNNING, Status.SWAPPED, Status.WAITING


@register
@dataclass
class FairBatching(Scheduler):
    """FairBatching: per-token deadlines, time budget max(min decode slack, min TPOT), Algorithm 1's groups.

    Every step: each request's slack to its next token's envelope deadline
    (arrival + TTFT + j·TPOT); a time budget B0 = max(min decode slack, min TPOT) turned
    into a batch by the predictor a + b·tokens + c·context (fitted offline to the replica's
    batch-time model, then, as the paper's "continuous calibration", refitted every 200 steps
    on the last 2000 observed ones; ``online_refit=False`` keeps the offline fit); then
    urgent decodes (slack < B0 + min TPOT), every prefill (chunked to fit) and the other decodes, each group in
    slack order, under a large token cap (8192). Requests without their own TTFT/TPOT
    targets get ``ttft_slo``/``tpot_slo`` (a TBT target stands in for a missing TPOT).
    ``admission="pab"`` rejects at arrival a prompt larger than the node's Prefill
    Admission Budget (FB-PAB). ``capacity`` selects the ablations: ``"fixed"`` (FB-FB,
    ``fixed_token_budget`` tokens) and ``"token"`` (FB-TB, floor((B0 − a')/b') tokens).
    KV: chunks and decodes take blocks as they go (vLLM v1); when the decodes alone need
    more blocks than are free, the step is every decode in slack order with the
    largest-slack requests preempted by recompute.
    Where the paper is silent or self-contradictory our resolutions are used
    (the minimum slack over decodes, urgent decodes not forced, Algorithm 1's line-45 precedence fix, κ = k + q,
    the 8192 cap, the PAB routing rule, the tie-break); see the modules beside this one. One place where the paper
    contradicts itself matters: §3.3's text "always" includes urgent decodes, Algorithm 1 only while the
    time budget lasts; the default is the algorithm, ``force_urgent_decodes=True`` the text
    (``llmsched reproduce fairbatching-ablation --factors design`` measures both).
    ``prediction="exact"`` (an oracle for that ablation, not the paper's) fills B0 with the replica's own
    batch-time model instead of the linear predictor (``form_batch_exact``).

    With a prefix cache: plans as without one; the replica starts each admission after its cached blocks, so the
    step-time predictor, fitted on the tokens steps computed, sees the shorter chunks it ran; preempting to make
    room credits only the blocks a preemption frees (``view.preempt_frees``).
    """

    name = "fairbatching"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks
    family = "FairBatching"
    source = ("FairBatching (Lyu et al., arXiv 2510.14392), Lyu et al. §3.1-3.3, Algorithm 1; PAB §3.4 / App. A; "
              "admission control §5.1")
    ttft_slo: float = DEFAULT_TTFT
    tpot_slo: float = DEFAULT_TPOT
    capacity: str = "time"
    token_budgets = ("token_budget", "fixed_token_budget")
    token_budget: int = 8192
    fixed_token_budget: int = 512
    min_slack_scope: str = "decode"
    chunk_context: str = "literal"
    force_urgent_decodes: bool = False
    online_refit: bool = True
    prediction: str = "linear"
    refit_window: int = 2000
    refit_every: int = 200
    a: float | None = None
    b: float | None = None
    c: float | None = None
    admission: str = "none"
    admit_rule: str = "prompt"
    pab_remaining_only: bool = True
    # the targets it schedules by (its own, beside the SLOs a run is judged by) and its token cap
    tunable = {"ttft_slo": FloatRange(0.05, 10.0, log=True), "tpot_slo": FloatRange(0.005, 0.5, log=True),
               "token_budget": IntRange(256, 8192, log=True), "max_num_seqs": IntRange(16, 1024, log=True)}

    def __post_init__(self):
        checks = (("capacity", CAPACITIES), ("admission", ADMISSIONS), ("admit_rule", ADMIT_RULES),
                  ("min_slack_scope", ("decode", "all")), ("chunk_context", ("literal", "exact")),
                  ("prediction", PREDICTIONS))
        for field, valid in checks:
            if getattr(self, field) not in valid:
                raise ValueError(f"{self.name}: {field} must be one of {', '.join(valid)}, "
                                 f"got {getattr(self, field)!r}")
        for field in ("ttft_slo", "tpot_slo"):
            v = getattr(self, field)
            if not (isinstance(v, (int, float)) and v > 0 and math.isfinite(v)):
                raise ValueError(f"{self.name}: {field} must be a positive number of seconds, got {v!r}")
        if self.prediction == "exact" and self.capacity != "time":
            raise ValueError(f"{self.name}: prediction='exact' fills the time budget; it needs capacity='time'")
        if self.token_budget < 1 or self.fixed_token_budget < 1:
            raise ValueError(f"{self.name}: token_budget and fixed_token_budget must be >= 1")
        given = [x is not None for x in (self.a, self.b, self.c)]
        if any(given) and not all(given):
            raise ValueError(f"{self.name}: give all of a, b, c (the step-time predictor) or none")
        self.predictor: StepPredictor | None = None
        self._pending: tuple[int, int] | None = None
        self._slos: dict = {}

    # --- predictor --------------------------------------------------------------------------------------
    def step_predictor(self, view: ReplicaView) -> StepPredictor:
        if self.predictor is None:
            kw = dict(token_only=self.capacity == "token", online=self.online_refit, window=self.refit_window,
                      every=self.refit_every)
            if self.a is not None:
                self.predictor = StepPredictor(self.a, self.b, self.c, **kw)
            elif view.batch_time is None:
                raise ValueError(f"{self.name}: the replica has no batch-time model; give the predictor a, b, c")
            else:
                self.predictor = StepPredictor.fit_to(view.batch_time, **kw)
        return self.predictor

    # --- one step ---------------------------------------------------------------------------------------
    def _targets(self, r: Request) -> tuple[float, float]:
        """(TTFT, TPOT) of ``r``'s SLO, worked out once per SLO object (callers ask only when it changes)."""
        targets = self._slos.get(r.slo)
        if targets is None:
            targets = self._slos[r.slo] = request_slo(r, self.ttft_slo, self.tpot_slo)
        return targets

    def tasks(self, view: ReplicaView) -> list[Task]:
        now = view.now
        out = []
        add = out.append
        slo = ttft = tpot = None  # the last request's SLO object: most requests share their tier's
        for group in (view.running, view.waiting, view.swapped):
            for r in group:
                if r.slo is not slo:
                    slo = r.slo
                    ttft, tpot = self._targets(r)
                g = r.num_generated
                k = r.num_computed
                decode = g > 0 and k == r.prompt_len + g - 1
                add(Task(r, r.arrival + ttft + tpot * g - now, r.arrival, r.id, decode,
                         1 if decode else r.prompt_len + g - k, k, tpot))
        return out

    def schedule(self, view: ReplicaView) -> BatchPlan:
        self._pending = None
        if (view.running and not view.waiting and not view.swapped and self.prediction == "linear"
                and not self.force_urgent_decodes):
            plan = self._decodes_only(view)
            if plan is not None:
                return self._book(plan)
        return self._any_step(view)

    def _budgets(self, b0: float, pred: StepPredictor, cap: int) -> tuple[float, int]:
        """(time budget beyond the fixed cost a, token budget) of the step, by ``capacity``."""
        if self.capacity == "time":
            return b0 - pred.a, cap
        if self.capacity == "token":
            return math.inf, min(cap, max(1, int((b0 - pred.a) / pred.b)))
        return math.inf, min(cap, self.fixed_token_budget)

    def _decodes_only(self, view: ReplicaView) -> BatchPlan | None:
        """The plan of ``_any_step`` when every candidate is a running decode (a busy server's steady state: no
        prefill group, B0's minima over all, one slack-ordered scan), computed without Task objects or callbacks:
        (slack, arrival, id, request) tuples sorted as they are, the KV booking inlined. None where that needs
        the general path: a request not decoding, KV pressure, or nothing fits (the progress guard)."""
        now = view.now
        slo = ttft = tpot = None
        min_tpot = math.inf
        keyed = []
        add = keyed.append
        for r in view.running:
            g = r.num_generated
            if not (g and r.num_computed == r.prompt_len + g - 1) or r.status is not RUNNING:
                return None
            if r.slo is not slo:
                slo = r.slo
                ttft, tpot = self._targets(r)
                if tpot < min_tpot:
                    min_tpot = tpot
            add((r.arrival + ttft + tpot * g - now, r.arrival, r.id, len(keyed), r))
        pred = self.step_predictor(view)
        keyed.sort()  # by (slack, arrival, id), ties in view order; requests are never compared
        decodes = [item[4] for item in keyed]
        b0 = max(keyed[0][0], min_tpot)
        time_budget, token_budget = self._budgets(b0, pred, min(self.token_budget, view.max_num_batched_tokens))
        free = view.free_blocks
        bs = view.block_size
        if len(decodes) > free and sum(1 for r in decodes if r.num_computed + 1 > r.num_blocks * bs) > free:
            return None
        b, c = pred.b, pred.c
        chosen = []
        for r in decodes:
            kappa = r.num_computed + 1
            cost = b + c * kappa  # form_batch's b·q + c·(k + q) with q = 1
            if cost <= time_budget and 1 <= token_budget:
                need = -(-kappa // bs) - r.num_blocks  # _Booking.accept for a running request
                if need < 0:
                    need = 0
                if need > free:
                    continue
                free -= need
                chosen.append(r)
                time_budget -= cost
                token_budget -= 1
        if not chosen:
            return None
        plan = BatchPlan()
        plan.decodes = chosen
        return plan

    def _any_step(self, view: ReplicaView) -> BatchPlan:
        """Algorithm 1 in general: tasks, B0 and groups, KV pressure, batch formation, the progress guard."""
        plan = BatchPlan()
        tasks = self.tasks(view)
        if not tasks:
            return plan
        pred = self.step_predictor(view)
        b0, _, urgent, prefills, others = budget_and_groups(tasks, self.min_slack_scope)
        cap = min(self.token_budget, view.max_num_batched_tokens)
        time_budget, token_budget = self._budgets(b0, pred, cap)

        free = view.free_blocks
        bs = view.block_size
        # KV pressure: decodes only, preempting the largest-slack requests (counted only when there are more decodes
        # than free blocks: each decode crossing into a new block needs one)
        if (len(urgent) + len(others) > free
                and sum(1 for t in urgent + others if t.k + 1 > t.req.num_blocks * bs) > free):
            running = sorted((t for t in tasks if t.req.status is Status.RUNNING), key=SLACK)
            # prompts in progress do not run in this step, so they go first (the tail), then decodes by slack
            order = [t.req for t in running if t.is_decode] + [t.req for t in running if not t.is_decode]
            add_decodes(view, plan, order, limit=cap)  # one token each, within the step's token cap
            if plan.decodes:
                return self._book(plan)
            plan.preempt.clear()  # no decode can run even alone: form the batch below instead of idling

        book = _Booking(view, free)
        ordered = urgent + prefills + others
        if self.prediction == "exact":
            if view.batch_time is None:
                raise ValueError(f"{self.name}: prediction='exact' needs the replica's batch-time model")
            chosen = form_batch_exact(ordered, b0, token_budget, view.batch_time.step_time, book.accept)
        else:
            chosen = form_batch(ordered, time_budget, token_budget, pred.b, pred.c, self.chunk_context, book.accept)
        if self.force_urgent_decodes:
            taken = {id(t) for t, _ in chosen}
            room = cap - sum(n for _, n in chosen)
            for t in urgent:
                if id(t) not in taken and room > 0 and book.accept(t, 1):
                    chosen.append((t, 1))
                    room -= 1
        if not chosen:  # progress guard: the most urgent task alone
            for t in ordered:
                n = min(t.q, token_budget, cap)
                if n >= 1 and book.accept(t, n):
                    chosen.append((t, n))
                    break
            else:
                chosen = _make_room(ordered, tasks, book, plan, min(token_budget, cap))
        for t, n in chosen:
            if t.is_decode:
                plan.decodes.append(t.req)
            else:
                plan.prefills.append((t.req, n))
        return self._book(plan)

    def _book(self, plan: BatchPlan) -> BatchPlan:
        decodes = len(plan.decodes)
        tokens = decodes + sum(n for _, n in plan.prefills)
        context = (sum(map(NUM_COMPUTED, plan.decodes)) + decodes
                   + sum(r.num_computed + n for r, n in plan.prefills))
        self._pending = (tokens, context)
        return plan

    def on_step_end(self, view: ReplicaView, plan: BatchPlan, duration: float) -> None:
        if self._pending is not None and self.predictor is not None:
            self.predictor.observe(*self._pending, duration)
        self._pending = None

    # --- PAB: admission control and load ----------------------------------------------------------------
    def pab(self, view: ReplicaView, now: float | None = None) -> float:
        """The node's Prefill Admission Budget (tokens) at ``now`` (default: the view's clock)."""
        p = self.step_predictor(view)
        return compute_pab(node_requests(view), view.now if now is None else now, self.ttft_slo, self.tpot_slo,
                           p.a, p.b, p.c, self.pab_remaining_only)

    def on_arrival(self, req: Request, view: ReplicaView) -> str | None:
        if self.admission == "none":
            return None
        budget = self.pab(view)
        if self.admit_rule == "positive":
            return None if budget > 0 else f"PAB admission: prefill admission budget {budget:.0f} tokens <= 0"
        left = req.prompt_len - req.num_computed  # a prompt whose KV a prefill instance sent: its last token
        if left <= budget:
            return None
        return f"PAB admission: prompt {left} tokens > prefill admission budget {budget:.0f}"

    def load(self, view: ReplicaView) -> float:
        """Minus PAB: the ``least-load`` router then sends work where most prefill budget is left."""
        return -self.pab(view)


def _make_room(ordered: list[Task], tasks: list[Task], book: "_Booking", plan: BatchPlan, limit: int) -> list:
    """No task fits the free KV: prompts in progress hold it, each waiting for blocks another holds (chunks take
    blocks as they run, vLLM v1 style). As vLLM v1 does when a chunk cannot be allocated, preempt running
    requests, largest slack first, until the most urgent task that can fit gets its chunk; among the requests not
    running, those waiting with KV of their own are tried first (``_holders_first``)."""
    victims = sorted((t for t in tasks if t.req.status is RUNNING), key=SLACK, reverse=True)
    for t in _holders_first(ordered):
        n = min(t.q, limit)
        if n < 1:
            continue
        free, room, gone = book.free, book.room, []
        for v in victims:
            if v is t:
                continue
            gone.append(v.req)
            book.free += book.view.preempt_frees(v.req)
            book.room += 1
            if book.accept(t, n):
                plan.preempt.extend(gone)
                return [(t, n)]
        book.free, book.room = free, room
    return []


def _holders_first(ordered: list[Task]) -> list[Task]:
    """``ordered`` with the requests that wait holding KV (a prompt a prefill instance sent, or one a KV tier
    loaded) ahead of the other requests not running, each in slack order; running requests keep their places.
    vLLM 0.32 admits from its KV-holding waiting queue before its other waiting requests (and never preempts a
    running request for a waiting one): when such requests hold most of the cache, the only room left goes to a
    recomputation that can never fit beside them, and two of those would take the one seat from each other for
    ever while the requests that could run (they need only their last prompt token) wait behind them."""
    slots = [i for i, t in enumerate(ordered) if t.req.status is not RUNNING]
    queue = sorted((ordered[i] for i in slots), key=_holds_nothing)  # stable: slack order within each
    if not queue or not _holds_nothing(queue[-1]) or _holds_nothing(queue[0]):
        return ordered  # all hold KV or none does: the order stands
    out = list(ordered)
    for i, t in zip(slots, queue):
        out[i] = t
    return out


def _holds_nothing(t: Task) -> bool:
    return not (t.req.status is WAITING and t.req.num_blocks)


class _Booking:
    """KV blocks and sequence slots taken by the batch so far."""

    __slots__ = ("bs", "free", "room", "view")

    def __init__(self, view: ReplicaView, free: int):
        self.view = view
        self.bs = view.block_size
        self.free = free
        self.room = view.max_num_seqs - len(view.running)

    def accept(self, t: Task, n: int) -> bool:
        r = t.req
        st = r.status
        need = -(-(t.k + n) // self.bs) - r.num_blocks
        if need < 0:
            need = 0
        if st is SWAPPED:
            need += r.num_blocks
        if need > self.free:
            return False
        if st is not RUNNING:
            if self.room < 1:
                return False
            self.room -= 1
        self.free -= need
        return True


register_variant("fairbatching-pab", FairBatching,
                 "FairBatching with PAB admission control: reject at arrival a prompt above the node's PAB "
                 "(Lyu et al. §3.4, §5.1 FB-PAB)", admission="pab")
register_variant("fairbatching-fb", FairBatching,
                 "FairBatching ablation FB-FB: fixed token budget with FairBatching's ordering (Lyu et al. §5.4.1)",
                 capacity="fixed")
register_variant("fairbatching-tb", FairBatching,
                 "FairBatching ablation FB-TB: token budget from the time budget with a token-only predictor "
                 "(Lyu et al. §5.4.1)", capacity="token")

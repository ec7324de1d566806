"""SLAI: SLO-aware batching with per-request last schedulable times (Bari et al. §6, §7.1).

Each decode-phase request j gets, when its latest token appears at time e, a last schedulable time
C_j = e + TBT_j − δ·t̄ (t̄ the cumulative mean of every observed step time, δ the offset). A batch built at
time t takes, within the token budget τ, the active cap α and the decode limit β:

1. critical decodes (t ≥ C_j) in increasing (C_j, arrival);
2. paused (partially prefilled) requests, oldest first, then new prompts FCFS or shortest-prompt-first
   (optionally paying tier first), each reserving KV for its whole prompt above a 1% watermark
   (head-of-line blocking, as in Sarathi-Serve);
3. non-critical decodes in increasing C_j with whatever budget is left.

So a decode is deferred only when prefill chunks take the budget. The dynamic offset uses δ = 5 while the KV
pool is under 96% used (counting the whole-prompt reservations of admitted prompts, as the paper's engine
allocates them) and δ = 10 above. C_j is fixed when the token appears and kept while the decode is deferred
(from the authors' code). A decode short of a KV block preempts the most recently paused prefill,
else itself. Requests without a TBT target use 0.2 s, the authors' fallback. In swap mode the replica
brings swapped requests back before the policy decides, into blocks this policy counts as reserved (the paper's
engine would have allocated them): paused prefills then yield, most recently paused first, until the
reservations fit again, so a paused prefill's chunk always finds its blocks.

Where the paper and the authors' code (agrimUT/SLAI) differ we follow the code, which the paper's
text leaves open: β and the budget bind critical decodes too, δ is global and chosen when C is computed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import attrgetter

from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ...request import Request, Status
from ..base import Scheduler
from ..kv_holders import front_holds_kv
from ..registry import register, register_variant
from ..tunable import FloatRange, IntRange
from ..watermark import WatermarkAdmission

ORDERS = ("fcfs", "spf", "spf-priority")
PROMPT_LEN = attrgetter("prompt_len")


def holds_no_kv(r: Request) -> bool:
    """False for a waiting request holding KV blocks (a tier loaded them, a prefill instance sent them): sorts it
    first."""
    return not r.num_blocks


@register
@dataclass
class SLAI(WatermarkAdmission, Scheduler):
    """SLAI: critical decodes by last schedulable time, then prefills (SPF), then non-critical decodes.

    With a prefix cache, shortest-prompt-first orders by the tokens a prompt computes (its length less its cached
    prefix), a prefill chunk and the budget count only those tokens, and admission reserves the blocks beyond the
    cached prefix plus the cached blocks no request holds (``view.admission_blocks``)."""

    name = "slai"
    family = "RAD/SLAI"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks, ahead of the rest
    source = ("Bari, Hegde, de Veciana, POMACS 2025 §6 (SLAI, eq. 8-9), §7.1 (τ=512, α=β=128, "
              "δ=10 fixed or 5/10 dynamic at 96% KV use); engine semantics from the authors' code")
    token_budgets = ("token_budget",)
    token_budget: int = 512
    max_active: int = 128          # α
    max_decodes: int = 128         # β
    order: str = "spf"
    offset: float = 10.0           # δ when dynamic is False
    dynamic: bool = True
    offset_low: float = 5.0        # δ below the threshold (dynamic)
    offset_high: float = 10.0      # δ at or above it (dynamic)
    kv_threshold: float = 0.96
    default_tbt: float = 0.2
    watermark: float = 0.01
    tunable = {"token_budget": IntRange(64, 4096, log=True), "max_active": IntRange(16, 1024, log=True),
               "max_decodes": IntRange(16, 1024, log=True), "offset_low": FloatRange(0.0, 20.0),
               "offset_high": FloatRange(0.0, 40.0), "max_num_seqs": IntRange(16, 1024, log=True)}
    _deadline: dict = field(default_factory=dict, init=False, repr=False)
    _paused: dict = field(default_factory=dict, init=False, repr=False)  # id -> order paused (insertion order)

    def __post_init__(self):
        if self.token_budget < 1:
            raise ValueError(f"{self.name}: token_budget must be >= 1, got {self.token_budget}")
        if self.max_active < 1 or self.max_decodes < 1:
            raise ValueError(f"{self.name}: max_active (α) and max_decodes (β) must be >= 1, got "
                             f"{self.max_active} and {self.max_decodes}")
        if self.order not in ORDERS:
            raise ValueError(f"{self.name}: order must be one of {ORDERS}, got {self.order!r}")
        for label in ("offset", "offset_low", "offset_high"):
            if not (getattr(self, label) >= 0 and math.isfinite(getattr(self, label))):
                raise ValueError(f"{self.name}: {label} must be a finite number >= 0 of mean step times")
        if not 0 < self.kv_threshold <= 1:
            raise ValueError(f"{self.name}: kv_threshold must be in (0, 1], got {self.kv_threshold}")
        if not self.default_tbt > 0:
            raise ValueError(f"{self.name}: default_tbt must be > 0 seconds, got {self.default_tbt}")
        if not 0 <= self.watermark < 1:
            raise ValueError(f"{self.name}: watermark must be in [0, 1), got {self.watermark}")

    def params(self) -> dict:
        return {k: v for k, v in super().params().items() if not k.startswith("_")}

    # --- the offset and the deadlines ---------------------------------------------------------------------
    def kv_use(self, view: ReplicaView) -> float:
        return reserved_kv_use(view)

    def current_offset(self, view: ReplicaView) -> float:
        if not self.dynamic:
            return self.offset
        return self.offset_high if self.kv_use(view) >= self.kv_threshold else self.offset_low

    def deadline(self, req: Request, view: ReplicaView) -> float:
        """C_j: fixed when the request's latest token appeared (computed now if this policy did not see it)."""
        c = self._deadline.get(req.id)
        if c is None or c[0] != req.num_generated:
            c = (req.num_generated, self._compute(req, req.last_token, view))
            self._deadline[req.id] = c
        return c[1]

    def _compute(self, req: Request, emitted: float, view: ReplicaView) -> float:
        tbt = req.slo.tbt if req.slo.tbt is not None else self.default_tbt
        return emitted + tbt - self.current_offset(view) * view.mean_step_time

    def on_step_end(self, view: ReplicaView, plan: BatchPlan, duration: float) -> None:
        """Fix C for every request that just emitted a token; remember prefills left paused."""
        now = view.now
        delta = None
        deadline, paused = self._deadline, self._paused
        items = list(plan.decodes)
        items.extend(r for r, _ in plan.prefills)
        running = Status.RUNNING
        for r in items:
            g = r.num_generated
            if r.status is not running:
                deadline.pop(r.id, None)
                paused.pop(r.id, None)
            elif g and r.num_computed == r.prompt_len + g - 1:  # r.is_decode
                paused.pop(r.id, None)
                if r.last_token == now:
                    if delta is None:
                        delta = self.current_offset(view) * view.mean_step_time
                    tbt = r.slo.tbt if r.slo.tbt is not None else self.default_tbt
                    deadline[r.id] = (g, now + tbt - delta)
            elif r.id not in paused:
                paused[r.id] = True
        for r in plan.preempt:
            paused.pop(r.id, None)

    # --- one batch ----------------------------------------------------------------------------------------
    def schedule(self, view: ReplicaView) -> BatchPlan:
        plan = BatchPlan()
        now = view.now
        known = self._deadline
        decodes: list[tuple[float, float, int, Request]] = []  # (C, arrival, position: ties stay in order, r)
        partial: list[Request] = []
        reserved = 0
        for r in view.running:
            g = r.num_generated
            if g and r.num_computed == r.prompt_len + g - 1:  # r.is_decode, inlined (this loop is per request)
                c = known.get(r.id)
                decodes.append((c[1] if c is not None and c[0] == g else self.deadline(r, view), r.arrival,
                                len(decodes), r))
            else:
                partial.append(r)
                reserved += view.extra_blocks(r, r.num_tokens)
        if len(partial) > 1:
            order = {rid: i for i, rid in enumerate(self._paused)}
            partial.sort(key=lambda r: order.get(r.id, -1))
        decodes.sort()
        budget = min(self.token_budget, view.max_num_batched_tokens)
        free = view.free_blocks - reserved
        tokens = 0
        victims = list(partial)  # paused prefills that may still be preempted, most recent last
        while free < 0 and victims:  # swap-ins (the replica's, before this policy decides) took blocks reserved
            v = victims.pop()        # for paused prefills: the most recently paused yields, as to a short decode
            plan.preempt.append(v)
            free += view.preempt_frees(v) + view.extra_blocks(v, v.num_tokens)  # its blocks and its reservation
        # (1-2) critical decodes, by C
        i, free, tokens = self._seat_decodes(view, plan, decodes, 0, free, tokens, budget, victims, until=now)
        # (3a) paused prefills, oldest first
        for r in partial:
            if tokens >= budget:
                break
            if r in plan.preempt:
                continue
            c = min(r.remaining_prefill, budget - tokens)
            plan.prefills.append((r, c))
            tokens += c
        # (3b) new prompts
        if tokens < budget and view.waiting:
            free, tokens = self._admit(view, plan, free, tokens, budget)
        # (4) non-critical decodes, by C: no prefill is preempted for them
        self._seat_decodes(view, plan, decodes, i, free, tokens, budget, [])
        if plan.preempt and not plan.has_work and not front_holds_kv(view):
            # preemptions alone help only a waiting request that holds its KV (kv_holders.front_holds_kv)
            return BatchPlan()
        return plan

    def _seat_decodes(self, view: ReplicaView, plan: BatchPlan, decodes: list, i: int, free: int, tokens: int,
                      budget: int, victims: list, until: float | None = None) -> tuple[int, int, int]:
        """Seat ``decodes[i:]`` in order while the token budget and max_decodes allow, up to the first whose C is
        after ``until`` (None: no such stop); a decode whose KV slot is free is seated inline (the common case),
        another by ``_seat``. Returns the next index, the blocks still free and the batch's tokens."""
        chosen = plan.decodes
        n = len(decodes)
        bs = view.block_size
        beta = self.max_decodes
        while i < n and tokens < budget and len(chosen) < beta:
            c, _, _, r = decodes[i]
            if until is not None and not until >= c:
                break
            i += 1
            need = 1 if r.num_computed + 1 > r.num_blocks * bs else 0
            if need <= free:
                free -= need
                ok = True
            else:
                free, ok = self._seat(view, r, free, bs, victims, plan)
            if ok:
                chosen.append(r)
                tokens += 1
        return i, free, tokens

    def _seat(self, view: ReplicaView, r: Request, free: int, bs: int, victims: list,
              plan: BatchPlan) -> tuple[int, bool]:
        """A KV slot for r's next token: preempt the most recently paused prefill, else r itself."""
        need = 1 if r.num_computed + 1 > r.num_blocks * bs else 0
        while need > free and victims:
            v = victims.pop()
            plan.preempt.append(v)
            # its blocks (less those a running request shares with it: a preemption frees only its own) and its
            # reservation; without a prefix cache, ceil(num_tokens / block_size)
            free += view.preempt_frees(v) + view.extra_blocks(v, v.num_tokens)
        if need > free:
            plan.preempt.append(r)
            return free + view.preempt_frees(r), False
        return free - need, True

    def _admit(self, view: ReplicaView, plan: BatchPlan, free: int, tokens: int, budget: int) -> tuple[int, int]:
        active = len(view.running) - len(plan.preempt)
        cap = min(self.max_active, view.max_num_seqs)
        free -= int(self.watermark * view.total_blocks)
        waiting = view.waiting
        caching = view.prefix_caching
        # The requests holding KV (a tier loaded it, a prefill instance sent it) come first, whatever the order, as
        # vLLM 0.32 drains its KV-holding queue first: a request preempted by recompute whose prompt and output the
        # cache still holds keys at or below 0 for shortest-prefill-first, and ahead of them it blocked the line
        # (it needs its cached blocks back, the loaded requests hold theirs) and the replica idled
        if self.order == "spf":  # shortest by the tokens it computes: a cached prefix costs no prefill
            waiting = sorted(waiting, key=(lambda r: r.prompt_len - view.cached_tokens(r)) if caching else PROMPT_LEN)
        elif self.order == "spf-priority":
            waiting = sorted(waiting, key=lambda r: self._priority(r, view.cached_tokens(r) if caching else 0))
        if view.waiting[0].num_blocks:  # (they wait at the front of the replica's queue)
            waiting = sorted(waiting, key=holds_no_kv)  # stable: each part keeps the order's
        for r in waiting:
            if tokens >= budget or active >= cap:
                break
            loaded = caching or r.num_blocks  # a prefix cache's hit, or a prompt a prefill instance sent
            left = r.num_tokens - view.cached_tokens(r) if loaded else r.num_tokens
            need = view.admission_blocks(r, left) if loaded else view.blocks_for(left)
            if need and need > free:  # a sent prompt's rest may need no block
                break
            c = min(left, budget - tokens)
            plan.prefills.append((r, c))
            tokens += c
            free -= need
            active += 1
        return free + int(self.watermark * view.total_blocks), tokens

    def _priority(self, r: Request, cached: int = 0) -> tuple[float, int]:
        """Strictest TBT target first (the paying tier), then shortest prompt (App. F.2), less its ``cached``
        prefix."""
        tbt = r.slo.tbt if r.slo.tbt is not None else self.default_tbt
        return (tbt, r.prompt_len - cached)


def reserved_kv_use(view: ReplicaView) -> float:
    """KV blocks used / total as the paper's engine counts them: held blocks plus the rest of every admitted
    prompt, which that engine allocates whole at admission (Bari et al. §7.1; the authors' code); this replica allocates
    blocks as chunks run, so ``view.kv_utilisation`` alone would read low."""
    used = view.total_blocks - view.free_blocks
    for r in view.running:
        if not r.is_decode:
            used += view.extra_blocks(r, r.num_tokens)
    return used / view.total_blocks


register_variant("slai-fcfs", SLAI, "SLAI with FCFS prefills and a fixed offset δ=10 (Bari et al. §7)",
                 order="fcfs", dynamic=False, offset=10.0)
register_variant("slai-spf-fixed", SLAI, "SLAI with shortest-prefill-first and a fixed offset δ=10 (Bari et al. §7)",
                 order="spf", dynamic=False, offset=10.0)
register_variant("slai-priority", SLAI, "SLAI with paying-tier-first, then SPF prefills, dynamic offset "
                                        "(Bari et al. App. F.2)", order="spf-priority")

"""Virtual Token Counter (Sheng et al., "Fairness in Serving Large Language Models", OSDI 2024), chunked."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ...request import Request, Status
from ..registry import register
from .preemption_ledger import times_histogram
from .queued_policy import QueuedPolicy, all_decode
from .waiting_queues import WaitingQueues, tenant_key, tenant_weight

RUNNING = Status.RUNNING
LIGHT_FIRST = ("off", "prompts", "step")


@register
@dataclass
class VTC(QueuedPolicy):
    """VTC: serve the backlogged tenant that has received the least weighted service, chunked under a budget.

    The paper's algorithm (its Algorithm 2 and the authors' S-LoRA code, ``vtc_req_queue.py``) on a chunked-prefill
    step. Each tenant ``u`` has a counter ``c_u`` of the service it received divided by its weight: every prompt (or
    recompute) token a plan computes for it adds ``input_weight / w_u``, every decode ``output_weight / w_u`` (1 and
    2, as OpenAI prices them), charged when planned, as the paper charges a prompt at admission. A tenant whose queue
    turns non-empty has its counter lifted to the smallest counter of the other backlogged tenants, or, with none,
    to the counter of the tenant that left the queue last: credit for idling is not banked. A step:

    1. decodes every running request in decode phase (stall-free, as Sarathi), the tenants holding least KV first;
    2. fills the budget left with prompt chunks, each time the turn of the smallest counter: a waiting request, the
       oldest of the backlogged tenant with the smallest counter, is admitted with a chunk of the budget left; a
       prompt admitted in chunks keeps the turn it was admitted at for its later chunks (so a long prompt is not
       cut off behind the tenants it was charged ahead of). As in the paper, admission stops at the first request
       that does not fit (a tie goes to the tenant holding less KV).

    Beyond the paper, for a paged KV cache, which reserves nothing for a request's output (S-LoRA reserves its
    ``max_new_tokens``): a running request short of a block preempts the newest request of the tenant holding most
    KV (over its weight; with one tenant, the newest: vllm-chunked's choice), taking it out of the plan if planned
    already; admission keeps ``kv_reserve`` of the cache free for running requests to grow into (vllm-chunked
    admits to the last block and then preempts: about 1,000 recompute preemptions in 300 s of ShareGPT at 3x the
    capacity of Llama-3-8B on an A100; with the reserve none, and 18% more output tokens/s); and a waiting
    request of a tenant holding less than ``reclaim`` times its weighted share of the KV cache, whose turn it is
    but which does not fit, preempts requests of tenants above their share (the furthest above first, newest
    first) when that frees enough (``reclaim=0`` and ``kv_reserve=0``: the paper's
    admission, never preempting to admit). A request is reclaimed at most ``max_reclaims`` times, then runs to its
    end short of KV (no livelock: two tenants below their share in turn took each other's requests back for ever,
    a 25-block request recomputed 692 times on a 27-block cache, conservation-fuzz seed 61 at four times its
    requests). Without tenants it admits first come, first served.

    **On a decode pool** (a disaggregated fleet's, or beside KV tiers), waiting requests may hold KV: a prompt a
    prefill instance sent (its last token to compute), a tier's load. They wait at the front of their tenant's queue,
    where the replica puts them. While blocks are held so outside the running set, three rules of vLLM's keep such an
    instance live (the conservation fuzz found livelocks and a stall without them):

    - a prompt is admitted in chunks only when its whole prompt's blocks are free (vLLM's full-prompt gate; a
      reclaim is sized by it too). Otherwise a recompute admitted with a chunk that fits, whose next chunk does not
      while transfers hold the rest, preempts itself every step;
    - when admission stops at a head that holds no KV, the other tenants' heads that hold KV still go, by turn (vLLM
      0.32 drains its KV-holding waiting queue before the others): they hold the blocks the stopped head waits for;
    - after a KV preemption in a plan, nothing is admitted in it (vLLM's rule; vtc's reclaim admissions otherwise).
      A plan counts a victim's blocks free while an admission's prefix-cache hit on them still counts as held: two
      requests sharing a prefix took turns, each preempting itself a block short and the other admitted on its
      blocks, while transfers held the rest of the cache.

    A request that needs no new block is not held back by ``kv_reserve``. The fairness bound below assumes every
    admission is at the smallest counter; these admissions of KV holders are not, and it does not cover them.

    **A light tenant first** (``light_first``, for a light tenant's TTFT near its TTFT alone; off by default). A tenant holding
    less than ``light_share`` of the KV the heaviest tenant holds (over weights) is *light*. With ``"prompts"`` or
    ``"step"``, a plan first walks the light tenants' decodes, then their prompts (waiting heads and running
    chunks) by turn, while the turn's counter is at most ``lead`` above the smallest counter of the other tenants,
    under ``light_budget`` (at most ``max_num_batched_tokens``); such a *light step* then gives the other tenants
    their decodes in the budget left (``"prompts"``: their prompt chunks wait a step) or nothing (``"step"``: their
    decodes wait a step too, as S-LoRA runs a new prompt in a step of its own). The plan after a light step is an
    ordinary one, so no request waits two steps in a row: a deferred decode's gap is at most one light step (at
    most ``light_budget`` tokens) plus one ordinary step. A light step preempts no prompt in progress: it admits a
    prompt only when the blocks to its prompt's end fit in the free blocks less the reserve, or when reclaiming
    requests in decode phase frees them (with its chunks pushing other prompts into KV preemption, light and heavy
    tenants took turns throwing each other's prompts away on small caches). Why: a light tenant's prompt otherwise
    shares its step with the heavy tenants' chunks and decodes (a 1,900-token prompt beside ~160 decodes needs two
    2,048-token steps) and waits behind the turns of heavy prompts admitted in chunks; ``lead`` lets it go ahead of
    a counter it overtook with its own last long prompt. Off by default because it costs the other tenants
    (measured in docs/fairness.md: with ``"step"`` the heavy tenant's TBT p99 0.214 -> 0.301 s at the default
    budget, reclaim preemptions, about 3% of the throughput) for a latency only a light tenant asks for; ``"off"``
    is the paper's order.

    **Fairness bound** (the paper's Theorem 4.4, derived again for this token model). Let ``A = input_weight ·
    min(B, P)`` bound one admission's charge (``B`` the token budget, ``P`` the longest prefill a waiting request
    needs), ``C = max(input_weight, output_weight) · B / w_min`` bound one plan's charges to one tenant (``w_min``
    the smallest weight), and ``R_h`` the weighted work still owed, at an admission of tenant ``h``, to ``h``'s
    admitted requests (running or swapped: ``input_weight`` per prompt token left, ``output_weight`` per decode
    left; a recompute's last token may run as a decode). Let ``U = max_h (A + R_h) / w_h + C``. Then at every
    decision the counters of any two backlogged tenants differ by at most ``U``, and for two tenants ``f``, ``g``
    backlogged throughout ``[t1, t2]``:

        | W_f(t1, t2) / w_f  -  W_g(t1, t2) / w_g |  <=  2 U

    (``W`` the service charged in the interval). Proof: the smallest backlogged counter ``m`` never decreases from
    one decision to the next (a counter only grows, except that a plan takes back its own charges of requests it
    preempts; a newly backlogged tenant is lifted to at least ``m``; the first of a new busy period to at least the
    last one's). A tenant is admitted only when its counter is the smallest, so at most ``m + C`` once the plan has
    taken back its charges, and afterwards gains at most its chunk plus what its admitted requests still owe:
    ``c_f - m <= U``. A tenant backlogged throughout is never lifted, so ``c_f(t2) - c_f(t1) = W_f(t1, t2) / w_f``,
    and two spreads of at most ``U`` give ``2 U``. The paper's ``2 max(w_p L_input, w_q M)`` bounds ``R_h`` by
    ``w_q M``, M the KV pool in tokens, because S-LoRA reserves each running request's whole output; a paged cache
    reserves nothing, so here ``R_h`` is the owed work itself (at most ``max_num_seqs · (input_weight +
    output_weight) · max_model_len``). tests/test_fairness_bounds.py checks the spread at every decision and the
    interval bound on random workloads.

    With ``light_first``, a light tenant is admitted with a counter at most ``lead`` above the others' smallest
    (and, among light tenants, by turn), and a light step charges at most ``light_budget`` tokens: the bound holds
    with ``U = max_h (A + R_h) / w_h + C + lead``, ``B`` in ``A`` and ``C`` the larger of ``token_budget`` and
    ``light_budget`` (the test checks that too).
    """

    name = "vtc"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks, ahead of the rest
    source = ("Sheng et al., Fairness in Serving Large Language Models, OSDI 2024 (Algorithm 2, Theorem 4.4; "
              "github.com/Ying1123/VTC-artifact slora/server/router/vtc_req_queue.py), on vLLM v1's chunked step")
    token_budget: int = 2048
    input_weight: float = 1.0
    output_weight: float = 2.0
    reclaim: float = 0.5
    max_reclaims: int = 1
    kv_reserve: float = 0.05
    light_first: str = "off"
    light_share: float = 0.5
    lead: float = 8192.0
    light_budget: int = 8192

    def __post_init__(self):
        self.use_queues(WaitingQueues(self._lift, self._left))
        if not (0 <= self.kv_reserve < 1):
            raise ValueError(f"{self.name}: kv_reserve must be in [0, 1) (a fraction of the KV blocks), got "
                             f"{self.kv_reserve}")
        if not (0 <= self.reclaim <= 1):
            raise ValueError(f"{self.name}: reclaim must be in [0, 1] (0: never preempt to admit), got {self.reclaim}")
        if not (isinstance(self.max_reclaims, int) and self.max_reclaims >= 0):
            raise ValueError(f"{self.name}: max_reclaims must be an integer >= 0 (times a request may be preempted to "
                             f"admit another tenant's), got {self.max_reclaims}")
        for key in ("input_weight", "output_weight"):
            value = getattr(self, key)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{self.name}: {key} must be a positive number, got {value}")
        if self.light_first not in LIGHT_FIRST:
            raise ValueError(f"{self.name}: light_first must be one of {', '.join(LIGHT_FIRST)}, got "
                             f"{self.light_first!r}")
        if not (0 < self.light_share <= 1):
            raise ValueError(f"{self.name}: light_share must be in (0, 1] (a fraction of the heaviest tenant's KV), "
                             f"got {self.light_share}")
        if not (self.lead >= 0 and math.isfinite(self.lead)):
            raise ValueError(f"{self.name}: lead must be a number >= 0 (weighted tokens), got {self.lead}")
        if self.light_budget < 1:
            raise ValueError(f"{self.name}: light_budget must be >= 1 (tokens), got {self.light_budget}")
        self.counters: dict[str | None, float] = {}
        self.last_left: str | None = None  # the tenant whose queue emptied last
        self.tags: dict[Request, float] = {}  # a prompt admitted in chunks -> the turn it was admitted at
        self.light_step = False  # the last plan was a light tenant's (light_first): this one is not
        self.light_steps = 0
        self.reclaimed: dict[int, int] = {}  # request id -> times preempted to admit another tenant's request

    def stats(self) -> dict:
        figures = super().stats()
        if self.light_first != "off":
            figures["light_steps"] = self.light_steps
        figures["reclaims_per_request"] = times_histogram(self.reclaimed)
        return figures

    # --- counters ---------------------------------------------------------------------------------------------
    def _lift(self, key) -> None:
        """``key``'s queue turns non-empty: no credit for the time it was idle."""
        others = [self.counters[k] for k in self.queues.backlogged() if k != key]
        floor = min(others) if others else self.counters.get(self.last_left, 0.0)
        self.counters[key] = max(self.counters.get(key, 0.0), floor)

    def _left(self, key) -> None:
        self.last_left = key

    def charge(self, r: Request, tokens: int, decode: bool) -> float:
        """Charge ``r``'s tenant for ``tokens`` planned tokens; returns the increment of its counter."""
        key = tenant_key(r)
        cost = (self.output_weight if decode else self.input_weight * tokens) / tenant_weight(r)
        self.counters[key] = self.counters.get(key, 0.0) + cost
        return cost

    def refund(self, r: Request, cost: float) -> None:
        """Take back a charge of ``r``'s tenant (its planned work was taken out of the plan)."""
        self.counters[tenant_key(r)] -= cost

    def known_tenants(self) -> list:
        return list(self.counters)

    # --- a step -----------------------------------------------------------------------------------------------
    def schedule(self, view: ReplicaView) -> BatchPlan:
        all_decodes = self.start_step(view)
        bs = view.block_size
        running = view.running
        if all_decodes:
            plan = self._all_decode(running, bs, view.free_blocks)
            if plan is not None:
                return plan
        held: dict = {}  # tenant -> KV blocks its running requests hold, over its weight
        for x in running:
            key = tenant_key(x)
            held[key] = held.get(key, 0.0) + x.num_blocks / tenant_weight(x)
        age = {x: i for i, x in enumerate(running)}  # running order: admission order (later is newer)
        if len(held) > 1:  # the tenants holding least go first
            running = sorted(running, key=lambda x: (held[tenant_key(x)], age[x]))
        step = Step(self, running, held, age, view.free_blocks, min(self.token_budget, view.max_num_batched_tokens))
        step.block_size = bs
        step.frees = view.preempt_frees
        step.room = view.max_num_seqs - len(running)
        partial: dict = {}  # tenant -> its running requests with prompt (or recompute) left, in order
        first = (self.light_first != "off" and not self.light_step and len(self.queues) > 0 and held
                 and (len(held) > 1 or any(k not in held for k in self.queues.backlogged())))
        self.light_step = False
        for r in running:
            if step.budget <= 0:
                break
            if r in step.preempted:
                continue
            if first and not self._light(step, tenant_key(r)):  # the first request of a tenant that is not light
                first = False
                self.light_step = self._light_prompts(step, view, running)
                self.light_steps += self.light_step
                if step.budget <= 0:
                    break
                if r in step.preempted:  # a light admission reclaimed its blocks
                    continue
            if step.others_wait and self.light_first == "step" and tenant_key(r) not in step.light:
                continue  # the other tenants' decodes wait for the next step
            if r.num_generated and r.num_computed + 1 == r.prompt_len + r.num_generated:
                step.run(r, 1, 1 if r.num_computed + 1 > r.num_blocks * bs else 0, True)
            else:
                partial.setdefault(tenant_key(r), []).append(r)
        while step.budget > 0 and not step.others_wait:
            turns, busy = self._turns(step, partial)
            if not turns:
                break
            held = step.held
            key, r = min(turns, key=lambda t: (self._turn(t), held.get(t[0], 0.0)))  # a tie: who holds less KV
            if key in busy:  # a running prompt's next chunk
                self._next_chunk(step, r)
                continue
            self._admit(step, view, key, r)
        self.ledger.planned(step.victims["kv"], "kv")
        self.ledger.planned(step.victims["fair"], "fair")
        self.last_victims = step.plan.preempt
        return step.plan

    def _light_prompts(self, step: "Step", view: ReplicaView, running: list[Request]) -> bool:
        """``light_first``: the prompts (waiting heads and running chunks) of the light tenants, by turn, while the
        turn's counter is at most ``lead`` above the smallest counter of the other tenants, under ``light_budget``;
        planned before the other tenants' decodes. Whether it planned one (the step is then a light step: the others'
        prompts wait, and with "step" their decodes too)."""
        held = step.held
        tenants = set(held) | set(self.queues.backlogged())
        light = {k for k in tenants if self._light(step, k)}
        if not light or len(light) == len(tenants):
            return False
        floor = min(self.counters.get(k, 0.0) for k in tenants if k not in light) + self.lead
        extra = max(0, min(self.light_budget, view.max_num_batched_tokens) - step.limit)
        step.budget += extra
        partial: dict = {}
        for x in running:
            key = tenant_key(x)
            if key in light and x not in step.preempted and not (
                    x.num_generated and x.num_computed + 1 == x.prompt_len + x.num_generated):
                partial.setdefault(key, []).append(x)
        # a light step throws no prompt in progress away: an admitted prompt's blocks to its end must fit in the free
        # blocks less the reserve, freed if need be by reclaiming requests in decode phase (so that light admissions
        # do not push running prompts into KV preemption), a running light chunk's in the free ones
        reserve = int(self.kv_reserve * view.total_blocks)
        spare = step.free - reserve
        planned = len(step.plan.prefills)
        while step.budget > 0:
            turns, busy = self._turns(step, partial)
            turns = [t for t in turns if t[0] in light and self.counters.get(t[0], 0.0) <= floor]
            if not turns:
                break
            key, r = min(turns, key=lambda t: (self._turn(t, False), held.get(t[0], 0.0)))
            if key in busy:
                n = min(r.prompt_len + r.num_generated - r.num_computed, step.budget)
                if -(-(r.num_computed + n) // step.block_size) - r.num_blocks > step.free:
                    break
                self._next_chunk(step, r)
                continue
            whole = view.admission_blocks(r, view.tokens_to_compute(r))
            if whole > spare:  # the blocks to its prompt's end, by reclaiming where its tenant is below its share
                freed = None if step.short else self._reclaim(step, view, key, whole + reserve, step.room, True)
                if freed is None:
                    break
                step.room += freed
                spare = step.free - reserve
            if not self._admit(step, view, key, r, reclaim=False):
                break
            spare -= whole
        step.admitting = True  # the other tenants' requests are admitted by turn as before
        step.holding_only = False
        if len(step.plan.prefills) == planned:
            step.budget -= extra
            return False
        step.others_wait = True
        step.light = light
        return True

    def _light(self, step: "Step", key) -> bool:
        """Whether ``key`` holds less than ``light_share`` of the KV cache the heaviest tenant holds (over weights)."""
        return step.held.get(key, 0.0) < self.light_share * max(step.held.values())

    def _turns(self, step: "Step", partial: dict) -> tuple[list, set]:
        """The candidates for the budget left: each tenant's first running prompt with chunks left (``partial``) and,
        while admitting, the head of each other backlogged tenant; and the tenants of the former."""
        turns = []
        for key, reqs in partial.items():
            while reqs and (reqs[0] in step.preempted or reqs[0] in step.planned):
                reqs.pop(0)
            if reqs:
                turns.append((key, reqs[0]))
        busy = {key for key, _ in turns}
        if step.admitting:
            queues = self.queues
            turns += [(k, h) for k in queues.backlogged() if k not in busy and (h := queues.head(k)) is not None
                      and (h.num_blocks or not step.holding_only)]
        return turns, busy

    def _next_chunk(self, step: "Step", r: Request) -> None:
        """Plan the next chunk of running ``r``'s prompt (or recompute), as much as the budget holds."""
        bs = step.block_size
        n = min(r.prompt_len + r.num_generated - r.num_computed, step.budget)
        step.run(r, n, -(-(r.num_computed + n) // bs) - r.num_blocks, False)
        if r in step.preempted or n == r.prompt_len + r.num_generated - r.num_computed:
            self.tags.pop(r, None)  # its prompt is done (or must start again)

    def _admit(self, step: "Step", view: ReplicaView, key, r: Request, reclaim: bool = True) -> bool:
        """Admit ``key``'s waiting head ``r`` with a chunk of the budget left, if it fits (after a KV shortage in this
        plan, or short of blocks less the reserve, or of a seat, only a tenant below its share of the KV cache is
        admitted, by reclaiming); if not, admission stops for this plan (the paper's loop stops at the first request
        that does not fit)."""
        if step.short and step.held_outside(view):  # as vLLM, nothing goes after a KV preemption (class docstring)
            step.admitting = False
            return False
        left = view.tokens_to_compute(r)  # after its cached prefix, with a prefix cache (vLLM v1)
        n = min(left, step.budget)
        need = view.admission_blocks(r, n)  # with the cached blocks it takes out of the free pool
        gate = need
        if n < left and step.held_outside(view):  # vLLM's full-prompt gate: its whole prompt's blocks
            gate = view.admission_blocks(r, left)
        if step.short or (gate and gate > step.free - int(self.kv_reserve * view.total_blocks)) or step.room < 1:
            freed = None
            if reclaim and not step.holding_only:
                freed = self._reclaim(step, view, key, gate, step.room)
            if freed is None:
                if step.short or r.num_blocks or step.room < 1:
                    step.admitting = False
                step.holding_only = True  # the waiting requests holding KV go on, by turn (they need no new block)
                return False
            step.room += freed
        self.queues.pop(key)
        if n < left:
            self.tags[r] = self._turn((key, r))  # its later chunks keep its place
        step.free -= need
        step.room -= 1
        step.plan.prefills.append((r, n))
        self.charge(r, n, False)
        step.budget -= n
        return True

    def _below_share(self, step: "Step", view: ReplicaView, key) -> bool:
        """Whether ``key`` holds less than ``reclaim`` times its weighted share of the KV cache (shared among the
        tenants running or waiting here)."""
        if not self.reclaim:
            return False
        if step.share is None:
            weights = {tenant_key(x): tenant_weight(x) for x in step.running}
            for k in self.queues.backlogged():
                head = self.queues.head(k)
                if head is not None:
                    weights.setdefault(k, tenant_weight(head))
            step.share = view.total_blocks / sum(weights.values())  # blocks per unit of weight
        return step.held.get(key, 0.0) < self.reclaim * step.share

    def _all_decode(self, running: list[Request], bs: int, free: int) -> BatchPlan | None:
        """queued_policy.all_decode with the charges: every decode, charged tenant by tenant. None for any other
        step."""
        plan = all_decode(running, bs, free)
        if plan is None:
            return None
        count: dict = {}
        for r in running:
            key = tenant_key(r)
            c = count.get(key)
            if c is None:
                count[key] = [1, tenant_weight(r)]
            else:
                c[0] += 1
        counters = self.counters
        for key, (n, weight) in count.items():
            counters[key] = counters.get(key, 0.0) + n * self.output_weight / weight
        self.last_victims = []
        return plan

    def _reclaim(self, step: "Step", view: ReplicaView, key, need: int, room: int,
                 decoding: bool = False) -> int | None:
        """Room for ``key``'s waiting request, which does not fit: with ``reclaim`` > 0 and ``key`` holding less than
        ``reclaim`` times its weighted share of the KV cache, running requests of the tenants above their share are
        preempted (the furthest above first, newest first; with ``decoding``, only those in decode phase), if that
        frees enough blocks and a seat. The seats freed, or None."""
        if not self._below_share(step, view, key):
            return None
        share = step.share
        held = step.held
        reclaimed = self.reclaimed
        above = [x for x in step.running if x not in step.preempted and held[tenant_key(x)] > share
                 and reclaimed.get(x.id, 0) < self.max_reclaims]
        if decoding:  # only requests in decode phase (a light step throws away no prompt in progress)
            above = [x for x in above if x.num_generated and x.num_computed + 1 == x.prompt_len + x.num_generated]
        above.sort(key=lambda x: (held[tenant_key(x)], step.age[x]), reverse=True)
        blocks, seats, chosen = step.free, room, []
        for x in above:
            if blocks >= need and seats >= 1:
                break
            chosen.append(x)
            blocks += step.frees(x) + step.planned.get(x, (0, 0, 0))[1]
            seats += 1
        if blocks < need or seats < 1:
            return None
        for x in chosen:
            step.preempt(x, "fair")
            reclaimed[x.id] = reclaimed.get(x.id, 0) + 1
        return len(chosen)

    def _turn(self, item: tuple, tagged: bool = True) -> float:
        """Whose turn it is: a running prompt's next chunk keeps the turn its request was admitted at (unless not
        ``tagged``: then its tenant's counter now); a waiting request has the counter of its tenant, whatever its
        size."""
        tag = self.tags.get(item[1]) if tagged else None
        return self.counters.get(item[0], 0.0) if tag is None else tag

class Step:
    """One plan as it forms: the running requests planned (tokens, new blocks, charge) and preempted, the KV blocks
    free and held per tenant (over its weight), the token budget left and the victims by reason."""

    def __init__(self, policy: VTC, running: list[Request], held: dict, age: dict, free: int, budget: int):
        self.policy = policy
        self.plan = BatchPlan()
        self.running = running
        self.held = held
        self.age = age
        self.free = free
        self.budget = budget
        self.limit = budget  # the step's token budget
        self.planned: dict[Request, tuple[int, int, float]] = {}
        self.preempted: set[Request] = set()
        self.victims: dict[str, list[Request]] = {"kv": [], "fair": []}
        self.short = False  # a running request was short of KV: this plan admits only by reclaiming
        self.share: float | None = None  # KV blocks per unit of weight, when first asked
        self.block_size = 0
        self.frees = lambda x: x.num_blocks  # blocks preempting x returns (view.preempt_frees: shared ones stay)
        self.room = 0  # seats left
        self.admitting = True  # False once a waiting request did not fit
        self.holding_only = False  # a head holding no KV did not fit: only waiting requests holding KV go on
        self.outside: int | None = None  # view.blocks_held_waiting, when first asked
        self.others_wait = False  # a light step (light_first): the other tenants' prompts wait
        self.light: set = set()  # the light tenants of a light step

    def held_outside(self, view: ReplicaView) -> int:
        """``view.blocks_held_waiting`` (sent prompts in transfer, landed or kept for the decode side; a tier's
        loads), asked once a plan."""
        if self.outside is None:
            self.outside = view.blocks_held_waiting
        return self.outside

    def run(self, r: Request, n: int, need: int, decode: bool) -> None:
        """Plan ``n`` tokens of running ``r`` needing ``need`` more blocks; short of blocks, running requests are
        preempted, the newest of the tenant holding most first (``r`` itself last: it goes only when it is that
        request), whether planned already in this plan (then taken out of it) or not."""
        held = self.held
        while need > self.free:
            self.short = True
            victim = max((x for x in self.running if x not in self.preempted),
                         key=lambda x: (held[tenant_key(x)], self.age[x]))
            self.preempt(victim, "kv")
            if victim is r:
                return
        self.free -= need
        self.budget -= n
        cost = self.policy.charge(r, n, decode)
        self.planned[r] = (n, need, cost)
        if decode:
            self.plan.decodes.append(r)
        else:
            self.plan.prefills.append((r, n))

    def preempt(self, x: Request, reason: str) -> None:
        planned = self.planned.pop(x, None)
        if planned is not None:  # taken out of this plan: its tokens, blocks and charge back
            n, need, cost = planned
            self.budget += n
            self.free += need
            self.policy.refund(x, cost)
            if x in self.plan.decodes:
                self.plan.decodes.remove(x)
            else:
                self.plan.prefills.remove((x, n))
        self.preempted.add(x)
        self.policy.tags.pop(x, None)
        self.plan.preempt.append(x)
        self.victims[reason].append(x)
        self.free += self.frees(x)
        self.held[tenant_key(x)] -= x.num_blocks / tenant_weight(x)

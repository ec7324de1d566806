"""InferMax: Algorithm 1, SCHEDULER(M, C, P), one policy whose settings are vLLM, Sarathi, Orca, ...

Kim, Hong, Gulcehre, Ailamaki, "Optimizing LLM Inference for Database Systems: Cost-Aware Scheduling for
Concurrent Requests" (arXiv 2411.07447 v3), §3.1 Algorithm 1 and Table 1; the exact semantics follow the
authors' simulator.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ...request import Request, Status
from ..base import Scheduler
from ..registry import register, register_variant
from ..tunable import IntRange
from .histogram import LengthHistogram

GROUPS = ("waiting", "decode", "partial", "running", "all")
RUNNING_ORDERS = ("arrival", "admission", "kv_desc")
WAITING_ORDERS = ("queue", "input", "output")
RANK_KEYS = ("arrival", "input", "output")
RESERVES = ("prompt", "histogram", "max_total", "max_model_len")
WAITING = Status.WAITING
ARRIVAL = attrgetter("arrival", "id")
NUM_COMPUTED = attrgetter("num_computed")
ID = attrgetter("id")
STOP, SKIP, TAKEN = 0, 1, 2


def holds_no_kv(r: Request) -> bool:
    return not r.num_blocks


@register
@dataclass
class InferMax(Scheduler):
    """InferMax's unified SCHEDULER(M, C, P); by default the paper's proposed policy (§6).

    Each step walks priority groups (step ①, ``groups``: ``waiting`` new and evicted requests,
    ``decode`` running decodes, ``partial`` running unfinished prompts in arrival order, ``running``
    all running requests, or the single group ``all`` of waiting and running ranked by ``rank_key``).
    A candidate of the other phase is skipped when ``hybrid`` is off (②). CANALLOCATE (③) checks the
    batch token cap C (``batch_tokens``, default ``max_num_batched_tokens``), the prefill cap P
    (``prefill_tokens``, default C; decodes in the batch count against it) and the KV slots M
    (``kv_slots`` tokens, default the whole cache). A prompt is cut to the P left when ``chunked``,
    else it must fit whole. On an M failure only (④) a running candidate evicts, by recomputation,
    the tail of the not-yet-batched running requests in ``running_order`` and then itself; a waiting
    candidate stops its group (head-of-line), except in ``all``, where it evicts running requests
    too. Memory is a ledger of reservations: admission reserves ``reserve`` tokens (``prompt``: the
    whole remaining prompt S; ``max_total``: I+O−1, eviction-free, needs the oracle;
    ``max_model_len``: Orca/FasterTransformer; ``histogram``: the prompt, admitted only if the mean
    I+O of completed requests with the same ⌊log2 I⌋ also fits), and each decode then needs one slot.

    The default is §6's deployable policy: Sarathi's groups with running requests sorted by KV held,
    longest first (so the shortest are evicted), histogram admission, P = C.

    Decisions where paper and code are silent (our choices): victims are the tail of the running
    requests not yet in the batch; an evicted request goes to the front of the waiting queue, so a
    step that evicts admits nobody from the ``waiting`` group (the victim heads it and, having just
    lost its slots for want of room, cannot fit); M counts blocks of ``block_size`` tokens (block
    size 1 is the authors' token slots), the reserve rounded up per request; a replica with nothing
    running admits the head of the queue whenever its reservation fits the cache, so an estimate or
    watermark never stalls an idle replica; swap preemption is not supported (the paper evicts by
    recomputation only, §2.2).

    With a prefix cache: plans as without one (its cost model and KV accounting count a prompt whole, a conservative
    bound, since a shared block is counted once in the replica's free blocks); the replica starts each admission
    after its cached blocks.

    Beside blocks held outside the running set (a disaggregated decode instance's sent prompts; not in the paper):
    M leaves them out until their request is admitted, the step also tracks the free blocks, a sorted waiting queue
    puts the requests holding KV first (as the queue's front holds them), and in the group 'all' a candidate evicts
    nobody when evicting every victim would still leave it short (``_Step._futile``).
    """

    name = "infermax"
    family = "InferMax"
    source = ("InferMax (Kim et al., arXiv 2411.07447 v3 = Kim et al.): Algorithm 1 SCHEDULER(M, C, P), §3.1; "
              "Table 1 settings; proposed deployable policy: paper §6")
    recompute_only = True  # the paper evicts by recomputation only (§2.2); the replica refuses swap mode
    serves_transferred_kv = True  # a sent prompt: its last token; its blocks join M when it is admitted
    token_budgets = ("prefill_tokens", "batch_tokens")  # None: the replica's max_num_batched_tokens
    groups: str = "decode,partial,waiting"
    running_order: str = "kv_desc"
    waiting_order: str = "queue"
    rank_key: str = "arrival"
    hybrid: bool = True
    chunked: bool = True
    prefill_tokens: int | None = None
    batch_tokens: int | None = None
    kv_slots: int | None = None
    reserve: str = "histogram"
    histogram_reserve: bool = False
    histogram_threshold: int = 0
    watermark: float = 0.0
    static: bool = False
    max_batch: int | None = None
    tunable = {"batch_tokens": IntRange(64, 8192, log=True), "prefill_tokens": IntRange(64, 8192, log=True),
               "max_num_seqs": IntRange(16, 1024, log=True)}

    def __post_init__(self):
        who = f"{type(self).name}"
        self._groups = tuple(g.strip() for g in self.groups.split(",") if g.strip())
        bad = [g for g in self._groups if g not in GROUPS]
        if bad or not self._groups or len(set(self._groups)) != len(self._groups):
            raise ValueError(f"{who}: groups must be distinct names from {GROUPS}, comma-separated; "
                             f"got {self.groups!r}")
        if "all" in self._groups and len(self._groups) > 1:
            raise ValueError(f"{who}: the group 'all' (waiting and running ranked together) must be the only group")
        # static batches and the single ranked group list requests a KV tier is still loading (Scheduler)
        self.runs_beside_tier_loads = not (self.static or "all" in self._groups)
        for field_name, allowed in (("running_order", RUNNING_ORDERS), ("waiting_order", WAITING_ORDERS),
                                    ("rank_key", RANK_KEYS), ("reserve", RESERVES)):
            if getattr(self, field_name) not in allowed:
                raise ValueError(f"{who}: {field_name} must be one of {allowed}, got {getattr(self, field_name)!r}")
        for field_name in ("prefill_tokens", "batch_tokens", "kv_slots", "max_batch"):
            v = getattr(self, field_name)
            if v is not None and (not isinstance(v, int) or v < 1):
                raise ValueError(f"{who}: {field_name} must be a positive integer or None, got {v!r}")
        if not 0 <= self.watermark < 1:
            raise ValueError(f"{who}: watermark must be in [0, 1), got {self.watermark}")
        if self.histogram_threshold < 0:
            raise ValueError(f"{who}: histogram_threshold must be >= 0, got {self.histogram_threshold}")
        uses_output = (self.reserve == "max_total" or self.waiting_order == "output"
                       or ("all" in self._groups and self.rank_key == "output"))
        if uses_output and not self.needs_oracle:
            raise ValueError(f"{who}: reserve='max_total' and the 'output' orders decide from true output lengths; "
                             f"use the scheduler 'infermax-oracle' (or an -ef / rank-o variant) with --oracle")
        # the all-decodes shortcut applies where only the decode/running groups can act and reservations are KV
        self._decodes_fast = ("all" not in self._groups and not self.static and self.reserve in ("prompt", "histogram")
                              and ("decode" in self._groups or "running" in self._groups))
        self._hist = LengthHistogram()
        self._floor: dict[int, int] = {}  # reserved estimate per request (histogram_reserve only)
        self._cohort: list[Request] = []  # static batching

    # --- memory ledger (tokens) -------------------------------------------------------------------------
    def _cap_tokens(self, view: ReplicaView) -> int:
        whole = view.total_blocks * view.block_size
        return whole if self.kv_slots is None else min(whole, self.kv_slots)

    def _batch_tokens(self, view: ReplicaView) -> int:
        """C: the batch token cap."""
        C = view.max_num_batched_tokens
        return C if self.batch_tokens is None else min(self.batch_tokens, C)

    def _fixed_reserve(self, r: Request, view: ReplicaView, cap_tokens: int) -> int | None:
        if self.reserve == "max_total":
            return r.prompt_len + view.oracle_output_len(r) - 1
        if self.reserve == "max_model_len":
            return min(view.max_model_len, cap_tokens)
        return None

    def _held_all(self, running: list[Request], view: ReplicaView, cap_tokens: int) -> dict[int, int]:
        """Slots reserved by each running request: its fixed reserve, else the whole prompt until it is done."""
        if self.reserve == "max_model_len":
            return dict.fromkeys((r.id for r in running), min(view.max_model_len, cap_tokens))
        if self.reserve == "max_total":
            return {r.id: r.prompt_len + view.oracle_output_len(r) - 1 for r in running}
        held = {}
        for r in running:
            n = r.prompt_len + r.num_generated
            m = r.num_computed
            held[r.id] = m if (r.num_generated and m + 1 == n) else n
        if self._floor:
            for r in running:
                held[r.id] = max(held[r.id], self._floor.get(r.id, 0))
        return held

    def _admission(self, r: Request, view: ReplicaView, cap_tokens: int) -> tuple[int, int]:
        """(tokens the admission check needs, tokens reserved) for waiting request ``r``."""
        fixed = self._fixed_reserve(r, view, cap_tokens)
        if fixed is not None:
            return fixed, fixed
        s = r.num_tokens
        if self.reserve == "histogram":
            est = self._hist.estimate(r.prompt_len, s, self.histogram_threshold)
            return est, est if self.histogram_reserve else s
        return s, s

    # --- orders -------------------------------------------------------------------------------------------
    def _running(self, view: ReplicaView) -> list[Request]:
        if self.running_order == "admission":
            return list(view.running)
        if self.running_order == "arrival":
            return sorted(view.running, key=ARRIVAL)
        # KV held, longest first, ties by arrival: two stable sorts on C-level keys, the order of the key
        # (-num_computed, arrival, id)
        order = sorted(view.running, key=ARRIVAL)
        order.sort(key=NUM_COMPUTED, reverse=True)
        return order

    def _length_key(self, key: str, view: ReplicaView):
        if key == "input":
            return lambda r: (r.prompt_len, r.arrival, r.id)
        if key == "output":
            return lambda r: (view.oracle_output_len(r), r.arrival, r.id)
        return ARRIVAL

    def _waiting(self, view: ReplicaView, step: "_Step") -> list[Request]:
        if self.static:
            pending = [r for r in self._cohort if r.status is WAITING]
            if not view.running and (not pending or self._blocked(pending[0], view, step)):
                pending = self._cohort = self._new_cohort(view, step)
            return pending
        if self.waiting_order == "queue":
            return view.waiting
        order = sorted(view.waiting, key=self._length_key(self.waiting_order, view))
        if step.free is not None:  # (blocks are held outside the running set)
            # requests holding KV (a decode instance's sent prompts) go first, as in the queue: the blocks they hold
            # join the ledger only when they are admitted, and a request holding none sorted ahead of them could stop
            # the group for want of those very blocks, for ever
            order.sort(key=holds_no_kv)
        return order

    def _blocked(self, head: Request, view: ReplicaView, step: "_Step") -> bool:
        """An idle replica's cohort head that holds no KV and that neither the free blocks nor M (less the blocks
        held outside it) can take while requests holding KV wait (a disaggregated decode instance's sent prompts,
        which lead the queue): the cohort is formed again."""
        if step.free is None or head.num_blocks or not (view.waiting and view.waiting[0].num_blocks):
            return False
        reserve = view.blocks_for(self._admission(head, view, step.cap_tokens)[1])
        return reserve > step.cap or view.admission_blocks(head, view.tokens_to_compute(head)) > step.free

    def _new_cohort(self, view: ReplicaView, step: "_Step") -> list[Request]:
        """Static batching: FCFS while seats and the reservations fit (at least one); a member holding KV brings its
        blocks into M."""
        cohort, used, cap = [], 0, step.cap - step.mark
        seats = view.max_num_seqs if self.max_batch is None else min(self.max_batch, view.max_num_seqs)
        for r in view.waiting:
            if len(cohort) >= seats:
                break
            if step.too_long(r):
                continue
            need = view.blocks_for(self._admission(r, view, step.cap_tokens)[0])
            cap += r.num_blocks
            if cohort and used + need > cap:
                break
            cohort.append(r)
            used += need
        return cohort

    # --- Algorithm 1, GETNEXTBATCH ------------------------------------------------------------------------
    def schedule(self, view: ReplicaView) -> BatchPlan:
        if view.swapped:
            raise ValueError(f"{self.name}: InferMax evicts by recomputation only (Kim et al. §2.2); "
                             f"run it with preemption_mode='recompute'")
        if self._decodes_fast and view.running and not view.waiting and not self._floor:
            plan = self._decodes_only(view)
            if plan is not None:
                return plan
        step = _Step(self, view)
        for group in self._groups:
            if group == "waiting":
                if step.evicted:
                    continue
                cands = self._waiting(view, step)
            elif group == "decode":
                gone = step.gone
                cands = [r for r in step.decoding if r.id not in gone] if gone else list(step.decoding)
                if step.add_all_decodes(cands):
                    continue
            elif group == "partial":
                cands = sorted(step.partial, key=ARRIVAL)
            elif group == "running":
                cands = [r for r in step.order if r.id not in step.gone]
                if all(r.num_generated and r.num_computed + 1 == r.num_tokens for r in cands) \
                        and step.add_all_decodes(cands):
                    continue
            else:
                cands = sorted([*view.waiting, *step.order], key=self._length_key(self.rank_key, view))
            for r in cands:
                if r.id in step.gone:
                    continue
                if step.add(r, group) == STOP:
                    break
        if self.histogram_reserve:
            for r, keep in step.admitted.items():
                self._floor[r.id] = keep
        return step.plan

    def _decodes_only(self, view: ReplicaView) -> BatchPlan | None:
        """GETNEXTBATCH when every running request decodes, none waits and all fit (tokens, batch size, KV): the
        decode (or running) group takes them all in ``running_order`` (``_Step.add_all_decodes``), computed in one
        pass without the step's ledger. None where the general walk is needed (a prefill, a limit binds)."""
        running = view.running
        bs = view.block_size
        cap = self._cap_tokens(view) // bs - view.blocks_held_waiting
        n = len(running)
        if cap < 1 or n > self._batch_tokens(view) or (self.max_batch is not None and n > self.max_batch):
            return None
        kv_desc = self.running_order == "kv_desc"
        keyed = []
        add = keyed.append
        used = crossing = 0
        for r in running:
            g, m = r.num_generated, r.num_computed
            if not (g and m + 1 == r.prompt_len + g):
                return None
            used += -(-m // bs)  # a decode's reservation is its KV, m tokens
            if bs == 1 or m % bs == 0:
                crossing += 1
            add((-m if kv_desc else 0, r.arrival, r.id, len(keyed), r))
        if used + crossing > cap:
            return None
        plan = BatchPlan()
        if self.running_order == "admission":
            plan.decodes = list(running)
        else:  # by arrival, or KV held (longest first) then arrival; ties in view order
            keyed.sort()
            plan.decodes = [item[4] for item in keyed]
        return plan

    def on_step_end(self, view: ReplicaView, plan: BatchPlan, duration: float) -> None:
        for r in plan.decodes:
            if r.status is Status.FINISHED:
                self._finished(r)
        for r, _ in plan.prefills:
            if r.status is Status.FINISHED:
                self._finished(r)

    def _finished(self, r: Request) -> None:
        self._hist.record(r.prompt_len, r.num_generated)  # the output it produced, observed at completion
        self._floor.pop(r.id, None)


class _Step:
    """One GETNEXTBATCH: the batch being built and the KV ledger, in blocks."""

    def __init__(self, policy: InferMax, view: ReplicaView):
        self.policy, self.view, self.plan = policy, view, BatchPlan()
        bs = view.block_size
        self.cap_tokens = policy._cap_tokens(view)
        whole = self.cap_tokens // bs
        if whole < 1:
            raise ValueError(f"{policy.name}: kv_slots {policy.kv_slots} is below one block of {bs} tokens")
        self.mark = int(policy.watermark * whole)
        # the paper's ledger is the running requests' KV; blocks a waiting request holds (a KV tier's load) are not
        # the batch's to take, until that request is admitted (``_admit``)
        held_outside = view.blocks_held_waiting
        self.cap = whole - held_outside
        # beside such blocks the ledger is not the cache: transfers to a disaggregated decode instance take blocks as
        # they start, whatever was reserved, so the step also tracks the free blocks (None: nothing held outside, the
        # ledger alone binds, as in the paper)
        self.free = view.free_blocks if held_outside else None
        self.C = policy._batch_tokens(view)
        self.P = self.C if policy.prefill_tokens is None else min(policy.prefill_tokens, self.C)
        self.order = order = policy._running(view)
        self.pool = list(order)  # eviction candidates, lowest priority last
        self.decoding, self.partial = [], []  # running requests in decode phase, the others (both in order)
        for r in order:
            g = r.num_generated
            (self.decoding if g and r.num_computed + 1 == r.prompt_len + g else self.partial).append(r)
        self.held = policy._held_all(order, view, self.cap_tokens)
        self.used = sum(-(-t // bs) for t in self.held.values()) if bs > 1 else sum(self.held.values())
        self.seats = view.max_num_seqs - len(view.running)
        self.idle = not view.running
        self.tokens = 0
        self.count = 0
        self.has_prefill = self.has_decode = self.evicted = False
        self.gone: set[int] = set()  # batched or evicted this step
        self.admitted: dict[Request, int] = {}

    def add_all_decodes(self, cands: list[Request]) -> bool:
        """The common case in one pass: every decode fits (tokens, batch size, KV) with no eviction."""
        p, n = self.policy, len(cands)
        if not n or (not p.hybrid and self.has_prefill) or self.tokens + n > self.C or (
                p.max_batch is not None and self.count + n > p.max_batch):
            return not n
        held, bs, delta = self.held, self.view.block_size, 0
        for r in cands:
            m = r.num_computed
            if m + 1 > held[r.id] and (bs == 1 or m % bs == 0):
                delta += 1
        if delta and self.used + delta > self.cap:
            return False
        if self.free is not None:
            need = sum(map(self.view.decode_blocks, cands))
            if need > self.free:
                return False
            self.free -= need
        # Their held slots are not updated: nothing reads a batched request's reservation again this step.
        self.gone.update(map(ID, cands))
        self.used += delta
        self.count += n
        self.tokens += n
        self.plan.decodes.extend(cands)
        self.has_decode = True
        return True

    def too_long(self, r: Request) -> bool:
        """An unchunked prompt over min(P, C) can never run: reject it with the reason."""
        n = r.num_tokens - r.num_computed
        limit = self.P
        if self.policy.chunked or n <= limit:
            return False
        self.plan.reject.append((r, f"its {n}-token prompt exceeds the per-batch limit {limit} (P/C, "
                                    f"max_num_batched_tokens) and this setting does not chunk prompts"))
        return True

    def add(self, r: Request, group: str) -> int:
        p = self.policy
        if p.max_batch is not None and self.count >= p.max_batch:
            return STOP
        waiting = r.status is WAITING
        decode = not waiting and r.is_decode
        if not p.hybrid and (self.has_prefill if decode else self.has_decode):
            return SKIP
        if decode:
            if self.tokens + 1 > self.C:
                return STOP
            c = 1
        else:
            todo = r.num_tokens - r.num_computed
            room = self.P - self.tokens
            if waiting and self.too_long(r):
                return SKIP
            c = min(todo, room) if p.chunked else (todo if todo <= room else 0)
            if c <= 0:
                return STOP if group == "waiting" else SKIP
        if waiting:
            if not self._admit(r, c, group):
                return STOP if group == "waiting" else SKIP
        elif not self._grow(r, c, group):
            return SKIP
        self.gone.add(r.id)
        self.count += 1
        self.tokens += c
        if decode:
            self.plan.decodes.append(r)
            self.has_decode = True
        else:
            self.plan.prefills.append((r, c))
            self.has_prefill = True
        return TAKEN

    def _admit(self, r: Request, c: int, group: str) -> bool:
        if self.seats < 1:
            return False
        view = self.view
        blocks = view.blocks_for
        check, keep = self.policy._admission(r, view, self.cap_tokens)
        need = blocks(check)
        takes = 0
        if self.free is not None:
            takes = view.admission_blocks(r, c)
            if takes > self.free:
                return False  # its blocks are not free (held outside the ledger): it waits
        self.cap += r.num_blocks  # the KV it holds (a tier loaded it, a prefill instance sent it) joins the ledger
        while self.used + need > self.cap - self.mark:
            if self.idle and self.used == 0 and (blocks(keep) <= self.cap or r.num_blocks):
                # an idle replica always takes the head of the queue; one holding KV whatever it reserves, since
                # the others holding KV may leave it no room (their blocks are theirs until admitted)
                break
            if group != "all" or (self.free is not None and self._futile(self.used + need - self.cap + self.mark)):
                self.cap -= r.num_blocks
                return False
            victim = self._victim(None)
            if victim is None:
                self.cap -= r.num_blocks
                return False
            self._evict(victim)
        self.used += blocks(keep)
        self.seats -= 1
        self.admitted[r] = keep
        if self.free is not None:
            self.free -= takes
        return True

    def _grow(self, r: Request, c: int, group: str) -> bool:
        """Reserve ``r``'s next ``c`` tokens, evicting the tail of the running requests (then ``r``) while the ledger
        overflows; beside blocks held outside it, also while the free blocks do not hold them (as vLLM preempts)."""
        blocks = self.view.blocks_for
        held = self.held[r.id]
        new = max(held, r.num_computed + c)
        delta = blocks(new) - blocks(held)
        takes = self.view.extra_blocks(r, r.num_computed + c) if self.free is not None else 0
        if group == "all" and self.free is not None and self._futile(self.used + delta - self.cap, takes, r):
            self._evict(r)
            return False
        while (delta and self.used + delta > self.cap) or (takes > 0 and takes > self.free):
            victim = self._victim(r if group != "all" else None, skip=r)
            if victim is None or victim is r:
                self._evict(r)
                return False
            self._evict(victim)
        self.used += delta
        self.held[r.id] = new
        if takes > 0:
            self.free -= takes
        return True

    def _futile(self, short: int, takes: int = 0, skip: Request | None = None) -> bool:
        """Beside blocks held outside the ledger (a decode instance's sent prompts), whether evicting every running
        request not yet batched (but ``skip``) would still leave the ledger ``short`` blocks over, or fewer than
        ``takes`` blocks free. In the group 'all' a waiting candidate then evicts nobody, and a running one only
        itself: the held blocks join the ledger only as their requests are admitted, so evicting the others would
        only throw their work away, step after step (a livelock under Rank_I, seed 612 of
        scripts/decode_pool_fuzz.py). The paper's caches hold nothing outside the ledger: there Algorithm 1's
        eviction is kept as the authors wrote it."""
        if short <= 0 and takes <= self.free:
            return False
        gone, held, view = self.gone, self.held, self.view
        victims = [v for v in self.pool if v.id not in gone and v is not skip]
        return (short > sum(view.blocks_for(held[v.id]) for v in victims)
                or takes > self.free + sum(map(view.preempt_frees, victims)))

    def _victim(self, stop_at: Request | None, skip: Request | None = None) -> Request | None:
        """The lowest-priority running request not yet batched: the pool's tail (``stop_at`` itself when reached)."""
        pool, gone = self.pool, self.gone
        i = len(pool) - 1
        while i >= 0:
            v = pool[i]
            if v.id in gone:
                pool.pop(i)
            elif v is stop_at:
                return v
            elif v is not skip:
                return v
            i -= 1
        return None

    def _evict(self, v: Request) -> None:
        self.plan.preempt.append(v)
        self.used -= self.view.blocks_for(self.held[v.id])
        if self.free is not None:
            self.free += self.view.preempt_frees(v)
        self.seats += 1
        self.gone.add(v.id)
        self.evicted = True


@register
@dataclass
class InferMaxOracle(InferMax):
    """InferMax settings that read true output lengths: eviction-free reservations (I+O−1), Rank_O."""

    name = "infermax-oracle"
    source = InferMax.source + "; hypothetical settings that know O (§4.1 EF variants, §4.6 Rank_O)"
    needs_oracle = True
    reserve: str = "max_total"


# --- the known schedulers as settings (Kim et al. Table 1, §1.6 of spec 001) ----------------------------------
VLLM = dict(groups="waiting,decode", running_order="arrival", hybrid=False, chunked=False, reserve="prompt")
VLLM_HY = dict(VLLM, hybrid=True)
SARATHI = dict(groups="decode,partial,waiting", running_order="arrival", hybrid=True, chunked=True,
               reserve="prompt", prefill_tokens=512)
SARATHI_PC = dict(SARATHI, prefill_tokens=None)
SARATHI_NOCP = dict(SARATHI, prefill_tokens=None, chunked=False)
SARATHI_NOHY = dict(SARATHI, prefill_tokens=None, chunked=False, hybrid=False)
ORCA = dict(groups="running,waiting", running_order="arrival", hybrid=True, chunked=False, reserve="max_model_len")
FT = dict(ORCA, groups="waiting,decode", hybrid=False, static=True)
RANK = dict(groups="all", running_order="arrival", hybrid=True, chunked=True, reserve="prompt")

# Named settings; sarathi-nohy is a setting (SARATHI_NOHY) but not registered: online it starves prompts behind
# every decode, like static batching, and takes a minute under `llmsched compare`'s defaults.
SETTINGS = {
    "vllm": (VLLM, "vLLM: prefill-first, whole prompts, no hybrid batches (Table 1)", True),
    "vllm-hy": (VLLM_HY, "vLLM_hy: vLLM with decodes appended to prefill batches (Table 1)", False),
    "sarathi": (SARATHI, "SARATHI: decode-first, hybrid, chunked prefill P=512 (Table 1)", True),
    "sarathi-pc": (SARATHI_PC, "SARATHI_P=C: SARATHI with P = C (Table 1)", True),
    "sarathi-nocp": (SARATHI_NOCP, "SARATHI_nocp: SARATHI without chunking, P = C (Table 1)", False),
    "orca": (ORCA, "Orca: iteration-level hybrid batches, reserve max_model_len (Kim et al. §1.6, Vidur)", True),
    "ft": (FT, "FasterTransformer: static batches reserving max_model_len (Kim et al. §1.6, Vidur)", True),
}
for _name, (_setting, _summary, _ef) in SETTINGS.items():
    register_variant(f"infermax-{_name}", InferMax, "InferMax setting " + _summary, **_setting)
    if _ef:
        register_variant(f"infermax-{_name}-ef", InferMaxOracle,
                         "InferMax setting " + _summary.split(":")[0] + "^ef: eviction-free, reserves I+O-1 at "
                         "admission (hypothetical, needs the oracle; §4.1)", **dict(_setting, reserve="max_total"))
register_variant("infermax-rank-org", InferMax, "InferMax Rank_org: one group ranked by arrival, hybrid, chunked "
                 "(§4.6)", **RANK)
register_variant("infermax-rank-i", InferMax, "InferMax Rank_I: shortest input first over waiting and running "
                 "(§4.6)", **dict(RANK, rank_key="input"))
register_variant("infermax-rank-o", InferMaxOracle, "InferMax Rank_O: shortest output first (hypothetical, needs the "
                 "oracle; §4.6)", **dict(RANK, rank_key="output", reserve="prompt"))

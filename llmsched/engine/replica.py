"""One serving replica: the mechanism a scheduler's plans run on.

A step is ``start_step(now)`` (ask the policy, check the plan against the hard limits, preempt, admit, allocate
KV, predict the duration) then ``end_step(now)`` (tokens appear, finished requests free their KV). The policy never
mutates state. The replica's state has one owner a concern, each a component it holds: the KV cache manager, the
only writer of block state (``kv``, kv_cache.py); the clock and the step in flight (``clock``, step_clock.py); the
step and preemption counts (``counters``, step_counters.py); the decode group and the steps launched through it
(``groups``, group_steps.py). Beside them: the plan check (plan_check.py); preemption, overflow eviction and
swap-in (preemption.py); fast-forwarded decode runs (decode_run.py). Nothing outside these writes a replica's
attributes: the simulator reads them (the properties below) and calls its methods.

With vLLM v1's prefix cache, a step's KV is taken in vLLM 0.32's order (vllm/v1/core/sched/scheduler.py,
``Scheduler.schedule``): the running loop first (each running request's ``allocate_slots``: a decode's new block, a
prompt chunk's blocks, its full blocks cached as it is scheduled), then the waiting loop request by request
(``get_computed_blocks``, then ``allocate_slots``: the hit referenced, the chunk's blocks taken, evicting the
LRU's cached blocks once no uncached one is free, its full blocks cached). An admission's lookup so sees every
eviction and every cached block of the allocations before it in the step. The policy plans before anything is
taken, so its lookups, and the launch's sizing of the plan's admissions (``plan_check.fit_hits_in_order``), go
through a draft that replays the step's order without changing the cache (engine/cache_draft.py); ``launch`` then
takes the blocks in that order (``allocate_in_order``). That is for a policy that plans so
(``looks_up_in_order``: vllm-chunked); for the others, and with KV tiers below the GPU, every admission's hit is
referenced before any block is taken, so it finds at least what the policy saw. Without a prefix cache the order
changes nothing: blocks are counted, so the launch takes them all at once.
"""
from __future__ import annotations

from collections import deque

from ..batchtime.base import Batch, BatchTimeModel
from ..metrics.steps import StepLog
from ..request import Request, Status
from . import plan_check, preemption, remote_kv
from .config import ReplicaConfig
from .decode_run import fast_forward_decodes, fast_forward_group
from .group_steps import GroupSteps
from .step_clock import StepClock
from .step_counters import StepCounters
from .kv_cache import KVCacheManager
from .kv_windows import windowed_manager
from .plan import BatchPlan
from .policy import Policy
from .tokens import advance_chunk
from .view import ReplicaView

__all__ = ["Replica", "ReplicaConfig"]

WAITING, RUNNING, FINISHED, REJECTED = Status.WAITING, Status.RUNNING, Status.FINISHED, Status.REJECTED


class Replica:
    def __init__(self, index: int, scheduler: Policy, batch_time: BatchTimeModel,
                 config: ReplicaConfig, steps: StepLog | None = None):
        if scheduler.needs_oracle and not config.oracle:
            raise ValueError(f"scheduler {scheduler.name!r} decides from true output lengths: "
                             f"run it with the oracle option (--oracle, oracle = true)")
        if scheduler.recompute_only and config.preemption_mode == "swap":
            raise ValueError(f"scheduler {scheduler.name!r} preempts by recomputation only: run it with "
                             f"preemption_mode 'recompute' (--preemption-mode recompute)")
        # fast-forward runs of repeated decode-only steps (decode_run.py), past finishes where the policy says so
        self.folds = (config.fast_forward and getattr(scheduler, "steady_decodes", False)
                      and batch_time.decode_sum_only)
        # a finish folded past frees the blocks the fold counts; with a prefix cache, shared ones stay held
        self.folds_finishes = (self.folds and getattr(scheduler, "steady_after_finishes", False)
                               and not config.prefix_caching)
        self.groups = GroupSteps(self, self.folds and getattr(scheduler, "plans_decode_group", False))
        self.clock = StepClock()
        self.counters = StepCounters()
        self.index = index
        self.scheduler = scheduler
        self.batch_time = batch_time
        self.config = config
        self.caching = config.prefix_caching  # vLLM v1's prefix cache (engine/prefix_cache.py)
        if config.kv_offload is not None:  # KV tiers below the GPU, a component of the KV manager
            if not self.caching:
                raise ValueError("KV offload tiers hold cached prefixes: they need the prefix cache, and requests "
                                 "whose prompts have identities (a Mooncake or session trace, --workload "
                                 "shared-prefix, --turns)")
            if not scheduler.runs_beside_tier_loads:
                raise ValueError(f"kv_offload: scheduler {scheduler.name!r} cannot run beside KV tiers below the GPU "
                                 f"(its plans do not count the blocks a tier loads for a waiting request: "
                                 f"Scheduler.runs_beside_tier_loads); drop --kv-offload or use another scheduler "
                                 f"(e.g. vllm-chunked, sarathi, infermax)")
            from .kv_tiers import KVTiers
            from .prefix_cache import PrefixCachingKVManager
            tiers = KVTiers(config.kv_offload, config.block_size)
            tiers.recompute = lambda tokens, context: batch_time.step_time(Batch([tokens], [context], []))
            self.kv = PrefixCachingKVManager(config.num_blocks, config.block_size, config.swap_blocks, tiers)
        else:
            if self.caching:
                from .prefix_cache import PrefixCachingKVManager as manager  # imported only by a run that caches
            else:
                manager = KVCacheManager
            self.kv = manager(config.num_blocks, config.block_size, config.swap_blocks) if config.kv_groups is None \
                else windowed_manager(config, scheduler)
        self.tiers = self.kv.tiers if self.caching else None  # the KV manager's tiers below the GPU, or None
        # a step's admissions look up the cache in vLLM's order (allocate_in_order), for a policy that plans so
        self.in_order = self.caching and self.tiers is None and getattr(scheduler, "looks_up_in_order", False)
        self.loading: list = []  # requests waiting for their KV from a tier below the GPU: no step repeats unasked
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.swapped: list[Request] = []
        self.completed: list[Request] = []  # finished or rejected since the caller last drained it
        # requests whose prompt KV comes from a prefill instance (remote_kv.py): received and waiting for blocks,
        # in transfer, and those reserved since the caller last drained it (it starts their transfers)
        self.receiving: deque = deque()
        self.transferring: list[Request] = []
        self.reserved: list[Request] = []
        # with KV tiers below the GPU (a decode pool's): the requests waiting with the prompt KV a prefill instance
        # sent, told apart from those waiting with KV a tier loaded (they are checked, and released, differently)
        self.landed: set = set()
        # a disaggregated fleet's prefill instance keeps a finished prompt's blocks until the decode side has read
        # them (NIXL's ``request_finished`` delays their free): request id -> request, while they are held
        self.sends_kv = False
        self.sent: dict = {}
        self.log_steps_to(steps if steps is not None else StepLog())
        self.view = ReplicaView(self)
        self.quiet_finishes = False  # a finishing request adds no event (an open loop: set_quiet_finishes)
        self.fruitless: dict = {}  # request id -> (its tokens, preemptions in a row without one more): livelock.py
        self._order = 0  # next running position
        self.arrivals = 0  # requests added so far
        self.asked_at = 0  # arrivals when the policy was last asked
        self.version = 0  # counts the calls that may change the replica's state: equal values, same state
        scheduler.check_limits(self.view)  # a policy that can never run here refuses before the run

    # --- what the run reads (each from its owner) -------------------------------------------------------------
    @property
    def now(self) -> float:
        return self.clock.now

    @property
    def busy(self) -> bool:
        return self.clock.busy

    @property
    def plan(self) -> BatchPlan | None:
        return self.clock.plan

    @property
    def step_start(self) -> float:
        return self.clock.step_start

    @property
    def step_end(self) -> float:
        return self.clock.step_end

    @property
    def last_end(self) -> float:
        return self.clock.last_end

    @property
    def wake_at(self) -> float | None:
        return self.clock.wake_at

    @property
    def num_steps(self) -> int:
        return self.counters.num_steps

    @property
    def busy_time(self) -> float:
        return self.counters.busy_time

    @property
    def recent_steps(self) -> deque:
        return self.counters.recent_steps

    @property
    def num_preemptions(self) -> int:
        return self.counters.num_preemptions

    @property
    def swap_fallbacks(self) -> int:
        return self.counters.swap_fallbacks

    @property
    def num_evictions(self) -> int:
        return self.counters.num_evictions

    @property
    def group(self):
        """The decode group (engine/decode_group.py), or None while none is formed."""
        return self.groups.group

    def set_quiet_finishes(self, quiet: bool) -> None:
        """Whether a finishing request adds no event (an open-loop source): then a fast-forward of decode steps
        may fold past finishes, for a policy that declares ``steady_after_finishes``."""
        self.quiet_finishes = quiet

    def take_completed(self) -> list[Request]:
        """The requests finished or rejected since the last call, in the order they left."""
        done = self.completed
        self.completed = []
        return done

    def take_reserved(self) -> list[Request]:
        """The received requests given their blocks since the last call (their KV transfers start now)."""
        reserved = self.reserved
        self.reserved = []
        return reserved

    # --- requests whose prompt KV a prefill instance sends (remote_kv.py) -----------------------------------------
    def receive(self, req: Request, now: float) -> bool:
        """Queue ``req``, a decode request without its prompt's KV, or reject it when it can never be served. Not
        an arrival for the policy: it sees the request once its KV is ``loaded``."""
        self.version += 1
        self.clock.tick(now)
        return remote_kv.receive(self, req)

    def loaded(self, req: Request, now: float) -> None:
        """``req``'s prompt KV has arrived: it waits with the prompt computed but its last token."""
        self.version += 1
        self.clock.tick(now)
        if req.status is Status.ABORTED:  # its client gave up during the transfer: the blocks go now (abort)
            remote_kv.drop(self, req)
            return
        self.arrivals += 1
        remote_kv.loaded(self, req)

    def log_steps_to(self, steps: StepLog) -> None:
        """Record the steps that end from now on into ``steps`` (the run's shared log, or a lane's own)."""
        self.steps = steps
        self.add_row = steps.add
        if self.caching:
            steps.keep_hits()

    # --- arrivals ---------------------------------------------------------
    def never_fits(self, req: Request) -> str | None:
        """Why ``req`` can never be served here whatever the policy (too long for max_model_len, or more KV at its
        longest than the whole cache), or None."""
        if req.prompt_len + req.output_len > self.config.max_model_len:
            return (f"prompt {req.prompt_len} + output {req.output_len} tokens exceed max_model_len "
                    f"{self.config.max_model_len}")
        need = self.kv.blocks_for(req.max_kv_tokens)
        if need > self.kv.total:
            return (f"needs {need} KV blocks at its longest, the cache holds {self.kv.total}: it can never be served "
                    f"here")
        return None

    def add(self, req: Request, now: float) -> bool:
        """Queue an arrival, or reject it when it can never be served. True if queued."""
        self.version += 1
        self.clock.tick(now)
        self.arrivals += 1
        req.replica = self.index
        reason = self.never_fits(req)
        if reason:
            return self.reject(req, reason)
        reason = self.scheduler.unservable(req, self.view) or self.scheduler.on_arrival(req, self.view)
        if reason:
            return self.reject(req, f"{self.scheduler.name}: {reason}")
        req.status = WAITING
        self.waiting.append(req)
        return True

    def reject(self, req: Request, reason: str) -> bool:
        """``req`` leaves for good with ``reason`` (False, for ``add``)."""
        req.status = REJECTED
        req.reject_reason = reason
        if req.num_blocks:  # its KV came from a tier, or a prefill instance sent it, while it waited
            self.kv.release(req)
        if self.caching:
            self.kv.discard(req)
        req.finish = self.clock.now
        self.completed.append(req)
        return False

    @property
    def num_outstanding(self) -> int:
        """Requests on the replica, those whose KV still arrives after their client gave up included (they hold
        blocks: a draining replica is not empty before they land)."""
        return (len(self.waiting) + len(self.running) + len(self.swapped) + len(self.loading)
                + len(self.receiving) + len(self.transferring))

    def warm(self, req: Request) -> bool:
        """``req``'s prompt ran to its end before the run (a benchmark sent it to warm up): its full blocks wait in
        the prefix cache, referenced by none, as vLLM leaves a finished request's, and its chunks in the KV tiers
        below the GPU, if any. False, nothing kept, without a prefix cache or where the prompt does not fit the free
        blocks."""
        kv = self.kv
        if not self.caching or req.content is None or kv.blocks_for(req.prompt_len) > kv.free:
            return False
        self.version += 1
        kv.allocate(req, req.prompt_len)
        req.num_computed = req.prompt_len
        if self.tiers is not None:  # (its chunks stored below the GPU as well, as a run's prefill's are)
            self.tiers.warm(req)
        kv.release(req)
        return True

    def send_kv(self) -> None:
        """This replica is a disaggregated fleet's prefill instance: a finished prompt's blocks stay until the decode
        side reads them (``read_sent``), under a policy that plans from the KV manager's free blocks (one with a
        ledger of its own could not run beside them: disagg_config.sending)."""
        self.sends_kv = self.scheduler.serves_transferred_kv

    def read_sent(self, rid: int) -> bool:
        """The decode side has read request ``rid``'s prompt KV (or the request left before it could): the blocks
        this prefill instance kept for it are freed. True if it held any."""
        r = self.sent.pop(rid, None)
        if r is None:
            return False
        self.version += 1
        self.kv.release(r)
        return True

    @property
    def num_serving(self) -> int:
        """Requests it still serves for their clients: ``num_outstanding`` without the aborted ones whose KV still
        arrives (``abort``: a router heard that they left)."""
        n = self.num_outstanding
        if self.loading or self.transferring:
            n -= sum(r.status is Status.ABORTED for r in (*self.loading, *self.transferring))
        return n

    # --- a step -----------------------------------------------------------
    def start_step(self, now: float, until: float | None = None, horizon: float | None = None) -> float | None:
        """Ask the policy and launch its plan (or, when the step that just ended will repeat, launch it again
        without asking: ``repeats``). Returns the step duration, or None if idle
        (then ``wake_at`` says when to ask again, None meaning at the next arrival); the step ends at ``step_end``.

        ``until`` (the simulator's next event) allows fast-forwarding: steps that would start before ``until`` and
        by ``horizon``, and would repeat this plan, are run at once; then the last of them is the step in flight.
        With ``quiet_finishes`` set (by the simulator, for a source whose completions add no event) the run may
        fold past finishes for a policy that declares ``steady_after_finishes``; those requests are in
        ``completed``."""
        clock = self.clock
        assert not clock.busy, "start_step while a step is running"
        self.version += 1
        clock.tick(now)
        clock.asleep_until(None)
        groups = self.groups
        if groups.steady and until is not None and groups.repeats(now):
            duration = groups.relaunch_group(now)
        else:
            duration = self._ask_and_launch(now)
            if duration is None:
                return None
        clock.start(now, duration)
        launched = clock.plan
        if (until is not None and self.folds and clock.step_end < until and not launched.prefills
                and not clock.step_preempted and not self.waiting and not self.swapped and not self.loading
                and not self.receiving and not self.reserved):
            # end_step checks the state it leaves; a transfer just reserved for ends at an event the fold cannot see
            through = self.quiet_finishes and self.folds_finishes
            if launched.decode_group:
                if not groups.group.partials:
                    duration = fast_forward_group(self, until, horizon, through)
            elif len(launched.decodes) == len(self.running):
                duration = fast_forward_decodes(self, until, horizon, through)
        return duration

    def end_and_repeat(self, now: float) -> bool:
        """The step in flight ends at ``now`` and the same plan starts again, when it decoded the decode group alone
        and will repeat (``GroupSteps.end_and_repeat``); False, nothing done, for any other step."""
        if self.groups.end_and_repeat(now):
            self.version += 1
            return True
        return False

    def fold(self, until: float, horizon: float | None) -> None:
        """After ``end_and_repeat``: the steps that repeat and end before ``until`` run at once
        (``GroupSteps.fold``)."""
        self.version += 1
        self.groups.fold(until, horizon)

    def _ask_and_launch(self, now: float, swap_in: bool = True) -> float | None:
        """The policy's plan, launched; None when it has no work (``wake_at`` set if it asked to be woken).
        ``swap_in=False``: nothing swapped comes back (this scheduling point has preempted)."""
        if self.swapped and swap_in:
            self.groups.settle()
            preemption.swap_in(self)
        if self.receiving:
            remote_kv.reserve(self)
        if self.tiers is not None:  # transfers landed by now: stores readable, loaded requests back in the queue
            self.land_loads(now)
        plan = self.scheduler.schedule(self.view)
        self.asked_at = self.arrivals
        for req, reason in plan.reject:
            plan_check.check_reject(self, req)
            self.waiting.remove(req)
            self.landed.discard(req)
            self.reject(req, f"{self.scheduler.name}: {reason}")
        if not plan.has_work:
            if self.tiers is not None:
                if plan.preempt:
                    return self.preempt_only(plan, now)
                if not self.running and not self.loading and self.holds_loaded() and self.release_loaded():
                    return self._ask_and_launch(now)
            elif plan.preempt and (self.transferring or self.sent or any(r.num_blocks for r in self.waiting)):
                return self._preempt_then_ask(plan, now)
            plan_check.check_idle(self, plan, now)
            if plan.wait_until is not None:
                self.clock.asleep_until(plan.wait_until)
            if self.loading:  # woken when a transfer lands
                t = self.kv.tiers.next_event()
                wake = self.clock.wake_at
                if t is not None and (wake is None or t < wake):
                    self.clock.asleep_until(t)
            return None
        try:
            duration = self.launch(plan, now)
        except preemption.NothingFits:  # idle, holding work: a transfer, a load or a finish elsewhere may wake it
            return None
        if duration is None:  # overflow evicted every request of the plan: ask the policy again
            return self._ask_and_launch(now)
        return duration

    def _preempt_then_ask(self, plan: BatchPlan, now: float) -> float | None:
        """A plan of preemptions alone, where prompts a prefill instance sent hold blocks no running request can
        take (on the decode side: in transfer or landed; on the prefill side: kept until the decode side reads them):
        a running request found no block, and the policy preempted it (vLLM v1 preempts then, and schedules what
        fits after). They run, and the policy is asked again."""
        self.groups.settle()
        stamp = self.counters.num_steps
        for r in plan.preempt:
            plan_check.check_preempt(self, r, stamp)
            preemption.preempt(self, r)
        for r in plan.preempt:
            r.mark = -1  # the next plan, a new decision, may list it
        self.running[:] = [r for r in self.running if r.status is RUNNING]
        # no swap-in where this point preempted (vLLM v0 swaps in only when nothing was preempted): a request just
        # swapped out would come straight back and be preempted again, for ever
        duration = self._ask_and_launch(now, False)
        if duration is not None:
            self.clock.carries(len(plan.preempt))  # the preemptions that made room for the step launched
        return duration

    def launch(self, plan: BatchPlan, now: float) -> float | None:
        """Check ``plan``, preempt, admit, swap in and allocate its KV; the step's duration (None when overflow
        eviction left nothing of the plan; ``NothingFits`` when it also freed nothing)."""
        groups = self.groups
        if groups.group is not None and not plan.decodes and not plan.preempt:
            return groups.launch_group(plan, now)  # the group decodes, or (prompt chunks only) waits a step
        plan_check.check_listed(self, plan)
        groups.listed_launch()
        stamp = self.counters.num_steps
        preempted = 0
        for r in plan.preempt:
            plan_check.check_preempt(self, r, stamp)
            preemption.preempt(self, r)
            preempted += 1
        if preempted:
            self.running[:] = [r for r in self.running if r.status is RUNNING]
        need, admit, swap_in, grow, batch, prefill_tokens, hits = plan_check.check_work(self, plan, stamp)
        kv = self.kv
        if need > kv.free:  # overflow eviction (plan_check raised under overflow "error")
            kept, evicted = preemption.evict_for(self, plan, need)
            if kept is None:
                if not (preempted or evicted):
                    raise preemption.NothingFits
                return None
            duration = self.launch(kept, now)
            self.clock.carries(preempted + evicted)  # the preemptions and evictions that made room for it
            return duration
        extra_time = 0.0
        load_time = 0.0
        cfg = self.config
        ordered = hits is not None and self.in_order  # admissions look up the cache in vLLM's order
        if hits is not None and not ordered:  # before any block is taken: the hits' cached blocks are the plan's
            if kv.tiers is not None:
                load_time = self.admit_tiered(hits, now)
            else:
                for r, hit in hits:
                    kv.admit(r, hit)
                    if r.first_scheduled != r.first_scheduled:  # first admission: the tokens it found cached
                        r.num_cached = len(hit) * kv.block_size
        for r in swap_in:
            self.swapped.remove(r)
            extra_time += kv.swap_in(r) * cfg.swap_seconds_per_block
            r.status = RUNNING
            self.append_running(r)
        if ordered:
            self.allocate_in_order(plan, grow, hits)
        landed = self.landed
        for r in admit:
            self.waiting.remove(r)
            if landed:
                landed.discard(r)
            r.status = RUNNING
            if r.first_scheduled != r.first_scheduled:  # NaN: first admission
                r.first_scheduled = now
            self.append_running(r)
        store_time = 0.0
        if self.caching and kv.tiers is not None:
            if kv.tiers.sync and plan.prefills:
                store_time = kv.tiers.sync_stores(plan.prefills)
            if not plan.prefills and not plan.decodes:  # the plan's work all became loads: ask again
                for r in plan.preempt:  # preempted: the next plan, with no step between, may list it
                    r.mark = -1
                return None
        if not ordered:
            if grow:
                kv.allocate_decodes(grow)
            if plan.prefills:
                kv.allocate_chunks(plan.prefills)
        clock = self.clock
        clock.launched(plan, (prefill_tokens, len(batch.prefill_new), len(batch.decode_ctx), batch.context_sum),
                       preempted)
        compute = self.batch_time.step_time(batch)
        if load_time or store_time:
            compute = kv.tiers.step_time(compute, load_time, store_time, kv.tiers.plan.layers)
        return self.duration(compute + extra_time + clock.pay(), now)

    def allocate_in_order(self, plan: BatchPlan, grow: list, hits: list) -> None:
        """The plan's KV with a prefix cache, in vLLM 0.32's order (``Scheduler.schedule``: the running loop's
        ``allocate_slots``, then the waiting loop's ``get_computed_blocks`` and ``allocate_slots`` request by
        request): the decodes' and running chunks' blocks first (a chunk caches its full blocks), then each
        admission of ``hits`` (``(plan index, request, cached blocks)``, sized so by ``plan_check.fit_hits_in_order``)
        references the blocks its lookup finds now and takes its chunk's. So an admission's new blocks evict
        (LRU) what a later one would have found, and a later one finds what an earlier chunk of the step cached."""
        kv = self.kv
        if grow:
            kv.allocate_decodes(grow)
        prefills = plan.prefills
        kv.allocate_chunks([p for p in prefills if p[0].status is not WAITING])
        bs = kv.block_size
        looked = {i: used for i, _, used in hits}
        for i, p in enumerate(prefills):
            r = p[0]
            if r.status is not WAITING:
                continue
            used = looked.get(i, 0)
            if used:
                hit = kv.lookup(r)
                if len(hit) < used:  # the plan was sized on a draft of this order (engine/cache_draft.py)
                    assert not self.config.check_invariants, (
                        f"request {r.id} finds {len(hit)} cached blocks at its admission, {used} planned")
                    used = len(hit)
                kv.admit(r, hit.prefix(used))
                if r.first_scheduled != r.first_scheduled:  # first admission: the tokens it found cached
                    r.num_cached = used * bs
            kv.allocate_chunks((p,))

    # --- KV tiers below the GPU (engine/kv_tiers.py) ------------------------------------------------------------
    def admit_tiered(self, hits: list, now: float) -> float:
        """The plan's admissions from their cached blocks, with the tiers: GPU hits referenced first (before any
        block is taken), then the tiers' blocks taken; vLLM's loads start (their requests wait in ``loading``),
        LMCache's load in this step. Returns the seconds this step waits for loads."""
        kv = self.kv
        tiers = kv.tiers
        for r, hit, th, _ in hits:
            kv.admit(r, hit)
        wait = 0.0
        for r, hit, th, load in hits:
            first = r.first_scheduled != r.first_scheduled
            if th is not None:
                kv.take_loaded(r, th.blocks)
            tiers.admitted(r, th, len(hit))
            if first and r.tier_cached is None:  # first admission (or load): the tokens it found cached
                r.num_cached = r.num_computed
                r.tier_cached = tuple(tiers.tier_tokens(th)) if th is not None else (0,) * len(tiers.stores)
            if th is None:
                continue
            if load:
                self.waiting.remove(r)
                self.loading.append(r)
                tiers.start_load(r, th, now)
            else:
                wait += tiers.sync_load(r, th)
        return wait

    def holds_loaded(self) -> bool:
        """Requests outside ``running`` hold blocks: loads in flight, or landed and waiting."""
        return bool(self.loading) or any(r.num_blocks for r in self.waiting)

    def release_loaded(self) -> bool:
        """Nothing runs or loads, and the policy admits nothing: the KV that waiting requests loaded holds the blocks
        the queue's head needs (vLLM would wait for ever). Every loaded request but the head lets its blocks go (they
        stay in the GPU prefix cache, so its admission finds them there); True if any did. On a decode instance the
        blocks behind the head may be prompts a prefill instance sent (``landed``), which have no other copy: then
        the head, if a tier loaded it, lets its own go instead and waits behind them, since each of them needs no
        new block to run."""
        waiting = self.waiting
        loaded = [r for r in waiting[1:] if r.num_blocks and r not in self.landed]  # (a prompt sent: kept)
        moved = None
        if not loaded and waiting and waiting[0].num_blocks and waiting[0] not in self.landed and any(
                r in self.landed for r in waiting):
            moved = waiting.pop(0)
            loaded = [moved]
        for r in loaded:
            self.kv.release(r)
            r.num_computed = 0
        if moved is not None:  # now holding nothing: behind the requests that hold KV, as remote_kv.front places it
            waiting.insert(remote_kv.front(waiting), moved)
        self.kv.tiers.released_loads += len(loaded)
        return bool(loaded)

    def preempt_only(self, plan: BatchPlan, now: float) -> float | None:
        """A plan that only preempts: the policy found no room even for its first running request (loads hold
        blocks outside ``running``, or a tier hit it counted on was not taken), and vLLM's scheduler preempts that
        request itself then. With KV tiers the preemptions happen and the policy is asked again."""
        self.settle()
        stamp = self.counters.num_steps
        for r in plan.preempt:
            plan_check.check_preempt(self, r, stamp)
            preemption.preempt(self, r)
            r.mark = -1
        self.running[:] = [r for r in self.running if r.status is RUNNING]
        return self._ask_and_launch(now)

    def land_loads(self, now: float) -> None:
        """Requests whose loads landed by ``now`` go back to the front of the queue, holding their blocks (vLLM:
        WAITING_FOR_REMOTE_KVS -> WAITING, their blocks cached)."""
        tiers = self.kv.tiers
        tiers.poll(now)
        if not tiers.ready:
            return
        back = []
        for r, _ in tiers.ready:
            self.loading.remove(r)
            self.kv.loaded(r)
            if r.status is Status.ABORTED:  # its client gave up during the load: the blocks go now (abort)
                self.kv.release(r)
                self.kv.discard(r)
                continue
            back.append(r)
        tiers.ready = []
        self.waiting[:0] = back
        self.version += 1

    def duration(self, duration: float, now: float) -> float:
        """A launched step's predicted ``duration`` (the swap charge paid in it) plus the wake-up cost after idle
        time."""
        last_end = self.clock.last_end
        if self.batch_time.wake is not None and now > last_end:
            duration += self.batch_time.wake.time(now - last_end, duration)
        if not duration > 0:
            raise ValueError(f"batch-time model {self.batch_time.name!r} returned {duration} s for a step")
        return duration

    def append_running(self, r: Request) -> None:
        r.order = self._order
        self._order += 1
        self.running.append(r)

    def end_step(self, now: float) -> None:
        """The running step completes at ``now``: emit tokens, finish requests, record."""
        clock = self.clock
        assert clock.busy, "end_step without a running step"
        self.version += 1
        plan = clock.plan
        clock.tick(now)
        groups = self.groups
        if groups.group_step:
            groups.end_group_step(now)
        else:
            self._end_listed_step(plan, now)
            groups.listed_step_ended()
        clock.idle()
        assert self.kv.free >= 0 and len(self.running) <= self.config.max_num_seqs
        if self.config.check_invariants:
            self.check()
        self.scheduler.on_step_end(self.view, plan, now - clock.step_start)

    def _end_listed_step(self, plan: BatchPlan, now: float) -> None:
        finished = 0
        for r in plan.decodes:
            r.num_computed += 1
            g = r.num_generated = r.num_generated + 1
            r.token_times.append(now)
            r.last_token = now
            if g == r.output_len:
                r.status = FINISHED
                finished += 1
        for r, n in plan.prefills:
            if advance_chunk(r, n, now) == r.output_len:
                r.status = FINISHED
                finished += 1
        if finished:
            done = [r for r in self.running if r.status is FINISHED]
            kv = self.kv
            sent = self.sent if self.sends_kv else None
            for r in done:
                r.finish = now
                if sent is None:
                    kv.release(r)
                else:  # its blocks wait for the decode side to read them (``read_sent``)
                    sent[r.id] = r
            self.completed.extend(done)
            self.running[:] = [r for r in self.running if r.status is RUNNING]
        self.record_step(now)

    def record_step(self, now: float) -> None:
        clock = self.clock
        start = clock.step_start
        duration = now - start
        clock.ended(now)
        self.counters.step(duration)
        kv = self.kv
        new, prefills, decodes, context = clock.row
        self.add_row(self.index, start, duration, new, prefills, decodes, context,
                     kv.total - kv.free, kv.total, len(self.waiting), len(self.running), clock.step_preempted)
        if self.caching:
            if kv.step_hits:
                self.steps.add_hits(kv.step_hits)
                kv.step_hits = 0
            if kv.tiers is not None:
                kv.tiers.step_ended(clock.plan.prefills, now)

    def check(self) -> None:
        """Full accounting check: the decode group's totals, every running request running, and the KV manager's
        counts (kv_cache.py)."""
        g = self.groups.group
        if g is not None:
            g.check(self.running)
        for r in self.running:
            assert r.status is RUNNING, f"request {r.id} in running is {r.status.name}"
        for r in self.waiting:
            assert r.status is WAITING, f"request {r.id} in waiting is {r.status.name}"
        holders = self.running + list(self.sent.values())  # a finished prefill holds its KV as a running request
        if self.tiers is None:
            self.kv.check(holders, self.swapped, self.waiting, g, remote_kv.holding(self) if self.transferring or
                          self.waiting else ())
            return
        holding = [r for r in self.waiting if r.num_blocks and r not in self.landed]  # a tier loaded, not admitted
        for r in holding:
            assert r.num_computed and r.content is not None, f"waiting request {r.id} holds KV it did not load"
        for r in self.landed:
            assert r.status is WAITING and r.num_blocks, f"landed request {r.id} is not waiting with its prompt's KV"
        free = [r for r in self.waiting if not r.num_blocks] if holding or self.landed else self.waiting
        sent = list(self.transferring) + list(self.landed)  # a prefill instance's prompts: whole-prompt blocks
        self.kv.check(holders + self.loading + holding, self.swapped, free, g, sent)
        if self.caching and self.kv.tiers is not None:
            for store in self.kv.tiers.stores:
                store.check()

    def abort(self, req: Request, reason: str, now: float) -> None:
        """``req``'s client gave up: between steps, as vLLM's engine core reads an abort with its inputs, the
        request leaves with its KV freed (vLLM's ``finish_requests(..., ABORTED)``), ``completed`` with ABORTED.
        A request whose KV is still arriving (a tier's load, a prefill instance's transfer) keeps its blocks until
        the load lands (``finish_requests`` delays the free of a ``WAITING_FOR_REMOTE_KVS`` request), then lets
        them go (``land_loads``, ``remote_kv.loaded``)."""
        assert not self.busy, "abort while a step is running: abort between steps"
        self.version += 1
        self.clock.tick(now)
        self.settle()
        kv = self.kv
        if req.status is RUNNING:
            kv.release(req)
            self.running.remove(req)
        elif req.status is Status.SWAPPED:
            kv.drop_swapped(req)
            self.swapped.remove(req)
        elif req in self.loading or req in self.transferring:
            pass  # its blocks wait for the load to land
        elif req in self.receiving:  # no block reserved yet
            self.receiving.remove(req)
        else:
            self.waiting.remove(req)
            self.landed.discard(req)
            if req.num_blocks:  # KV a tier loaded, or a prefill instance sent, while it waited
                kv.release(req)
            if self.caching:
                kv.discard(req)
        req.status = Status.ABORTED
        req.reject_reason = reason
        req.finish = self.now
        self.completed.append(req)

    def settle(self) -> None:
        """Every running request's fields exact: the decode group, if formed, dissolved (``GroupSteps.settle``)."""
        self.groups.settle()

    def stop(self, reason: str, status: Status = REJECTED, at: float | None = None) -> list[Request]:
        """End the run here (at ``at``, default the last event's time): every request still queued or in flight
        leaves with ``status``."""
        self.version += 1
        if at is not None:
            self.clock.tick(at)
        self.groups.settle()
        kv = self.kv
        for r in self.running:
            kv.release(r)
        for r in self.swapped:
            kv.drop_swapped(r)
        for r in self.sent.values():  # finished prefills whose KV no decode instance read
            kv.release(r)
        self.sent.clear()
        for r in self.loading + self.waiting:
            if r.num_blocks:  # a load in flight or landed, or a prompt's KV a prefill instance sent
                kv.release(r)
        left = self.waiting + self.running + self.swapped + self.loading
        if self.receiving or self.transferring:  # prompts a prefill instance sends: their blocks freed
            left += remote_kv.stop(self)
        left = [r for r in left if r.status is not Status.ABORTED]  # (one waiting for its load left at its abort)
        self.loading = []
        for r in left:
            r.status = status
            r.reject_reason = reason
            r.finish = self.clock.now
        self.waiting.clear()
        self.landed.clear()
        self.running.clear()
        self.swapped.clear()
        return left

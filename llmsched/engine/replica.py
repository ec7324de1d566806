"""One serving replica: the mechanism a scheduler's plans run on.

A step is ``start_step(now)`` (ask the policy, validate the plan against the hard
limits, preempt, admit, allocate KV, predict the duration) then ``end_step(now)``
(tokens appear, finished requests free their KV). The policy never mutates state.
"""
from __future__ import annotations

import math
from array import array
from collections import deque
from dataclasses import dataclass
from operator import attrgetter

from ..batchtime.base import Batch, BatchTimeModel
from ..metrics.steps import StepLog
from ..request import Request, Status
from .blocks import BlockManager, SwapSpace
from .decode_group import TRIM_AT, DecodeGroup
from .decode_run import fast_forward_decodes, fast_forward_group
from .errors import PlanError
from .limits import (BLOCK_SIZE, CHECK_INVARIANTS, FAST_FORWARD, MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS,
                     ORACLE, OVERFLOW, OVERFLOW_MODES, PREEMPTION_MODE, PREEMPTION_MODES)
from .plan import BatchPlan
from .policy import Policy
from .view import ReplicaView

WAITING, RUNNING, SWAPPED = Status.WAITING, Status.RUNNING, Status.SWAPPED
ORDER = attrgetter("order")
FINISHED, REJECTED = Status.FINISHED, Status.REJECTED


@dataclass
class ReplicaConfig:
    """Hard limits of a replica, named as in vLLM; defaults, ranges and help declared once in limits.py."""

    num_blocks: int
    block_size: int = BLOCK_SIZE.field()
    max_num_seqs: int = MAX_NUM_SEQS.field()
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS.field()
    max_model_len: int = MAX_MODEL_LEN.field()
    preemption_mode: str = PREEMPTION_MODE.field()
    swap_blocks: int = 0
    swap_seconds_per_block: float = 0.0  # host<->GPU transfer time of one block
    oracle: bool = ORACLE.field()  # schedulers may read true output lengths
    overflow: str = OVERFLOW.field()
    # a request evicted when it has been preempted or evicted this many times is rejected: under a policy that
    # admits beyond the cache, overflow evictions can cycle for ever (seed 003 §2's "vicious cycle", Example 1)
    max_evictions: int = 1000
    check_invariants: bool = CHECK_INVARIANTS.field()  # full KV accounting check after every step (tests)
    # advance runs of identical decode-only steps in one go when the policy declares steady_decodes (same results
    # as stepping; False steps every time, for the identity check)
    fast_forward: bool = FAST_FORWARD.field()

    def __post_init__(self):
        for name in ("num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
                     "max_evictions"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"replica config {name} must be a positive integer, got {v!r}")
        if self.preemption_mode not in PREEMPTION_MODES:
            raise ValueError(f"preemption_mode must be 'recompute' or 'swap', got {self.preemption_mode!r}")
        if self.overflow not in OVERFLOW_MODES:
            raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_MODES)}, got {self.overflow!r}")
        if self.swap_blocks < 0 or self.swap_seconds_per_block < 0:
            raise ValueError("swap_blocks and swap_seconds_per_block must be >= 0")


def advance_chunk(r: Request, n: int, now: float) -> int:
    """Write a prompt chunk of ``n`` tokens that ended at ``now`` into ``r``: its generated count when the chunk
    completed the prompt (the token it sampled included), else 0."""
    c = r.num_computed + n
    r.num_computed = c
    if c != r.prompt_len + r.num_generated:
        return 0
    g = r.num_generated = r.num_generated + 1
    if g == 1:
        r.first_token = now
    r.token_times.append(now)
    r.last_token = now
    return g


class Replica:
    def __init__(self, index: int, scheduler: Policy, batch_time: BatchTimeModel,
                 config: ReplicaConfig, steps: StepLog | None = None):
        if scheduler.needs_oracle and not config.oracle:
            raise ValueError(f"scheduler {scheduler.name!r} decides from true output lengths: "
                             f"run it with the oracle option (--oracle, oracle = true)")
        if scheduler.recompute_only and config.preemption_mode == "swap":
            raise ValueError(f"scheduler {scheduler.name!r} preempts by recomputation only: run it with "
                             f"preemption_mode 'recompute' (--preemption-mode recompute)")
        self.index = index
        self.scheduler = scheduler
        self.batch_time = batch_time
        self.config = config
        self.kv = BlockManager(config.num_blocks, config.block_size)
        self.swap = SwapSpace(config.swap_blocks)
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.swapped: list[Request] = []
        self.completed: list[Request] = []  # finished or rejected since the caller last drained it
        self.log_steps_to(steps if steps is not None else StepLog())
        self.view = ReplicaView(self)
        self.now = 0.0
        self.busy = False
        self.num_steps = 0
        self.busy_time = 0.0
        self.recent_steps: deque = deque(maxlen=64)
        self.num_preemptions = 0
        self.swap_fallbacks = 0
        self.num_evictions = 0
        self._plan: BatchPlan | None = None
        self._swap_time = 0.0  # host->GPU transfers done before the policy decided, charged to the next step
        self._step_start = 0.0
        self._last_end = 0.0  # end of the previous step (the clock origin before any): the idle time before a step
        self._step_preempted = 0
        self.max_blocks = min(config.num_blocks, self.kv.blocks_for(config.max_model_len))
        self.step_end = math.nan  # when the step in flight ends
        self._folds = (config.fast_forward and getattr(scheduler, "steady_decodes", False)
                       and batch_time.decode_sum_only)
        self._folds_finishes = self._folds and getattr(scheduler, "steady_after_finishes", False)
        self.quiet_finishes = False  # set by the simulator: a finishing request adds no event (open loop)
        # event-driven decode accounting (engine/decode_group.py), for policies that plan from the group
        self.group: DecodeGroup | None = None
        self._groups = self._folds and getattr(scheduler, "plans_decode_group", False)
        self._order = 0  # next running position
        self._row = (0, 0, 0, 0)  # the step in flight's prefill tokens, prefills, decodes, context sum
        self._formed_at = 0  # num_steps when the group formed
        self._form_wait = 0  # steps to wait before forming it again (settled soon after forming: back off)
        self._backoff = 1
        self._arrivals = 0  # requests added so far
        self._asked_at = 0  # _arrivals when the policy was last asked
        self._steady = False  # the step that just ended decoded the whole group and nothing else
        self._group_step = False  # the step in flight was launched with the group formed (and ends through it)
        self._repeat_plan = BatchPlan(decode_group=True)  # the plan of a repeated step (read, never changed)
        self.version = 0  # counts the calls that may change the replica's state: equal values, same state

    def log_steps_to(self, steps: StepLog) -> None:
        """Record the steps that end from now on into ``steps`` (the run's shared log, or a lane's own)."""
        self.steps = steps
        self._add_row = steps.add

    # --- arrivals ---------------------------------------------------------
    def add(self, req: Request, now: float) -> bool:
        """Queue an arrival, or reject it when it can never be served. True if queued."""
        self.version += 1
        self.now = now
        self._arrivals += 1
        req.replica = self.index
        total = req.prompt_len + req.output_len
        if total > self.config.max_model_len:
            return self._reject(req, f"prompt {req.prompt_len} + output {req.output_len} tokens exceed "
                                     f"max_model_len {self.config.max_model_len}")
        need = self.kv.blocks_for(req.max_kv_tokens)
        if need > self.kv.total:
            return self._reject(req, f"needs {need} KV blocks at its longest, the cache holds "
                                     f"{self.kv.total}: it can never be served here")
        reason = self.scheduler.unservable(req, self.view) or self.scheduler.on_arrival(req, self.view)
        if reason:
            return self._reject(req, f"{self.scheduler.name}: {reason}")
        req.status = WAITING
        self.waiting.append(req)
        return True

    def _reject(self, req: Request, reason: str) -> bool:
        req.status = REJECTED
        req.reject_reason = reason
        req.finish = self.now
        self.completed.append(req)
        return False

    @property
    def num_outstanding(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped)

    # --- a step -----------------------------------------------------------
    def start_step(self, now: float, until: float | None = None, horizon: float | None = None) -> float | None:
        """Ask the policy and launch its plan (or, when the step that just ended will repeat, launch it again
        without asking: ``_repeats``). Returns the step duration, or None if idle
        (then ``wake_at`` says when to ask again, None meaning at the next arrival); the step ends at ``step_end``.

        ``until`` (the simulator's next event) allows fast-forwarding: steps that would start before ``until`` and
        by ``horizon``, and would repeat this plan, are run at once; then the last of them is the step in flight.
        With ``quiet_finishes`` set (by the simulator, for a source whose completions add no event) the run may
        fold past finishes for a policy that declares ``steady_after_finishes``; those requests are in
        ``completed``."""
        assert not self.busy, "start_step while a step is running"
        self.version += 1
        self.now = now
        self.wake_at = None
        if self._steady and until is not None and self._repeats(now):
            duration = self._relaunch_group(now)
        else:
            duration = self._ask_and_launch(now)
            if duration is None:
                return None
        self.busy = True
        self._step_start = now
        self.step_end = now + duration
        launched = self._plan
        if (until is not None and self._folds and self.step_end < until and not launched.prefills
                and not self._step_preempted and not self.waiting and not self.swapped):
            # end_step checks the state it leaves
            through = self.quiet_finishes and self._folds_finishes
            if launched.decode_group:
                if not self.group.partials:
                    duration = fast_forward_group(self, until, horizon, through)
            elif len(launched.decodes) == len(self.running):
                duration = fast_forward_decodes(self, until, horizon, through)
        return duration

    def end_and_repeat(self, now: float) -> bool:
        """``end_step(now)`` then ``start_step(now)`` in one go for the commonest step of a busy replica: one that
        decoded the whole group and nothing else, finishes no one, and will be repeated (``_repeats``). False
        (nothing done) for any other step. Same state, row and duration as the two calls; the caller folds the
        steps that follow (``fold``) when the new one ends before its next event, as ``start_step`` would."""
        g = self.group
        plan = self._plan
        if not (self._group_step and plan.decode_group) or plan.prefills:
            return False
        nxt = g.clock + 1
        kv = self.kv
        need = g.hist[-nxt % g.block_size]
        if (nxt in g.finish_at or g.partials or self.waiting or self.swapped or self._asked_at != self._arrivals
                or need > kv.free):
            return False
        assert self.busy and len(self.running) == g.size
        self.version += 1
        # end_step: the group decodes, nobody finishes (g.step and _record_step written out: the hot path of a
        # multi-replica run, 5-9% of its CPU as calls; tests compare it with stepping)
        g.ends.append(now)
        g.clock = nxt
        n = g.size
        g.context_sum += n
        if len(g.ends) >= 2 * TRIM_AT:
            g.trim()
        duration = now - self._step_start
        self.now = self._last_end = now
        self._steady = True
        self.num_steps += 1
        self.busy_time += duration
        self.recent_steps.append(duration)
        self._add_row(self.index, self._step_start, duration, 0, 0, n, self._row[3], kv.total - kv.free, kv.total,
                      0, n, 0)
        if self.config.check_invariants:
            self.check()
        self.wake_at = None  # start_step: the same plan again
        self._step_start = now
        self.step_end = now + self._relaunch_group(now)
        return True

    def fold(self, until: float, horizon: float | None) -> None:
        """After ``end_and_repeat``: the steps that would repeat and end before ``until`` (and by ``horizon``) run
        at once, as ``start_step`` fast-forwards; the last of them is the step in flight."""
        self.version += 1
        fast_forward_group(self, until, horizon, self.quiet_finishes and self._folds_finishes)

    def _ask_and_launch(self, now: float) -> float | None:
        """The policy's plan, launched; None when it has no work (``wake_at`` set if it asked to be woken)."""
        if self.swapped:
            self.settle()
            self._swap_in()
        plan = self.scheduler.schedule(self.view)
        self._asked_at = self._arrivals
        if plan.reject:
            self._apply_rejects(plan.reject)
        if not plan.has_work:
            if plan.preempt:
                self._fail("preempt requires work in the same plan", "plan.preempt without decodes or prefills")
            if plan.wait_until is not None:
                if not plan.wait_until > now:
                    self._fail("wait_until must lie in the future",
                               f"wait_until={plan.wait_until} at now={now}")
                self.wake_at = plan.wait_until
            return None
        duration = self._launch(plan, now)
        if duration is None:  # overflow evicted every request of the plan: ask the policy again
            return self._ask_and_launch(now)
        return duration

    def _swap_in(self) -> None:
        """Swapped requests return before the policy decides, oldest first, while their blocks fit beside the
        next token of every running decode and a seat is free (vLLM v0 serves swapped before waiting). Swap-in
        is the mechanism's, so no policy can strand a swapped request; a policy sees it as running."""
        kv, bs = self.kv, self.kv.block_size
        free = kv.free - sum(1 for r in self.running if r.is_decode and r.num_computed + 1 > r.num_blocks * bs)
        while self.swapped and len(self.running) < self.config.max_num_seqs:
            r = self.swapped[0]
            need = r.num_blocks + max(0, -(-(r.num_computed + 1) // bs) - r.num_blocks)
            if need > free:
                break
            free -= need
            del self.swapped[0]
            self.swap.free += r.num_blocks
            kv.free -= r.num_blocks
            self._swap_time += r.num_blocks * self.config.swap_seconds_per_block
            r.status = RUNNING
            self._append_running(r)

    def _repeats(self, now: float) -> bool:
        """True when the policy would plan the group's decodes again (its ``steady_decodes`` declaration): the
        step that just ended at ``now`` decoded the whole group and nothing else, nothing arrived since the policy
        was asked, nothing waits and every decode finds its block."""
        g = self.group
        return (g is not None and g.size > 0 and not g.partials and not self.waiting and not self.swapped
                and self._asked_at == self._arrivals and now == self._last_end and g.blocks_needed <= self.kv.free)

    def _relaunch_group(self, now: float) -> float:
        """``_launch_group`` of the plan that decodes the group alone, which the step that just ended ran: its
        limits held then and hold now (no more members, no more tokens; ``_repeats`` checked the blocks)."""
        g = self.group
        self.kv.free -= g.blocks_needed
        self._step_preempted = 0
        self._plan = self._repeat_plan
        self._group_step = True
        n, decode_sum = g.size, g.context_sum
        self._row = (0, 0, n, decode_sum)
        # decode_sum_time: sum_step_time of no prefills, the same float
        return self._duration(self.batch_time.decode_sum_time(n, decode_sum) + 0.0 + self._swap_time, now)

    def _append_running(self, r: Request) -> None:
        r.order = self._order
        self._order += 1
        self.running.append(r)

    # --- the decode group ---------------------------------------------------
    def settle(self) -> None:
        """Dissolve the decode group: every member's fields exact again (a step in flight then ends as a plan that
        lists its decodes). The replica forms a new group after a later step."""
        g = self.group
        if g is None:
            return
        members = [r for r in self.running if r.lag >= 0]
        g.dissolve()
        self.group = None
        if self.busy and self._group_step:  # the step in flight ends as a listed plan
            self._group_step = False
            if self._plan.decode_group:  # the members' blocks for it were taken at launch
                bs = self.kv.block_size
                for r in members:
                    want = -(-(r.num_computed + 1) // bs)
                    if want > r.num_blocks:
                        r.num_blocks = want
                self._plan = BatchPlan(decodes=members, prefills=self._plan.prefills)
        self._backoff = min(64, 2 * self._backoff) if self.num_steps - self._formed_at < 8 else 1
        self._form_wait = self._backoff

    def _form_group(self) -> None:
        g = DecodeGroup(self.kv.block_size)
        for r in self.running:
            if r.num_generated and r.num_computed + 1 == r.prompt_len + r.num_generated:
                g.join(r)
            else:
                g.partials.append(r)
        self.group = g
        self._formed_at = self.num_steps

    def _fail(self, limit: str, detail: str):
        raise PlanError(f"scheduler {self.scheduler.name!r} on replica {self.index}: {limit} ({detail})")

    def _apply_rejects(self, rejects):
        for req, reason in rejects:
            if req.status is not WAITING or req.replica != self.index:
                self._fail("only waiting requests can be rejected", f"request {req.id} is {req.status.name}")
            self.waiting.remove(req)
            self._reject(req, f"{self.scheduler.name}: {reason}")

    def _launch(self, plan: BatchPlan, now: float) -> float:
        if self.group is not None and not plan.decodes and not plan.preempt:
            return self._launch_group(plan, now)  # the group decodes, or (prompt chunks only) waits a step
        if plan.decode_group:
            self._fail("decode_group needs the view's decode group and no decodes or preemptions listed",
                       "group formed" if self.group is not None else "no group formed")
        self._group_step = False
        if self.group is not None:
            self.settle()
        stamp = self.num_steps
        kv = self.kv
        bs = kv.block_size
        index = self.index
        preempted = 0
        for r in plan.preempt:
            if r.status is not RUNNING or r.replica != index:
                self._fail("only running requests can be preempted", f"request {r.id} is {r.status.name}")
            if r.mark == stamp:
                self._fail("a request may appear once per plan", f"request {r.id} listed twice")
            r.mark = stamp
            self._preempt(r)
            preempted += 1
        if preempted:
            self.running[:] = [r for r in self.running if r.status is RUNNING]

        need = 0
        swap_in: list[Request] = []
        grow: list[Request] = []  # requests that cross into a new block this step
        decode_ctx = []
        append_ctx = decode_ctx.append
        for r in plan.decodes:
            if r.status is not RUNNING:
                if r.status is not SWAPPED or r.replica != index:
                    self._fail("decodes must be running requests", f"request {r.id} is {r.status.name}")
                swap_in.append(r)
                need += r.num_blocks
            if r.mark == stamp:
                self._fail("a request may appear once per plan", f"request {r.id} listed twice or preempted")
            r.mark = stamp
            ctx = r.num_computed + 1
            g = r.num_generated
            if ctx != r.prompt_len + g or not g:
                self._fail("a decode needs a request whose prompt is done and one token pending",
                           f"request {r.id}: computed {r.num_computed} of {r.num_tokens} tokens")
            append_ctx(ctx)
            held = r.num_blocks
            if ctx > held * bs:
                need += -(-ctx // bs) - held
                grow.append(r)

        admit: list[Request] = []
        prefill_new = []
        prefill_ctx = []
        prefill_tokens = 0
        for r, n in plan.prefills:
            st = r.status
            if r.replica != index or st is not RUNNING:
                if st is WAITING and r.replica == index:
                    admit.append(r)
                elif st is SWAPPED and r.replica == index:
                    swap_in.append(r)
                    need += r.num_blocks
                else:
                    self._fail("prefills must be waiting, running or swapped requests of this replica",
                               f"request {r.id} is {st.name}")
            if r.mark == stamp:
                self._fail("a request may appear once per plan", f"request {r.id} listed twice or preempted")
            r.mark = stamp
            remaining = r.prompt_len + r.num_generated - r.num_computed
            if not (isinstance(n, int) and 1 <= n <= remaining):
                self._fail("a prefill chunk must be between 1 and the request's remaining tokens",
                           f"request {r.id}: chunk {n!r}, {remaining} remaining")
            prefill_new.append(n)
            prefill_ctx.append(r.num_computed)
            prefill_tokens += n
            extra = -(-(r.num_computed + n) // bs) - r.num_blocks
            if extra > 0:
                need += extra

        tokens = prefill_tokens + len(decode_ctx)
        cfg = self.config
        if tokens > cfg.max_num_batched_tokens:
            self._fail("max_num_batched_tokens exceeded", f"{tokens} > {cfg.max_num_batched_tokens}")
        seqs = len(self.running) + len(admit) + len(swap_in)
        if seqs > cfg.max_num_seqs:
            self._fail("max_num_seqs exceeded", f"{seqs} running > {cfg.max_num_seqs}")
        if need > kv.free:
            if cfg.overflow == "error":
                self._fail("KV cache capacity exceeded (preempt first)",
                           f"plan needs {need} more blocks, {kv.free} free")
            return self._evict_and_launch(plan, need, now, preempted)

        extra_time = 0.0
        for r in swap_in:
            self.swapped.remove(r)
            self.swap.free += r.num_blocks
            kv.free -= r.num_blocks
            extra_time += r.num_blocks * cfg.swap_seconds_per_block
            r.status = RUNNING
            self._append_running(r)
        for r in admit:
            self.waiting.remove(r)
            r.status = RUNNING
            if r.first_scheduled != r.first_scheduled:  # NaN: first admission
                r.first_scheduled = now
            self._append_running(r)
        kv.free -= need - sum(r.num_blocks for r in swap_in)
        for r in grow:
            r.num_blocks = -(-(r.num_computed + 1) // bs)
        for r, n in plan.prefills:
            want = -(-(r.num_computed + n) // bs)
            if want > r.num_blocks:
                r.num_blocks = want

        self._step_preempted = preempted
        self._plan = plan
        batch = Batch(prefill_new, prefill_ctx, decode_ctx)
        self._row = (prefill_tokens, len(prefill_new), len(decode_ctx), batch.context_sum)
        return self._duration(self.batch_time.step_time(batch) + extra_time + self._swap_time, now)

    def _duration(self, duration: float, now: float) -> float:
        self._swap_time = 0.0
        if self.batch_time.wake is not None and now > self._last_end:
            duration += self.batch_time.wake.time(now - self._last_end, duration)
        if not duration > 0:
            raise ValueError(f"batch-time model {self.batch_time.name!r} returned {duration} s for a step")
        return duration

    def _launch_group(self, plan: BatchPlan, now: float) -> float:
        """``_launch`` with the group formed, for a plan that decodes the whole group or none of it, plus prompt
        chunks: the members need no per-request work. Anything beyond the common case (a swapped request, a broken
        limit, KV short) goes through ``_launch`` with the members listed, which raises or evicts exactly as for
        such a plan."""
        g = self.group
        stamp = self.num_steps
        kv = self.kv
        bs = kv.block_size
        index = self.index
        decoding = plan.decode_group
        decodes = g.size if decoding else 0
        need = g.blocks_needed if decoding else 0
        admit: list[Request] = []
        prefill_new = []
        prefill_ctx = []
        prefill_tokens = context = 0
        ok = True
        for r, n in plan.prefills:
            st = r.status
            if r.replica != index or r.lag >= 0 or r.mark == stamp or (st is not RUNNING and st is not WAITING):
                ok = False
                break
            c = r.num_computed
            if not (isinstance(n, int) and 1 <= n <= r.prompt_len + r.num_generated - c):
                ok = False
                break
            r.mark = stamp
            if st is WAITING:
                admit.append(r)
            prefill_new.append(n)
            prefill_ctx.append(c)
            prefill_tokens += n
            context += c + n
            extra = -(-(c + n) // bs) - r.num_blocks
            if extra > 0:
                need += extra
        cfg = self.config
        if (not ok or prefill_tokens + decodes > cfg.max_num_batched_tokens or need > kv.free
                or len(self.running) + len(admit) > cfg.max_num_seqs):
            for r, _ in plan.prefills:
                if r.mark == stamp:
                    r.mark = -1
            members = [r for r in self.running if r.lag >= 0] if decoding else []
            self.settle()
            return self._launch(BatchPlan(decodes=members, prefills=plan.prefills), now)
        partials = g.partials
        for r in admit:
            self.waiting.remove(r)
            r.status = RUNNING
            if r.first_scheduled != r.first_scheduled:  # NaN: first admission
                r.first_scheduled = now
            self._append_running(r)
            partials.append(r)
        kv.free -= need
        for r, n in plan.prefills:
            want = -(-(r.num_computed + n) // bs)
            if want > r.num_blocks:
                r.num_blocks = want
        self._step_preempted = 0
        self._plan = plan
        self._group_step = True
        decode_sum = g.context_sum if decoding else 0
        self._row = (prefill_tokens, len(prefill_new), decodes, decode_sum + context)
        return self._duration(self.batch_time.sum_step_time(prefill_new, prefill_ctx, decodes, decode_sum)
                              + 0.0 + self._swap_time, now)

    def _evict_and_launch(self, plan: BatchPlan, need: int, now: float, preempted: int) -> float | None:
        """Seed 003 §1.4: evict running requests, most recently admitted first, until the plan's new
        blocks fit; the plan runs without the victims (None if nothing of it is left)."""
        kv = self.kv
        bs = kv.block_size
        grows = {}
        for r in plan.decodes:
            if r.status is RUNNING:
                grows[r] = max(0, -(-(r.num_computed + 1) // bs) - r.num_blocks)
        for r, n in plan.prefills:
            if r.status is RUNNING:
                grows[r] = max(0, -(-(r.num_computed + n) // bs) - r.num_blocks)
        victims = set()
        for r in reversed(self.running):
            if need <= kv.free:
                break
            need -= grows.get(r, 0)
            self._evict(r)
            victims.add(r)
        self.running[:] = [r for r in self.running if r.status is RUNNING]
        for r in plan.decodes:
            r.mark = -1
        for r, _ in plan.prefills:
            r.mark = -1
        kept = BatchPlan(decodes=[r for r in plan.decodes if r not in victims],
                         prefills=[(r, n) for r, n in plan.prefills if r not in victims])
        while need > kv.free:  # the plan's own admissions overflow: the newest stay waiting
            r, n = next((r, n) for r, n in reversed(kept.prefills) if r.status is WAITING)
            kept.prefills.remove((r, n))
            need -= -(-n // bs)
        if not kept.has_work:
            return None
        duration = self._launch(kept, now)
        self._step_preempted += preempted + len(victims)
        return duration

    def _evict(self, r: Request) -> None:
        self.num_evictions += 1
        self.num_preemptions += 1
        r.preemptions += 1
        self.kv.release(r)
        r.num_computed = 0
        r.status = WAITING
        if r.preemptions >= self.config.max_evictions:
            self._reject(r, f"preempted or evicted {r.preemptions} times, the last by KV overflow "
                            f"({self.config.overflow}): the policy admits more than the cache holds and evictions "
                            f"cycle (seed 003 §2, cascading eviction); use a policy that guards memory, more KV "
                            f"blocks or a higher max_evictions")
        elif self.config.overflow == "evict-newest":  # back to stage 0, re-queued as a new arrival
            r.num_generated = 0
            r.token_times = array("d")
            r.first_token = r.last_token = math.nan
            self.waiting.append(r)
        elif not self._reject_unservable(r):
            self.waiting.insert(0, r)

    def _preempt(self, r: Request) -> None:
        self.num_preemptions += 1
        r.preemptions += 1
        if self.config.preemption_mode == "swap":
            if r.num_blocks <= self.swap.free:
                n = r.num_blocks
                self.kv.free += n
                self.swap.free -= n
                r.status = SWAPPED
                self.swapped.append(r)
                return
            self.swap_fallbacks += 1  # no host space: recompute instead, counted
        self.kv.release(r)
        r.num_computed = 0
        r.status = WAITING
        if not self._reject_unservable(r):
            self.waiting.insert(0, r)

    def _reject_unservable(self, r: Request) -> bool:
        """After a recompute preemption the prefill is prompt + generated: reject ``r`` if its policy can never
        run that (as vLLM ignores a re-prefill over its limit). True if rejected."""
        reason = self.scheduler.unservable(r, self.view)
        if reason:
            self._reject(r, f"{self.scheduler.name}: preempted by recompute, then {reason}")
        return bool(reason)

    def end_step(self, now: float) -> None:
        """The running step completes at ``now``: emit tokens, finish requests, record."""
        assert self.busy, "end_step without a running step"
        self.version += 1
        plan = self._plan
        self.now = now
        if self._group_step:
            self._end_group_step(now)
        else:
            self._end_listed_step(plan, now)
            self._steady = False
            if self._groups and self.group is None:
                if self._form_wait:
                    self._form_wait -= 1
                else:
                    self._form_group()
        self.busy = False
        self._plan = None
        assert self.kv.free >= 0 and len(self.running) <= self.config.max_num_seqs
        if self.config.check_invariants:
            self.check()
        self.scheduler.on_step_end(self.view, plan, now - self._step_start)

    def _end_listed_step(self, plan: BatchPlan, now: float) -> None:
        finished = 0
        kv = self.kv
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
            for r in done:
                r.finish = now
                kv.free += r.num_blocks
                r.num_blocks = 0
            self.completed.extend(done)
            self.running[:] = [r for r in self.running if r.status is RUNNING]
        self._record_step(now)

    def _end_group_step(self, now: float) -> None:
        """``end_step`` for a step launched with the group formed: the members advance by the group's clock when
        the plan decoded them; only those finishing and the prompt chunks are touched."""
        g = self.group
        plan = self._plan
        done = g.step(now) if plan.decode_group else []
        for r in done:
            r.status = FINISHED
        for r, n in plan.prefills:
            gen = advance_chunk(r, n, now)
            if gen:  # the prompt is done
                g.partials.remove(r)
                if gen == r.output_len:
                    r.status = FINISHED
                    done.append(r)
                else:
                    g.join(r)
            elif r.num_generated and r.num_computed + 1 == r.prompt_len + r.num_generated:
                # a recompute one token short of its output so far: its next step is a decode (as _form_group
                # and every policy's own pass classify it), so it decodes with the group
                g.partials.remove(r)
                g.join(r)
        if done:
            if len(done) > 1:
                done.sort(key=ORDER)
            kv, running = self.kv, self.running
            for r in done:
                r.finish = now
                kv.free += r.num_blocks
                r.num_blocks = 0
                running.remove(r)
            self.completed.extend(done)
        self._steady = not plan.prefills and (not done or self._folds_finishes)
        self._record_step(now)

    def _record_step(self, now: float) -> None:
        duration = now - self._step_start
        self._last_end = now
        self.num_steps += 1
        self.busy_time += duration
        self.recent_steps.append(duration)
        kv = self.kv
        new, prefills, decodes, context = self._row
        self._add_row(self.index, self._step_start, duration, new, prefills, decodes, context,
                       kv.total - kv.free, kv.total, len(self.waiting), len(self.running), self._step_preempted)

    def check(self) -> None:
        """Full accounting check: every block is held by a running request or free (a member of the decode group
        holds the blocks of its exact context, written or not)."""
        g = self.group
        if g is not None:
            g.check(self.running)
        held = 0
        for r in self.running:
            assert r.status is RUNNING, f"request {r.id} in running is {r.status.name}"
            computed = g.exact(r)[0] if r.lag >= 0 else r.num_computed
            blocks = self.kv.blocks_for(computed) if r.lag >= 0 else r.num_blocks
            assert blocks == self.kv.blocks_for(computed), (
                f"request {r.id} holds {blocks} blocks for {computed} KV tokens")
            held += blocks
        assert held + self.kv.free == self.kv.total, (
            f"KV block leak: {held} held + {self.kv.free} free != {self.kv.total} total")
        assert sum(r.num_blocks for r in self.swapped) + self.swap.free == self.swap.total, "swap leak"
        for r in self.waiting:
            assert r.status is WAITING and r.num_blocks == 0 and r.num_computed == 0

    def stop(self, reason: str, status: Status = REJECTED) -> list[Request]:
        """End the run here: every request still queued or in flight leaves with ``status``."""
        self.version += 1
        self.settle()
        for r in self.running:
            self.kv.release(r)
        for r in self.swapped:
            self.swap.free += r.num_blocks
            r.num_blocks = 0
        left = self.waiting + self.running + self.swapped
        for r in left:
            r.status = status
            r.reject_reason = reason
            r.finish = self.now
        self.waiting.clear()
        self.running.clear()
        self.swapped.clear()
        return left

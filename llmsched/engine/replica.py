"""One serving replica: the mechanism a scheduler's plans run on.

A step is ``start_step(now)`` (ask the policy, check the plan against the hard limits, preempt, admit, allocate
KV, predict the duration) then ``end_step(now)`` (tokens appear, finished requests free their KV). The policy never
mutates state. The replica's concerns live beside it: the KV cache manager, the only writer of block state
(kv_cache.py); the plan check (plan_check.py); preemption, overflow eviction and swap-in (preemption.py); the
decode-group fast path, which ``Replica`` inherits (group_steps.py), and fast-forwarded decode runs
(decode_run.py).
"""
from __future__ import annotations

import math
from collections import deque

from ..batchtime.base import BatchTimeModel
from ..metrics.steps import StepLog
from ..request import Request, Status
from . import plan_check, preemption, remote_kv
from .config import ReplicaConfig
from .decode_run import fast_forward_decodes, fast_forward_group
from .group_steps import GroupSteps
from .kv_cache import KVCacheManager
from .plan import BatchPlan
from .prefix_cache import PrefixCachingKVManager
from .policy import Policy
from .tokens import advance_chunk
from .view import ReplicaView

__all__ = ["Replica", "ReplicaConfig"]

WAITING, RUNNING, FINISHED, REJECTED = Status.WAITING, Status.RUNNING, Status.FINISHED, Status.REJECTED


class Replica(GroupSteps):
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
        GroupSteps.__init__(self, self.folds and getattr(scheduler, "plans_decode_group", False))
        self.index = index
        self.scheduler = scheduler
        self.batch_time = batch_time
        self.config = config
        self.caching = config.prefix_caching  # vLLM v1's prefix cache (engine/prefix_cache.py)
        manager = PrefixCachingKVManager if self.caching else KVCacheManager
        self.kv = manager(config.num_blocks, config.block_size, config.swap_blocks)
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.swapped: list[Request] = []
        self.completed: list[Request] = []  # finished or rejected since the caller last drained it
        # requests whose prompt KV comes from a prefill instance (remote_kv.py): received and waiting for blocks,
        # in transfer, and those reserved since the caller last drained it (it starts their transfers)
        self.receiving: deque = deque()
        self.transferring: list[Request] = []
        self.reserved: list[Request] = []
        self.remote = 0  # received or in transfer
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
        self.plan: BatchPlan | None = None  # the step in flight's
        self.row = (0, 0, 0, 0)  # the step in flight's prefill tokens, prefills, decodes, context sum
        self.swap_time = 0.0  # host->GPU transfers done before the policy decided, charged to the next step
        self.step_start = 0.0
        self.step_end = math.nan  # when the step in flight ends
        self.last_end = 0.0  # end of the previous step (the clock origin before any): the idle time before a step
        self.step_preempted = 0
        self.quiet_finishes = False  # set by the simulator: a finishing request adds no event (open loop)
        self._order = 0  # next running position
        self.arrivals = 0  # requests added so far
        self.asked_at = 0  # arrivals when the policy was last asked
        self.version = 0  # counts the calls that may change the replica's state: equal values, same state

    def log_steps_to(self, steps: StepLog) -> None:
        """Record the steps that end from now on into ``steps`` (the run's shared log, or a lane's own)."""
        self.steps = steps
        self.add_row = steps.add
        if self.caching:
            steps.keep_hits()

    # --- arrivals ---------------------------------------------------------
    def add(self, req: Request, now: float) -> bool:
        """Queue an arrival, or reject it when it can never be served. True if queued."""
        self.version += 1
        self.now = now
        self.arrivals += 1
        req.replica = self.index
        total = req.prompt_len + req.output_len
        if total > self.config.max_model_len:
            return self.reject(req, f"prompt {req.prompt_len} + output {req.output_len} tokens exceed "
                                    f"max_model_len {self.config.max_model_len}")
        need = self.kv.blocks_for(req.max_kv_tokens)
        if need > self.kv.total:
            return self.reject(req, f"needs {need} KV blocks at its longest, the cache holds "
                                    f"{self.kv.total}: it can never be served here")
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
        if self.caching:
            self.kv.discard(req)
        req.finish = self.now
        self.completed.append(req)
        return False

    @property
    def num_outstanding(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped) + self.remote

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
        assert not self.busy, "start_step while a step is running"
        self.version += 1
        self.now = now
        self.wake_at = None
        if self.steady and until is not None and self.repeats(now):
            duration = self.relaunch_group(now)
        else:
            duration = self._ask_and_launch(now)
            if duration is None:
                return None
        self.busy = True
        self.step_start = now
        self.step_end = now + duration
        launched = self.plan
        if (until is not None and self.folds and self.step_end < until and not launched.prefills
                and not self.step_preempted and not self.waiting and not self.swapped and not self.receiving
                and not self.reserved):  # a transfer it just reserved for ends at an event the fold cannot see
            # end_step checks the state it leaves
            through = self.quiet_finishes and self.folds_finishes
            if launched.decode_group:
                if not self.group.partials:
                    duration = fast_forward_group(self, until, horizon, through)
            elif len(launched.decodes) == len(self.running):
                duration = fast_forward_decodes(self, until, horizon, through)
        return duration

    def _ask_and_launch(self, now: float) -> float | None:
        """The policy's plan, launched; None when it has no work (``wake_at`` set if it asked to be woken)."""
        if self.swapped:
            self.settle()
            preemption.swap_in(self)
        if self.receiving:
            remote_kv.reserve(self)
        plan = self.scheduler.schedule(self.view)
        self.asked_at = self.arrivals
        for req, reason in plan.reject:
            plan_check.check_reject(self, req)
            self.waiting.remove(req)
            self.reject(req, f"{self.scheduler.name}: {reason}")
        if not plan.has_work:
            if plan.preempt and (self.transferring or any(r.num_blocks for r in self.waiting)):
                return self._preempt_then_ask(plan, now)
            plan_check.check_idle(self, plan, now)
            if plan.wait_until is not None:
                self.wake_at = plan.wait_until
            return None
        duration = self.launch(plan, now)
        if duration is None:  # overflow evicted every request of the plan: ask the policy again
            return self._ask_and_launch(now)
        return duration

    def _preempt_then_ask(self, plan: BatchPlan, now: float) -> float | None:
        """A plan of preemptions alone, where prompts a prefill instance sent hold blocks no running request can
        take: a running request found no block, and the policy preempted it (vLLM v1 preempts then, and schedules
        what fits after). They run, and the policy is asked again."""
        if self.group is not None:
            self.settle()
        stamp = self.num_steps
        for r in plan.preempt:
            plan_check.check_preempt(self, r, stamp)
            preemption.preempt(self, r)
        for r in plan.preempt:
            r.mark = -1  # the next plan, a new decision, may list it
        self.running[:] = [r for r in self.running if r.status is RUNNING]
        duration = self._ask_and_launch(now)
        if duration is not None:
            self.step_preempted += len(plan.preempt)
        return duration

    def launch(self, plan: BatchPlan, now: float) -> float | None:
        """Check ``plan``, preempt, admit, swap in and allocate its KV; the step's duration (None when overflow
        eviction left nothing of the plan)."""
        if self.group is not None and not plan.decodes and not plan.preempt:
            return self.launch_group(plan, now)  # the group decodes, or (prompt chunks only) waits a step
        plan_check.check_listed(self, plan)
        self.group_step = False
        if self.group is not None:
            self.settle()
        stamp = self.num_steps
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
                return None
            duration = self.launch(kept, now)
            self.step_preempted += preempted + evicted
            return duration
        extra_time = 0.0
        cfg = self.config
        if hits is not None:  # before any block is taken: the hits' cached blocks are the plan's
            for r, hit in hits:
                kv.admit(r, hit)
                if r.first_scheduled != r.first_scheduled:  # first admission: the tokens it found cached
                    r.num_cached = len(hit) * kv.block_size
        for r in swap_in:
            self.swapped.remove(r)
            extra_time += kv.swap_in(r) * cfg.swap_seconds_per_block
            r.status = RUNNING
            self.append_running(r)
        for r in admit:
            self.waiting.remove(r)
            r.status = RUNNING
            if r.first_scheduled != r.first_scheduled:  # NaN: first admission
                r.first_scheduled = now
            self.append_running(r)
        if grow:
            kv.allocate_decodes(grow)
        if plan.prefills:
            kv.allocate_chunks(plan.prefills)
        self.step_preempted = preempted
        self.plan = plan
        self.row = (prefill_tokens, len(batch.prefill_new), len(batch.decode_ctx), batch.context_sum)
        return self.duration(self.batch_time.step_time(batch) + extra_time + self.swap_time, now)

    def duration(self, duration: float, now: float) -> float:
        """A launched step's predicted ``duration`` plus the wake-up cost after idle time; the swap charge paid."""
        self.swap_time = 0.0
        if self.batch_time.wake is not None and now > self.last_end:
            duration += self.batch_time.wake.time(now - self.last_end, duration)
        if not duration > 0:
            raise ValueError(f"batch-time model {self.batch_time.name!r} returned {duration} s for a step")
        return duration

    def append_running(self, r: Request) -> None:
        r.order = self._order
        self._order += 1
        self.running.append(r)

    def end_step(self, now: float) -> None:
        """The running step completes at ``now``: emit tokens, finish requests, record."""
        assert self.busy, "end_step without a running step"
        self.version += 1
        plan = self.plan
        self.now = now
        if self.group_step:
            self.end_group_step(now)
        else:
            self._end_listed_step(plan, now)
            self.listed_step_ended()
        self.busy = False
        self.plan = None
        assert self.kv.free >= 0 and len(self.running) <= self.config.max_num_seqs
        if self.config.check_invariants:
            self.check()
        self.scheduler.on_step_end(self.view, plan, now - self.step_start)

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
            for r in done:
                r.finish = now
                kv.release(r)
            self.completed.extend(done)
            self.running[:] = [r for r in self.running if r.status is RUNNING]
        self.record_step(now)

    def record_step(self, now: float) -> None:
        duration = now - self.step_start
        self.last_end = now
        self.num_steps += 1
        self.busy_time += duration
        self.recent_steps.append(duration)
        kv = self.kv
        new, prefills, decodes, context = self.row
        self.add_row(self.index, self.step_start, duration, new, prefills, decodes, context,
                     kv.total - kv.free, kv.total, len(self.waiting), len(self.running), self.step_preempted)
        if self.caching and kv.step_hits:
            self.steps.add_hits(kv.step_hits)
            kv.step_hits = 0

    def check(self) -> None:
        """Full accounting check: the decode group's totals, every running request running, and the KV manager's
        counts (kv_cache.py)."""
        g = self.group
        if g is not None:
            g.check(self.running)
        for r in self.running:
            assert r.status is RUNNING, f"request {r.id} in running is {r.status.name}"
        for r in self.waiting:
            assert r.status is WAITING, f"request {r.id} in waiting is {r.status.name}"
        self.kv.check(self.running, self.swapped, self.waiting, g, remote_kv.holding(self) if self.remote or
                      self.waiting else ())

    def abort(self, req: Request, reason: str, now: float) -> None:
        """``req``'s client gave up: between steps, as vLLM's engine core reads an abort with its inputs, the
        request leaves with its KV freed (vLLM's ``finish_requests(..., ABORTED)``), ``completed`` with ABORTED."""
        assert not self.busy, "abort while a step is running: abort between steps"
        self.version += 1
        self.now = now
        self.settle()
        kv = self.kv
        if req.status is RUNNING:
            kv.release(req)
            self.running.remove(req)
        elif req.status is Status.SWAPPED:
            kv.drop_swapped(req)
            self.swapped.remove(req)
        else:
            self.waiting.remove(req)
            if req.num_blocks:  # its prompt KV loaded from a prefill instance
                kv.release(req)
            elif self.caching:
                kv.discard(req)
        req.status = Status.ABORTED
        req.reject_reason = reason
        req.finish = self.now
        self.completed.append(req)

    def stop(self, reason: str, status: Status = REJECTED) -> list[Request]:
        """End the run here: every request still queued or in flight leaves with ``status``."""
        self.version += 1
        self.settle()
        kv = self.kv
        for r in self.running:
            kv.release(r)
        for r in self.swapped:
            kv.drop_swapped(r)
        for r in self.waiting:
            if r.num_blocks:  # its prompt KV loaded from a prefill instance
                kv.release(r)
        left = self.waiting + self.running + self.swapped + (remote_kv.stop(self) if self.remote else [])
        for r in left:
            r.status = status
            r.reject_reason = reason
            r.finish = self.now
        self.waiting.clear()
        self.running.clear()
        self.swapped.clear()
        return left

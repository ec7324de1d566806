"""The decode-group path: a replica's steps launched, ended and repeated with its running requests in decode
phase advanced as one group (engine/decode_group.py), so that a step costs no per-request work.

While the group is formed, a plan that decodes the whole group (or none of it) plus prompt chunks launches here
without touching the members; a step that decoded the group alone and will be planned again (the policy's
``steady_decodes``) ends and starts again in one call; anything else settles the group first (every member's
fields exact again) and runs as a plan that lists its decodes. ``GroupSteps`` is a component of the replica
(``Replica.groups``): it owns the group and when to form it again; it moves the replica's time through its
``StepClock`` and counts steps in its ``StepCounters``, and calls back the replica's ``launch``, ``record_step``,
``duration``, ``append_running`` and ``check``.
"""
from __future__ import annotations

from operator import attrgetter

from ..request import Request, Status
from .decode_group import TRIM_AT, DecodeGroup
from .decode_run import fast_forward_group
from .plan import BatchPlan
from .remote_kv import reserve, to_reserve
from .tokens import advance_chunk

WAITING, RUNNING, FINISHED = Status.WAITING, Status.RUNNING, Status.FINISHED
ORDER = attrgetter("order")


class GroupSteps:
    """The decode group of a replica (``rep``) and the steps launched, ended and repeated through it."""

    __slots__ = ("rep", "group", "steady", "group_step", "forms", "formed_at", "form_wait", "backoff",
                 "repeat_plan")

    def __init__(self, rep, forms: bool):
        self.rep = rep
        self.group: DecodeGroup | None = None
        self.steady = False  # the step that just ended decoded the whole group and nothing else
        self.group_step = False  # the step in flight was launched with the group formed (and ends through it)
        self.forms = forms  # the policy plans from the group: form one after listed steps
        self.formed_at = 0  # num_steps when the group formed
        self.form_wait = 0  # steps to wait before forming it again (settled soon after forming: back off)
        self.backoff = 1
        self.repeat_plan = BatchPlan(decode_group=True)  # the plan of a repeated step (read, never changed)

    # --- a step that repeats ----------------------------------------------------------------------------------
    def end_and_repeat(self, now: float) -> bool:
        """``end_step(now)`` then ``start_step(now)`` in one go for the commonest step of a busy replica: one that
        decoded the whole group and nothing else, finishes no one, and will be repeated (``repeats``); requests
        received by a decode instance take their blocks here as at any scheduling point (``Replica.reserved``
        lists them). False (nothing done) for any other step. Same state, row and duration as the two calls; the
        caller folds the steps that follow (``fold``) when the new one ends before its next event, as ``start_step``
        would."""
        g = self.group
        rep = self.rep
        clock = rep.clock
        plan = clock.plan
        if not (self.group_step and plan.decode_group) or plan.prefills:
            return False
        nxt = g.clock + 1
        kv = rep.kv
        need = g.hist[-nxt % g.block_size]
        if (nxt in g.finish_at or g.partials or rep.waiting or rep.swapped or rep.loading
                or rep.asked_at != rep.arrivals):
            return False
        if need > kv.free - (to_reserve(rep)[1] if rep.receiving else 0):
            return False  # (asked, the policy plans after this scheduling point's reservations)
        used = kv.total - kv.free  # as the step ended: before this scheduling point's reservations
        if rep.receiving:  # the scheduling point reserves, whatever the plan (the policy sees no received request)
            reserve(rep)
        assert clock.busy and len(rep.running) == g.size
        # end_step: the group decodes, nobody finishes (g.step and record_step written out: the hot path of a
        # multi-replica run, 5-9% of its CPU as calls; tests compare it with stepping)
        g.ends.append(now)
        g.clock = nxt
        n = g.size
        g.context_sum += n
        if len(g.ends) >= 2 * TRIM_AT:
            g.trim()
        start = clock.step_start
        duration = now - start
        self.steady = True
        rep.counters.step(duration)
        rep.add_row(rep.index, start, duration, 0, 0, n, clock.row[3], used, kv.total, 0, n, 0)
        clock.repeat(now)
        if rep.config.check_invariants:
            rep.check()
        clock.start(now, self.relaunch_group(now))  # start_step: the same plan again
        return True

    def fold(self, until: float, horizon: float | None) -> None:
        """After ``end_and_repeat``: the steps that would repeat and end before ``until`` (and by ``horizon``) run
        at once, as ``start_step`` fast-forwards; the last of them is the step in flight."""
        rep = self.rep
        fast_forward_group(rep, until, horizon, rep.quiet_finishes and rep.folds_finishes)

    def repeats(self, now: float) -> bool:
        """True when the policy would plan the group's decodes again (its ``steady_decodes`` declaration): the
        step that just ended at ``now`` decoded the whole group and nothing else, nothing arrived since the policy
        was asked, nothing waits and every decode finds its block."""
        g = self.group
        rep = self.rep
        return (g is not None and g.size > 0 and not g.partials and not rep.waiting and not rep.swapped
                and not rep.loading and rep.asked_at == rep.arrivals and now == rep.clock.last_end
                and g.blocks_needed <= rep.kv.free and not rep.receiving)

    def relaunch_group(self, now: float) -> float:
        """``launch_group`` of the plan that decodes the group alone, which the step that just ended ran: its
        limits held then and hold now (no more members, no more tokens; ``repeats`` checked the blocks)."""
        g = self.group
        rep = self.rep
        need = g.blocks_needed
        if need:
            rep.kv.take_group(need)
        self.group_step = True
        n, decode_sum = g.size, g.context_sum
        clock = rep.clock
        clock.launched(self.repeat_plan, (0, 0, n, decode_sum), 0)
        # decode_sum_time: sum_step_time of no prefills, the same float
        return rep.duration(rep.batch_time.decode_sum_time(n, decode_sum) + 0.0 + clock.pay(), now)

    # --- launching and ending with the group ------------------------------------------------------------------
    def launch_group(self, plan: BatchPlan, now: float):
        """``Replica.launch`` with the group formed, for a plan that decodes the whole group or none of it, plus
        prompt chunks: the members need no per-request work. Anything beyond the common case (a swapped request, a
        broken limit, KV short) goes through ``launch`` with the members listed, which raises or evicts exactly as
        for such a plan."""
        g = self.group
        rep = self.rep
        stamp = rep.counters.num_steps
        kv = rep.kv
        bs = kv.block_size
        index = rep.index
        decoding = plan.decode_group
        decodes = g.size if decoding else 0
        need = g.blocks_needed if decoding else 0
        group_need = need
        admit: list[Request] = []
        prefill_new = []
        prefill_ctx = []
        prefill_tokens = context = 0
        # LMCache's stores of prompt chunks wait inside the step: the listed launch prices them
        ok = not (plan.prefills and rep.tiers is not None and rep.tiers.sync)
        for r, n in plan.prefills if ok else ():
            st = r.status
            if r.replica != index or r.lag >= 0 or r.mark == stamp or (st is not RUNNING and st is not WAITING):
                ok = False
                break
            c = r.num_computed
            if not (isinstance(n, int) and 1 <= n <= r.prompt_len + r.num_generated - c):
                ok = False
                break
            if st is WAITING:
                if rep.caching and r.content is not None:  # its cached prefix: launch admits it
                    ok = False
                    break
                admit.append(r)
            r.mark = stamp
            prefill_new.append(n)
            prefill_ctx.append(c)
            prefill_tokens += n
            context += c + n
            extra = -(-(c + n) // bs) - r.num_blocks
            if extra > 0:
                need += extra
        cfg = rep.config
        running = rep.running
        if (not ok or prefill_tokens + decodes > cfg.max_num_batched_tokens or need > kv.free
                or len(running) + len(admit) > cfg.max_num_seqs):
            for r, _ in plan.prefills:
                if r.mark == stamp:
                    r.mark = -1
            members = [r for r in running if r.lag >= 0] if decoding else []
            self.settle()
            return rep.launch(BatchPlan(decodes=members, prefills=plan.prefills), now)
        partials = g.partials
        waiting = rep.waiting
        landed = rep.landed
        for r in admit:
            waiting.remove(r)
            if landed:
                landed.discard(r)
            r.status = RUNNING
            if r.first_scheduled != r.first_scheduled:  # NaN: first admission
                r.first_scheduled = now
            rep.append_running(r)
            partials.append(r)
        if group_need:
            kv.take_group(group_need)
        if prefill_new:
            kv.allocate_chunks(plan.prefills)
        self.group_step = True
        decode_sum = g.context_sum if decoding else 0
        clock = rep.clock
        clock.launched(plan, (prefill_tokens, len(prefill_new), decodes, decode_sum + context), 0)
        return rep.duration(rep.batch_time.sum_step_time(prefill_new, prefill_ctx, decodes, decode_sum)
                            + 0.0 + clock.pay(), now)

    def end_group_step(self, now: float) -> None:
        """``end_step`` for a step launched with the group formed: the members advance by the group's clock when
        the plan decoded them; only those finishing and the prompt chunks are touched."""
        g = self.group
        rep = self.rep
        plan = rep.clock.plan
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
                # a recompute one token short of its output so far: its next step is a decode (as form_group
                # and every policy's own pass classify it), so it decodes with the group
                g.partials.remove(r)
                g.join(r)
        if done:
            if len(done) > 1:
                done.sort(key=ORDER)
            kv, running = rep.kv, rep.running
            sent = rep.sent if rep.sends_kv else None
            for r in done:
                r.finish = now
                if sent is None:
                    kv.release(r)
                else:  # a prefill instance's: its blocks wait for the decode side (``Replica.read_sent``)
                    sent[r.id] = r
                running.remove(r)
            rep.completed.extend(done)
        self.steady = not plan.prefills and (not done or rep.folds_finishes)
        rep.record_step(now)

    def listed_step_ended(self) -> None:
        """After a step that listed its decodes: the next one is no repeat, and a policy that plans from the group
        gets it formed again (after the back-off of a group settled soon after forming)."""
        self.steady = False
        if self.forms and self.group is None:
            if self.form_wait:
                self.form_wait -= 1
            else:
                self.form_group()

    def listed_launch(self) -> None:
        """A plan that lists its decodes is being launched: the group is settled first, and the step ends as a
        listed one."""
        self.group_step = False
        if self.group is not None:
            self.settle()

    # --- forming and settling ---------------------------------------------------------------------------------
    def settle(self) -> None:
        """Dissolve the decode group: every member's fields exact again (a step in flight then ends as a plan that
        lists its decodes). The replica forms a new group after a later step."""
        g = self.group
        if g is None:
            return
        rep = self.rep
        members = [r for r in rep.running if r.lag >= 0]
        g.dissolve()
        self.group = None
        clock = rep.clock
        if clock.busy and self.group_step:  # the step in flight ends as a listed plan
            self.group_step = False
            plan = clock.plan
            if plan.decode_group:  # the members' blocks for it were taken at launch
                kv = rep.kv
                for r in members:
                    kv.settle_member(r, r.num_computed + 1)
                clock.listed(BatchPlan(decodes=members, prefills=plan.prefills))
        num_steps = rep.counters.num_steps
        self.backoff = min(64, 2 * self.backoff) if num_steps - self.formed_at < 8 else 1
        self.form_wait = self.backoff

    def form_group(self) -> None:
        g = DecodeGroup(self.rep.kv)
        for r in self.rep.running:
            if r.num_generated and r.num_computed + 1 == r.prompt_len + r.num_generated:
                g.join(r)
            else:
                g.partials.append(r)
        self.group = g
        self.formed_at = self.rep.counters.num_steps

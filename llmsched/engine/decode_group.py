"""Event-driven decode accounting: the running requests in decode phase, advanced as one group.

In most steps every request in decode phase computes one token and nothing else changes for it: its context grows
by one, it takes a block every ``block_size`` tokens, it gets the step's end time as a token time. Writing that into
every request at every step is the simulator's main per-step cost at a large batch. A group keeps instead a clock
(how many group steps have ended) and their end times; a member's fields are exact as of the clock value ``lag``
at which it joined or was last settled, and ``settle`` brings them up to date (``clock - lag`` more tokens, the
token times ``ends[lag:clock]``). What a step needs from the members is kept as totals updated on join and leave:
their number, their context sum, how many cross into a new block at each step (a histogram of ``(computed - lag)
mod block_size``) and which finish at which clock value.

While a group is formed, every running request is a member (decode phase) or in ``partials`` (prompt not done, in
running order); the replica keeps both up to date and settles the group before anything reads the requests
themselves (the view's ``running``, a preemption, a plan that lists decodes, the end of a run).
"""
from __future__ import annotations

from array import array
from heapq import heappop, heappush

TRIM_AT = 1 << 16  # end times kept before the older ones nobody still needs are dropped


class DecodeGroup:
    __slots__ = ("kv", "block_size", "clock", "ends", "base", "members", "size", "partials", "hist", "context_sum",
                 "finish_at", "due", "max_order")

    def __init__(self, kv):
        self.kv = kv  # the replica's KVCacheManager: the members' blocks are taken and written through it
        block_size = self.block_size = kv.block_size
        self.clock = 0  # group steps ended
        self.ends = array("d")  # ends[i - base]: end time of group step i + 1
        self.base = 0
        self.members: dict = {}  # request -> None, in join order
        self.size = 0  # len(members)
        self.partials: list = []  # running requests with their prompt (or recompute) not done, in running order
        self.hist = [0] * block_size  # members by (computed - lag) mod block_size
        self.context_sum = 0  # Σ (computed + 1) over members: the context of their next decode
        self.finish_at: dict[int, list] = {}  # clock value after which they have all their tokens -> members
        self.due: list[int] = []  # heap of finish_at's keys (lazily deleted)
        self.max_order = -1  # at least the largest running position of a member (not lowered on leave)

    # --- what the next step needs ------------------------------------------------------------------------
    @property
    def blocks_needed(self) -> int:
        """Members whose next decode crosses into a new KV block."""
        return self.hist[-self.clock % self.block_size]

    def finishing_next(self) -> list:
        """Members that receive their last token in the next group step."""
        return self.finish_at.get(self.clock + 1, ())

    def next_finish(self) -> int:
        """The clock value at which the earliest member finishes (a large number with no member)."""
        due, finish_at = self.due, self.finish_at
        while due and due[0] not in finish_at:
            heappop(due)
        return due[0] if due else 1 << 62

    # --- membership ---------------------------------------------------------------------------------------
    def join(self, r) -> None:
        """``r`` (exact, running, in decode phase, not finished) decodes with the group from now on."""
        clock = self.clock
        r.lag = clock
        self.members[r] = None
        self.size += 1
        self.hist[(r.num_computed - clock) % self.block_size] += 1
        self.context_sum += r.num_computed + 1
        f = clock + r.output_len - r.num_generated
        at = self.finish_at.get(f)
        if at is None:
            self.finish_at[f] = [r]
            heappush(self.due, f)
        else:
            at.append(r)
        if r.order > self.max_order:
            self.max_order = r.order

    def settle(self, r) -> None:
        """Write the group steps ``r`` took since its lag into its fields."""
        k = self.clock - r.lag
        if k:
            base = self.base
            r.num_computed += k
            r.num_generated += k
            r.token_times.extend(self.ends[r.lag - base:self.clock - base])
            r.last_token = self.ends[self.clock - 1 - base]
            self.kv.settle_member(r, r.num_computed)
            r.lag = self.clock

    def leave(self, r) -> None:
        """``r`` leaves the group before its last token, its fields exact."""
        f = r.lag + r.output_len - r.num_generated  # its finish clock (fields as of its lag)
        at = self.finish_at[f]
        at.remove(r)
        if not at:
            del self.finish_at[f]
        self.leave_finished(r)

    def dissolve(self) -> None:
        """Settle every member and forget the group (the replica then runs on exact fields)."""
        for r in self.members:
            self.settle(r)
            r.lag = -1
        self.members.clear()
        self.size = 0

    # --- a step -------------------------------------------------------------------------------------------
    def step(self, end: float) -> list:
        """Every member decoded in a step that ended at ``end``. Returns the members that finished in it (their
        fields exact, out of the group), in join order."""
        self.ends.append(end)
        clock = self.clock = self.clock + 1
        self.context_sum += self.size
        done = self.finish_at.pop(clock, None)
        if done:
            for r in done:
                self.leave_finished(r)
        due = self.due
        while due and due[0] <= clock:  # passed: keeps the heap to the keys still ahead in a run that never folds
            heappop(due)
        if len(self.ends) >= 2 * TRIM_AT:
            self.trim()
        return done or []

    def leave_finished(self, r) -> None:
        """``r``, already out of ``finish_at``, leaves the group, its fields exact."""
        self.settle(r)
        del self.members[r]
        self.size -= 1
        self.hist[(r.num_computed - self.clock) % self.block_size] -= 1
        self.context_sum -= r.num_computed + 1
        r.lag = -1

    def trim(self) -> None:
        """Drop the end times no member still needs."""
        oldest = min((r.lag for r in self.members), default=self.clock)
        if oldest > self.base:
            del self.ends[:oldest - self.base]
            self.base = oldest

    # --- checks -------------------------------------------------------------------------------------------
    def exact(self, r) -> tuple[int, int]:
        """(computed, generated) of a member as of now, without writing them."""
        k = self.clock - r.lag
        return r.num_computed + k, r.num_generated + k

    def check(self, running) -> None:
        members = self.members
        assert len(members) == self.size, "group: size drifted"
        assert len(members) + len(self.partials) == len(running), "group: members + partials != running"
        in_running = set(map(id, running))
        assert all(id(r) in in_running for r in members), "group: a member is not running"
        assert all(id(r) in in_running and r not in members for r in self.partials), "group: a bad partial"
        hist = [0] * self.block_size
        ctx = 0
        for r in members:
            c, g = self.exact(r)
            assert g > 0 and c + 1 == r.prompt_len + g, f"group: member {r.id} is not in decode phase"
            assert g < r.output_len, f"group: member {r.id} has all its tokens"
            assert r in self.finish_at[self.clock + r.output_len - g], f"group: member {r.id} not due"
            hist[(c - self.clock) % self.block_size] += 1
            ctx += c + 1
        assert hist == self.hist and ctx == self.context_sum, "group: totals drifted"
        for r in self.partials:
            assert not r.is_decode, f"group: partial {r.id} is in decode phase"

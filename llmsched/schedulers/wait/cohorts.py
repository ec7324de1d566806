"""Building a WAIT / Nested WAIT batch: whole cohorts join the step or none of their members does."""
from __future__ import annotations

from ...engine.plan import BatchPlan
from ...request import Status
from ..decode_pass import add_decodes
from ..kv_holders import front_holds_kv

RUNNING, WAITING = Status.RUNNING, Status.WAITING


class CohortPlan:
    """Adds groups of requests to one plan while the token budget, the sequence cap and the free KV allow.

    A waiting request is prefilled whole (admitted); a running one decodes, or finishes its prefill."""

    def __init__(self, view, guard: bool = True):
        self.view = view
        # False: ignore free KV (the replica's overflow rule, e.g. evict-newest, resolves it); but that rule evicts
        # running requests only, and cannot free the blocks held outside the running set (a sent prompt's, a tier's
        # load), so beside those the free KV is guarded
        self.held_outside = view.blocks_held_waiting
        self.guard = guard or self.held_outside > 0
        self.plan = BatchPlan()
        self.budget = view.max_num_batched_tokens
        self.seats = view.max_num_seqs - len(view.running)
        self.free = view.free_blocks
        self.refused = False  # some group did not fit

    def add(self, group) -> bool:
        bs = self.view.block_size
        tokens = seats = blocks = 0
        decodes, prefills = [], []
        for r in group:  # per request: is_decode, remaining_prefill and the view's block counts, inlined
            status, g, c = r.status, r.num_generated, r.num_computed
            if status is RUNNING and g and c == r.prompt_len + g - 1:
                decodes.append(r)
                tokens += 1
                need = -(-(c + 1) // bs) - r.num_blocks  # view.decode_blocks(r)
            elif status is WAITING or status is RUNNING:
                n = r.prompt_len + g - c
                prefills.append((r, n))
                tokens += n
                seats += status is WAITING
                need = -(-(c + n) // bs) - r.num_blocks  # view.extra_blocks(r, c + n)
            else:
                continue
            if need > 0:
                blocks += need
        if tokens > self.budget or seats > self.seats or (self.guard and blocks > self.free):
            self.refused = True
            return False
        self.plan.decodes.extend(decodes)
        self.plan.prefills.extend(prefills)
        self.budget -= tokens
        self.seats -= seats
        self.free -= blocks
        return True

    def finish(self) -> BatchPlan:
        """The plan; when a group was refused and nothing else runs, the decodes run vLLM-style (in order while the
        token budget lasts, preempting the newest on block shortage) so that a too-small cache cannot deadlock the
        replica. On an idle replica (the state in which anything fits best, once no block is held outside the
        running set) the waiting requests are tried one at a time: the first that fits alone runs, and one that does
        not fit even alone can never run under this admission rule and is rejected.

        Requests that wait holding KV (a prompt a prefill instance sent, a prefix a tier loaded; they wait at the
        front of the replica's queue) are not left to hold it while the replica idles: with nothing else planned
        they are admitted, as vLLM drains its KV-holding queue first, whatever their group's threshold (a sent
        prompt needs no new block: its last token goes into its own blocks). When none fits, the running decodes
        go on and a preemption alone is kept: the blocks it frees let them in at the next step, as vLLM preempts
        a decode it cannot allocate for (itself, when it is the only one)."""
        plan = self.plan
        view = self.view
        holders = front_holds_kv(view)
        if not plan.has_work and holders:
            self._admit_holders()
        if not plan.has_work and (self.refused or holders):
            if view.running:
                add_decodes(view, plan, limit=view.max_num_batched_tokens)  # the rest wait for budget
                if not plan.decodes and not holders:
                    plan.preempt.clear()
            elif not self.held_outside:
                # (beside blocks held outside the running set, in transfer, landed or kept for a decode side, an idle
                # replica is not yet at its emptiest: what does not fit waits for them to go)
                self._admit_one_alone()
        return plan

    def _admit_holders(self) -> None:
        """The waiting requests that hold KV, in the replica's order, each as its own group while they fit the
        budget, the seats and the free blocks (not a subclass's reservation: they hold their KV already)."""
        for r in self.view.waiting:
            if not r.num_blocks:
                break
            CohortPlan.add(self, [r])

    def _admit_one_alone(self) -> None:
        view = self.view
        for r in view.waiting:
            if self.add([r]):
                return
            self.plan.reject.append((r, (
                f"its cohort admission ({type(self).__name__}) refuses it even alone on an idle replica (prompt "
                f"{r.prompt_len} tokens; KV cache {view.total_blocks} blocks of {view.block_size} tokens, token "
                f"budget {view.max_num_batched_tokens}, {view.max_num_seqs} seats): it can never be scheduled")))

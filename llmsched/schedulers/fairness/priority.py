"""Priority classes that preempt, with chunked prefill: the most urgent class's work first in every step."""
from __future__ import annotations

from dataclasses import dataclass

from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ...request import Request
from ..registry import register
from .preemption_ledger import times_histogram
from .queued_policy import QueuedPolicy, all_decode
from .waiting_queues import WaitingQueues, priority_key


@register
@dataclass
class Priority(QueuedPolicy):
    """priority: classes by urgency (lower value first, as vLLM), preempting less urgent running requests.

    A request's class is its tenant's priority, else its tier's, else 0. Each step walks the classes from the
    most urgent: first the class's running requests in admission order (a decode, or a chunk of what is left of a
    prompt), then its waiting requests in queue order (a chunk of the budget left), and only then the next class,
    so less urgent work gets what budget the more urgent leaves (it pauses, keeping its KV, when none is left).
    A waiting request that finds no free KV block or no seat preempts running requests of less urgent classes,
    least urgent and newest first (vLLM's ``max(priority, arrival)``), by recompute or swap as the run's
    ``preemption_mode`` says, but only when those victims free enough for it; otherwise admissions stop there.
    A running request short of a block preempts as vLLM v1 does under its priority policy: the least urgent,
    newest running request, itself last; such a step admits nothing. Waiting requests that hold KV (a prompt a
    prefill instance sent, a KV tier's load) wait at the front of their class and need no new block to run: when
    admissions stop at a head that holds none, they go on in the later classes (vLLM 0.32 drains its KV-holding
    waiting queue before the others), so that priority can run a disaggregated fleet's decode pool.

    ``max_preemptions`` bounds the work thrown away: a request is preempted for a more urgent one at most that
    many times (0: never, vLLM v1's behaviour: order only), so a request loses at most ``max_preemptions`` times
    its KV (at most ``prompt + output - 1`` tokens each time) to priority preemption, by recompute, and none by
    swap, and it is never preempted for priority for ever (no livelock: once exempt it runs to its end, short of
    the KV preemptions every policy makes). The summary's ``policy`` section counts both kinds and the KV tokens
    thrown away, by tenant (else tier) and class. With one class it decides as vllm-chunked.
    """

    name = "priority"
    serves_transferred_kv = True  # a prompt a prefill instance sent: its last token, its own blocks, ahead of the rest
    source = ("vLLM --scheduling-policy priority (v1: waiting by (priority, arrival), the lowest priority preempted "
              "on KV shortage; v0 PR #5958: lower-priority running requests preempted for a waiting one); vllm "
              "issue #10101 (priority preemption with chunked prefill)")
    token_budget: int = 2048
    max_preemptions: int = 1
    reserve_full_isl: bool = True  # as vllm-chunked: a waiting request admitted when its whole sequence's blocks fit

    def __post_init__(self):
        self.use_queues(WaitingQueues(key=priority_key))
        if self.max_preemptions < 0:
            raise ValueError(f"{self.name}: max_preemptions must be >= 0 (0: never preempt for priority), got "
                             f"{self.max_preemptions}")
        self.preempted: dict[int, int] = {}  # request id -> times preempted for a more urgent request

    def schedule(self, view: ReplicaView) -> BatchPlan:
        all_decodes = self.start_step(view)
        self.last_victims = []
        if all_decodes:
            plan = all_decode(view.running, view.block_size, view.free_blocks)
            if plan is not None:
                return plan  # nothing waits and every running request decodes: the class order changes nothing
        plan = BatchPlan()
        budget = min(self.token_budget, view.max_num_batched_tokens)
        free = view.free_blocks
        seats = view.max_num_seqs - len(view.running)
        bs = view.block_size
        age = {x: i for i, x in enumerate(view.running)}  # running order: admission order (later is newer)

        def urgency(x):  # most urgent class first, admission order within it
            return x.priority, age[x]
        todo = sorted(view.running, key=urgency)
        kv_victims: list[Request] = []
        claimed = set()  # cached free blocks this plan's admissions take (counted once: vllm-chunked)
        admitting = True
        holding_only = False  # a head holding no KV could not be admitted: only requests holding KV go on
        i = 0
        for p in sorted({r.priority for r in todo}.union(self.queues.backlogged())):
            while i < len(todo) and todo[i].priority == p and budget > 0:
                r = todo[i]
                computed, known = r.num_computed, r.prompt_len + r.num_generated
                n = min(known - computed, budget)
                need = -(-(computed + n) // bs) - r.num_blocks
                while need > free:
                    victim = max(todo[i:], key=urgency)
                    todo.remove(victim)
                    kv_victims.append(victim)
                    free += view.preempt_frees(victim)
                    if victim is r:
                        break
                else:
                    if need > 0:
                        free -= need
                    budget -= n
                    if computed + 1 == known and r.num_generated:
                        plan.decodes.append(r)
                    else:
                        plan.prefills.append((r, n))
                    i += 1
            if budget <= 0:
                break
            while admitting and not kv_victims and budget > 0:
                h = self.queues.head(p) if p in self.queues.queues else None
                if h is None or (holding_only and not h.num_blocks):
                    break
                full = view.tokens_to_compute(h)  # after its cached prefix (vLLM v1)
                n = min(full, budget)
                need = view.admission_blocks(h, n, claimed)  # with the cached blocks it takes out of the free pool
                # vLLM's full-prompt gate (vllm-chunked's reserve_full_isl): its whole sequence's blocks must be free
                gate = view.admission_blocks(h, full, claimed) if self.reserve_full_isl and n < full else need
                if gate > free or seats < 1:
                    victims = None if holding_only else self._room(todo[i:], p, gate - free, 1 - seats, urgency,
                                                                   view.preempt_frees)
                    if victims is None:  # nothing less urgent to give way: later classes wait too, but for the
                        # requests holding KV (a prompt a prefill instance sent, a tier's load; at the front of each
                        # class's queue), which need no new block: vLLM 0.32 drains its KV-holding waiting queue
                        # before the others, and they hold the blocks this head may be waiting for
                        if h.num_blocks or seats < 1:
                            admitting = False
                        holding_only = True
                        break
                    for v in victims:
                        todo.remove(v)
                        self.preempted[v.id] = self.preempted.get(v.id, 0) + 1
                        free += view.preempt_frees(v)
                        seats += 1
                    plan.preempt.extend(victims)
                    self.ledger.planned(victims, "priority")
                self.queues.pop(p)
                view.claim_hit(h, claimed)
                plan.prefills.append((h, n))
                free -= need
                budget -= n
                seats -= 1
        plan.preempt.extend(kv_victims)
        self.ledger.planned(kv_victims, "kv")
        self.last_victims = plan.preempt
        return plan

    def _room(self, later: list[Request], p: int, blocks: int, seats: int, urgency,
              frees=lambda r: r.num_blocks) -> list[Request] | None:
        """The fewest less urgent running requests (least urgent, newest first; not yet preempted
        ``max_preemptions`` times) whose preemption frees ``blocks`` blocks and ``seats`` seats; None if all of
        them would not."""
        limit = self.max_preemptions
        candidates = [r for r in later if r.priority > p and self.preempted.get(r.id, 0) < limit]
        candidates.sort(key=urgency, reverse=True)
        taken = []
        for r in candidates:
            if blocks <= 0 and seats <= 0:
                break
            taken.append(r)
            blocks -= frees(r)
            seats -= 1
        return taken if blocks <= 0 and seats <= 0 else None

    def stats(self) -> dict:
        return {**super().stats(), "priority_preemptions_per_request": times_histogram(self.preempted)}

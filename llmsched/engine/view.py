"""The read-only window a scheduler decides from, identical in simulation and in a real engine.

It exposes live state without copying (a step must stay cheap). Schedulers must not
mutate what it returns: sort with ``sorted()``, never ``list.sort()`` on these lists.
"""
from __future__ import annotations

from collections import deque

from ..batchtime.base import BatchTimeModel
from ..request import Request, Status

WAITING = Status.WAITING


class ReplicaView:
    """Reads its replica's state; it names no engine type, so the mechanism imports it and not the reverse."""

    __slots__ = ("_r",)

    def __init__(self, replica):
        self._r = replica

    # --- clock and queues -------------------------------------------------
    @property
    def now(self) -> float:
        return self._r.clock.now

    @property
    def replica_index(self) -> int:
        return self._r.index

    @property
    def waiting(self) -> list[Request]:
        """Never-run and recompute-preempted requests, in queue order (preempted first)."""
        return self._r.waiting

    @property
    def running(self) -> list[Request]:
        """Requests holding KV on the GPU, in admission order (their fields exact: the decode group is settled)."""
        r = self._r
        groups = r.groups
        if groups.group is not None:
            groups.settle()
        return r.running

    @property
    def num_running(self) -> int:
        return len(self._r.running)

    @property
    def decode_group(self):
        """The running requests in decode phase as one ``DecodeGroup`` (size, blocks_needed, partials: the other
        running requests, in running order), or None. A policy that plans from it without reading ``running`` sets
        ``BatchPlan.decode_group``; reading ``running`` dissolves it."""
        return self._r.groups.group

    @property
    def swapped(self) -> list[Request]:
        """Requests preempted by swap, oldest swap first."""
        return self._r.swapped

    # --- limits -----------------------------------------------------------
    @property
    def max_num_seqs(self) -> int:
        return self._r.config.max_num_seqs

    @property
    def max_num_batched_tokens(self) -> int:
        return self._r.config.max_num_batched_tokens

    @property
    def max_model_len(self) -> int:
        return self._r.config.max_model_len

    # --- KV cache ---------------------------------------------------------
    @property
    def block_size(self) -> int:
        return self._r.kv.block_size

    @property
    def total_blocks(self) -> int:
        return self._r.kv.total

    @property
    def free_blocks(self) -> int:
        return self._r.kv.free

    @property
    def blocks_held_waiting(self) -> int:
        """Blocks held by requests outside the running set: KV a tier is loading or loaded for a waiting request, a
        prefill instance's prompt KV in transfer or landed (engine/remote_kv.py), or the prompts a prefill instance
        sent and keeps until the decode side reads them (vLLM's delayed free; ``Replica.read_sent``). A policy that
        keeps its own ledger of the cache cannot give these to the running requests."""
        r = self._r
        sent = r.sent
        if not (r.loading or r.transferring or sent or (r.waiting and r.waiting[0].num_blocks)):
            return 0  # (nothing loads, lands or waits to be read: the common case, every step of a policy that asks)
        held = sum(q.num_blocks for q in r.loading) + sum(q.num_blocks for q in r.transferring)
        held += sum(q.num_blocks for q in sent.values())
        return held + sum(q.num_blocks for q in r.waiting if q.num_blocks)  # (loaded requests wait at the front)

    @property
    def kv_utilisation(self) -> float:
        return self._r.kv.utilisation

    @property
    def swap_free_blocks(self) -> int:
        return self._r.kv.swap_free

    def blocks_for(self, tokens: int) -> int:
        return self._r.kv.blocks_for(tokens)

    @property
    def kv_windowed(self) -> bool:
        """Whether the KV cache counts vLLM's windowed groups (engine/kv_windows.py): a step's blocks are then
        ``extra_blocks``, which may be negative (the window's blocks freed), never one per ``block_size`` tokens."""
        return self._r.config.kv_groups is not None

    def extra_blocks(self, req: Request, tokens: int) -> int:
        """Blocks ``req`` would need beyond what it holds to keep ``tokens`` KV tokens."""
        return self._r.kv.extra_blocks(req, tokens)

    @property
    def prefix_caching(self) -> bool:
        """Whether the replica keeps vLLM v1's prefix cache (its requests carry content and the run left it on)."""
        return self._r.caching

    @property
    def kv_tiers(self) -> bool:
        """Whether KV tiers sit below the GPU's prefix cache (--kv-offload): in a colocated run only they load a
        waiting request's KV, so only with them does a waiting request hold blocks."""
        return self._r.tiers is not None

    def step_draft(self, plan, free: int):
        """What a policy's admissions look up the prefix cache through, made after it planned the step's running
        work (``plan``, leaving ``free`` blocks): vLLM's waiting loop finds the cache as the running loop left it
        (its allocations' LRU evictions, its chunks' full blocks cached) and as each admission before it leaves it
        (engine/cache_draft.py). Pass it to ``cached_tokens``, ``admission_blocks`` and, once a request is
        admitted, ``admitted``. None without a cache; with KV tiers below the GPU, or for a policy that does not
        declare ``looks_up_in_order`` (the replica then takes its blocks after referencing every hit), the set of
        cached blocks the plan's admissions take (each counted once; lookups see the cache as the step starts)."""
        r = self._r
        if not r.caching:
            return None
        if not r.in_order:
            return set()
        kv = r.kv
        draft = kv.draft()
        draft.take(kv.free - free)
        for req, n in plan.prefills:
            if req.status is not WAITING:
                draft.register(req, req.num_computed + n)
        return draft

    def cached_tokens(self, req: Request, draft=None) -> int:
        """Leading tokens of waiting ``req`` that the prefix cache holds now, so its admission starts after them
        (whole blocks, at most its tokens less one, as vLLM v1's ``get_computed_blocks``); 0 without a cache, for
        a request without content, and for one already running. The replica looks again when it admits: the
        plan's own preemptions can only add to it. With KV tiers below the GPU, what they hold past the GPU hit
        counts too (vLLM counts external hits). A waiting request that holds KV already (a tier loaded it, or a
        prefill instance sent its prompt's KV, engine/remote_kv.py: all of it but its last token) counts what it
        holds, as vLLM v1 counts a connector's external hit with the local one. ``draft`` (``step_draft``): as
        the step's scheduling so far leaves the cache."""
        r = self._r
        if req.num_blocks and req.status is WAITING:
            return req.num_computed
        if not r.caching or req.num_computed or req.content is None:
            return 0
        kv = r.kv
        blocks = len(kv.lookup(req) if draft is None or type(draft) is set else draft.lookup(req))
        if kv.tiers is not None:
            hit = kv.tiers.lookup(req, blocks)
            if hit is not None:  # vLLM's connector may load the whole prompt; its last token is computed again
                return min((blocks + hit.blocks) * kv.block_size, req.num_tokens - 1)
        return blocks * kv.block_size

    def tokens_to_compute(self, req: Request) -> int:
        """Tokens ``req`` must still compute before its next output token: its remaining prompt less what the
        prefix cache holds (what a step's token budget counts, as in vLLM v1)."""
        if req.num_computed:  # holding KV: its prompt's last token (a prefill instance sent the rest), or a chunk
            return req.prompt_len + req.num_generated - req.num_computed
        return req.prompt_len + req.num_generated - self.cached_tokens(req)

    def admission_blocks(self, req: Request, n: int, claimed: set | None = None) -> int:
        """Free blocks admitting waiting ``req`` with a chunk of ``n`` tokens to compute takes: the chunk's new
        blocks after its cached prefix, plus the cached blocks nobody references (they leave the free pool; a
        block shared with a running request costs nothing), plus, with KV tiers below the GPU, the blocks a tier's
        hit fills. Without a cache, ``blocks_for(n)``; a request holding KV (a tier loaded it, or a prefill
        instance sent its prompt's) takes the blocks beyond those it holds. ``claimed``: the step's draft
        (``step_draft``: its hit as the step leaves the cache, and blocks earlier admissions take not counted
        again), or a set of the cached blocks earlier admissions of the plan take (``claim_hit``)."""
        r = self._r
        kv = r.kv
        if req.num_blocks:  # its KV loaded (a prefill instance's, a tier's): it holds those blocks, even a one-token
            # prompt's sent with none computed
            return kv.extra_blocks(req, req.num_computed + n)
        if not r.caching or req.content is None:
            return kv.blocks_for(n)
        if claimed is None or type(claimed) is set:
            hit = kv.lookup(req)
            extra = kv.unreferenced(hit, claimed)
        else:
            hit = claimed.lookup(req)
            extra = claimed.unreferenced(hit)
        if kv.tiers is not None:
            tier_hit = kv.tiers.lookup(req, len(hit))
            if tier_hit is not None:  # the chunk starts after the tier's blocks, or (the whole prompt loaded) at
                # its last token, computed again in the load's last block (``cached_tokens``)
                start = min((len(hit) + tier_hit.blocks) * kv.block_size, req.num_tokens - 1)
                return -(-(start + n) // kv.block_size) - len(hit) + extra
        return kv.blocks_for(n) + extra

    def claim_hit(self, req: Request, claimed: set) -> None:
        """Admitting waiting ``req`` takes its cached blocks nobody references out of the free pool: add them to
        ``claimed``, so that a later admission of the same plan starting from them counts them no more
        (``admission_blocks(..., claimed)``), as vLLM's ``allocate_slots`` references them at the first admission
        and the next finds them held."""
        r = self._r
        if r.caching and not req.num_blocks and req.content is not None:
            r.kv.claim(r.kv.lookup(req), claimed)

    def admitted(self, req: Request, n: int, draft) -> None:
        """The policy admits waiting ``req`` with a chunk of ``n`` tokens: ``draft`` (``step_draft``) replays it,
        as vLLM's ``allocate_slots`` does it before the next waiting request is looked up (its hit referenced, its
        chunk's blocks taken, their full blocks cached); a set draft gets its cached blocks (``claim_hit``)."""
        if draft is None:
            return
        if type(draft) is set:
            self.claim_hit(req, draft)
        elif req.num_blocks or req.content is None:
            draft.take(self.admission_blocks(req, n, draft))
            draft.register(req, req.num_computed + n)
        else:
            draft.admit(req, n)

    def preempt_frees(self, req: Request) -> int:
        """Blocks preempting running ``req`` returns to the free pool: its blocks, less those another running
        request also references (a shared block is counted once, and stays held)."""
        r = self._r
        if not r.caching:
            return req.num_blocks
        return r.kv.frees(req)

    def decode_blocks(self, req: Request) -> int:
        """Blocks a decode step of ``req`` needs (0 or 1 with paging)."""
        return self._r.kv.extra_blocks(req, req.num_computed + 1)

    # --- timing -----------------------------------------------------------
    @property
    def recent_step_times(self) -> deque:
        """Durations of the last steps, oldest first (what a real engine observes)."""
        return self._r.counters.recent_steps

    @property
    def mean_step_time(self) -> float:
        """Mean duration of all steps so far (0 before the first)."""
        counters = self._r.counters
        return counters.busy_time / counters.num_steps if counters.num_steps else 0.0

    @property
    def num_steps(self) -> int:
        return self._r.counters.num_steps

    @property
    def batch_time(self) -> BatchTimeModel | None:
        """The replica's batch-time model, for policies that predict step times."""
        return self._r.batch_time

    # --- oracle -----------------------------------------------------------
    @property
    def oracle(self) -> bool:
        return self._r.config.oracle

    def oracle_output_len(self, req: Request) -> int | None:
        """The true output length, only when the run grants the oracle option."""
        return req.output_len if self._r.config.oracle else None

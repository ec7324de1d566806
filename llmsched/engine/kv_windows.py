"""The KV cache manager of a model with sliding-window or chunked-local attention layers, counted as vLLM v1's
hybrid KV cache manager holds them (hardware/kv_groups.py says how vLLM groups the layers and sizes the pool).

A block here is vLLM's: one page of each layer of a KV cache group. A request that was allocated ``t`` tokens when
it had computed ``c`` holds ``ceil(t / B)`` blocks in each full-attention group and ``ceil(t / B) - skipped(c)``
in each windowed group, ``skipped(c)`` being the whole blocks before the first token its next query sees (vLLM's
``remove_skipped_blocks``, run by every ``allocate_slots`` before it counts new blocks). So a request's count is not
a function of its tokens alone: ``num_blocks`` is the count of its last allocation, and a step's need is the count
after it less that (negative where the window's blocks freed outweigh the new ones: the freed blocks are free for
the requests scheduled after it, as in vLLM's pass over its running requests).

A fresh request's blocks for ``t`` tokens (``blocks_for``: a first chunk, and vLLM's whole-sequence admission
gate) cap each windowed group at ``max_admission_blocks_per_request``. The decode group's bulk accounting
(engine/decode_group.py) assumes one block per ``B`` tokens: a replica with this manager never forms it
(``ReplicaConfig`` turns ``fast_forward`` off), and prefix caching, KV tiers, swapping and a prefill instance's KV
are not modelled per group (the run keeps the all-full-attention manager for those).
"""
from __future__ import annotations

from .errors import KVCapacityError
from .kv_cache import KVCacheManager
from ..request import Request


class WindowedKVCacheManager(KVCacheManager):
    """Counts blocks per KV cache group (``groups``: hardware/kv_groups.py's ``KVGroups``)."""

    __slots__ = ("windows", "full_groups", "local_groups", "window", "chunked", "cap")

    def __init__(self, total_blocks: int, block_size: int, swap_blocks: int, groups, max_num_batched_tokens: int,
                 max_model_len: int):
        super().__init__(total_blocks, block_size, swap_blocks)
        self.windows = groups
        self.full_groups = groups.full
        self.local_groups = groups.local
        self.window = groups.window
        self.chunked = groups.chunked
        # vLLM's max_admission_blocks_per_request with one batch in flight (kv_cache_interface.py)
        if groups.chunked:
            self.cap = -(-min(groups.window + max_num_batched_tokens, max_model_len) // block_size)
        else:
            self.cap = -(-min(groups.window - 1 + max_num_batched_tokens, max_model_len) // block_size) + 1

    def skipped(self, computed: int) -> int:
        """Whole blocks of a windowed group before the first token the query after ``computed`` tokens sees."""
        w = self.window
        if self.chunked:
            return computed // w * w // self.block_size
        return (computed - w + 1) // self.block_size if computed >= w else 0

    def held_after(self, computed: int, tokens: int) -> int:
        """Blocks a request holds once allocated ``tokens`` tokens with ``computed`` of them computed."""
        n = -(-tokens // self.block_size)
        return self.full_groups * n + self.local_groups * (n - self.skipped(computed))

    # --- reads ------------------------------------------------------------------------------------------------
    def blocks_for(self, tokens: int) -> int:
        """A fresh request's blocks for ``tokens`` tokens, each windowed group at most vLLM's admission cap."""
        n = -(-tokens // self.block_size)
        return self.full_groups * n + self.local_groups * (n if n < self.cap else self.cap)

    def extra_blocks(self, req: Request, tokens: int) -> int:
        """Blocks ``req`` takes (negative: frees) to hold ``tokens`` tokens from its computed ones (``held_after``
        inline: a policy asks it of every running request at every step)."""
        bs, w, c = self.block_size, self.window, req.num_computed
        n = -(-tokens // bs)
        if self.chunked:
            skip = c // w * w // bs
        else:
            skip = (c - w + 1) // bs if c >= w else 0
        return self.full_groups * n + self.local_groups * (n - skip) - req.num_blocks

    def can_allocate(self, req: Request, tokens: int) -> bool:
        return self.extra_blocks(req, tokens) <= self.free

    # --- a request's blocks -------------------------------------------------------------------------------------
    def allocate(self, req: Request, tokens: int) -> None:
        need = self.held_after(req.num_computed, tokens) - req.num_blocks
        if need > self.free:
            raise KVCapacityError(f"request {req.id} needs {need} more KV blocks, {self.free} free")
        self.free -= need
        req.num_blocks += need

    def allocate_decodes(self, reqs) -> None:
        free = self.free
        for r in reqs:
            take = self.extra_blocks(r, r.num_computed + 1)
            free -= take
            r.num_blocks += take
        self.free = free
        assert free >= 0, f"negative free KV blocks: {free}"

    def allocate_chunks(self, prefills) -> None:
        free = self.free
        for r, n in prefills:
            take = self.extra_blocks(r, r.num_computed + n)
            free -= take
            r.num_blocks += take
        self.free = free
        assert free >= 0, f"negative free KV blocks: {free}"

    # --- the decode group: never formed with windowed groups --------------------------------------------------------
    def take_group(self, blocks: int) -> None:
        raise AssertionError("a replica with windowed KV groups never forms the decode group")

    def settle_member(self, req: Request, tokens: int) -> None:
        raise AssertionError("a replica with windowed KV groups never forms the decode group")

    # --- checks -----------------------------------------------------------------------------------------------
    def checked_blocks(self, r: Request, group, whole_prompt: bool = False) -> int:
        """The blocks running ``r`` holds, asserted between those of its computed tokens with the window's freed
        and without."""
        c = r.num_computed
        blocks = r.num_blocks
        low, high = self.held_after(c, c), (self.full_groups + self.local_groups) * -(-c // self.block_size)
        assert low <= blocks <= high, f"request {r.id} holds {blocks} blocks for {c} KV tokens ({low}..{high})"
        return blocks

    def check(self, running, swapped=(), waiting=(), group=None, holding=()) -> None:
        assert not holding, "windowed KV groups do not model a prefill instance's KV"
        super().check(running, swapped, waiting, group, holding)


def windowed_manager(config, policy) -> WindowedKVCacheManager:
    """The replica's manager for ``config.kv_groups``; a policy that predicts its plans' blocks as one per
    ``block_size`` tokens (it does not declare ``windowed_kv``) is refused: its plans would be wrong."""
    if not getattr(policy, "windowed_kv", False):
        raise ValueError(f"scheduler {policy.name!r} counts one KV block per {config.block_size} tokens, not vLLM's "
                         f"windowed KV cache groups; leave kv_groups out for it (the all-full-attention count)")
    return WindowedKVCacheManager(config.num_blocks, config.block_size, config.swap_blocks, config.kv_groups,
                                  config.max_num_batched_tokens, config.max_model_len)

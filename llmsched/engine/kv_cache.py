"""The KV cache manager: the only writer of block state (the free count, each request's ``num_blocks``, the host
swap space).

The simulator needs how many blocks each request holds, not which ones, so the manager counts: a request holding
KV for ``t`` tokens holds ``ceil(t / block_size)`` blocks, and ``free + Σ held == total`` (``check``). The replica
asks it in vLLM v1's terms (``KVCacheManager.allocate_slots``, ``free``): allocate a request's blocks for so many
tokens (the manager decides how many new blocks that takes), release them when the request finishes or loses its
KV, move them to host memory and back. A cache that shares blocks between requests (prefix caching: block hashes,
reference counts, cached free blocks) goes into these verbs. Policies, the plan check and the decode group's launch
read ``num_blocks`` and predict a plan's new blocks with the same count arithmetic as ``extra_blocks``, inline
where it is per request and per step; with a prefix cache, an admitted request's need (its cached prefix) is the
one that changes.

The decode group (engine/decode_group.py) is accounted in bulk: each group step takes the blocks its members cross
into at once (``take_group``), and a member's own count is written when the group settles it (``settle_member``).
"""
from __future__ import annotations

from .errors import KVCapacityError
from ..request import Request


class KVCacheManager:
    __slots__ = ("block_size", "total", "free", "swap_total", "swap_free")

    def __init__(self, total_blocks: int, block_size: int = 16, swap_blocks: int = 0):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if total_blocks < 1:
            raise ValueError(f"KV cache must hold at least one block, got {total_blocks} blocks")
        if swap_blocks < 0:
            raise ValueError(f"swap space must be >= 0 blocks, got {swap_blocks}")
        self.block_size = block_size
        self.total = self.free = total_blocks  # all free at the start
        self.swap_total = self.swap_free = swap_blocks  # host memory for preemption by swap, in the same blocks

    # --- reads ------------------------------------------------------------------------------------------------
    @property
    def used(self) -> int:
        return self.total - self.free

    @property
    def utilisation(self) -> float:
        return (self.total - self.free) / self.total

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def extra_blocks(self, req: Request, tokens: int) -> int:
        """New blocks ``req`` needs to hold ``tokens`` KV tokens."""
        need = -(-tokens // self.block_size) - req.num_blocks
        return need if need > 0 else 0

    def can_allocate(self, req: Request, tokens: int) -> bool:
        return self.extra_blocks(req, tokens) <= self.free

    # --- a request's blocks -------------------------------------------------------------------------------------
    def allocate(self, req: Request, tokens: int) -> None:
        """Grow ``req`` to hold ``tokens`` KV tokens; nothing changes if the blocks are not free."""
        need = -(-tokens // self.block_size) - req.num_blocks
        if need > 0:
            if need > self.free:
                raise KVCapacityError(f"request {req.id} needs {need} more KV blocks, {self.free} free")
            self.free -= need
            req.num_blocks += need

    def allocate_decodes(self, reqs) -> None:
        """Each of ``reqs`` takes the block its next token crosses into (a step's decodes, checked to fit)."""
        bs = self.block_size
        for r in reqs:
            want = -(-(r.num_computed + 1) // bs)
            if want > r.num_blocks:
                self.free -= want - r.num_blocks
                r.num_blocks = want
        assert self.free >= 0, f"negative free KV blocks: {self.free}"

    def allocate_chunks(self, prefills) -> None:
        """Each ``(request, n)`` grows to hold its computed tokens plus ``n`` (a step's prompt chunks, checked to
        fit)."""
        bs = self.block_size
        for r, n in prefills:
            want = -(-(r.num_computed + n) // bs)
            if want > r.num_blocks:
                self.free -= want - r.num_blocks
                r.num_blocks = want
        assert self.free >= 0, f"negative free KV blocks: {self.free}"

    def reserve(self, req: Request, tokens: int) -> None:
        """``req`` (holding nothing) takes the blocks of ``tokens`` KV tokens that will arrive from elsewhere (a
        prefill instance's transfer): vLLM's ``allocate_slots`` with external computed tokens, before the load."""
        self.allocate(req, tokens)

    def land(self, req: Request, tokens: int) -> None:
        """The KV of ``req``'s first ``tokens`` tokens, reserved by ``reserve``, has arrived (a prefix cache then
        caches its full blocks, vLLM's ``cache_blocks`` after the load)."""

    def release(self, req: Request) -> int:
        """Every block of ``req`` back to the free pool: it finished, was preempted by recompute or evicted."""
        n = req.num_blocks
        self.return_blocks(req)
        req.num_blocks = 0
        assert self.free <= self.total, "KV blocks freed twice"
        return n

    def return_blocks(self, req: Request) -> None:
        """``req``'s blocks go back to the free pool (release and swap-out; a prefix cache keeps cached ones)."""
        self.free += req.num_blocks

    # --- swap -------------------------------------------------------------------------------------------------
    def swap_out(self, req: Request) -> bool:
        """Move ``req``'s blocks to host memory, if they fit there (False: nothing moved)."""
        n = req.num_blocks
        if n > self.swap_free:
            return False
        self.return_blocks(req)
        self.swap_free -= n
        return True

    def swap_in(self, req: Request) -> int:
        """Bring ``req``'s blocks back from host memory (checked to fit); returns how many moved."""
        n = req.num_blocks
        self.swap_free += n
        self.free -= n
        return n

    def drop_swapped(self, req: Request) -> None:
        """A swapped-out request leaves (the run ends): its host blocks are free again."""
        self.swap_free += req.num_blocks
        req.num_blocks = 0

    # --- the decode group ---------------------------------------------------------------------------------------
    def take_group(self, blocks: int) -> None:
        """A decode-group step takes ``blocks`` new blocks for its members at once (written into each member by
        ``settle_member``)."""
        self.free -= blocks

    def settle_member(self, req: Request, tokens: int) -> None:
        """Group member ``req`` holds the blocks of its ``tokens`` KV tokens, which ``take_group`` took."""
        req.num_blocks = -(-tokens // self.block_size)

    # --- checks -----------------------------------------------------------------------------------------------
    def checked_blocks(self, r: Request, group, whole_prompt: bool = False) -> int:
        """The blocks request ``r`` holds (a member of ``group``: those of its exact context, written or not; with
        ``whole_prompt``, a prompt's KV reserved for, or loaded from, a prefill instance), asserted to be those of
        its KV tokens."""
        member = r.lag >= 0
        computed = group.exact(r)[0] if member else r.num_computed
        blocks = self.blocks_for(computed) if member else r.num_blocks
        if whole_prompt:
            computed = r.prompt_len
        assert blocks == self.blocks_for(computed), f"request {r.id} holds {blocks} blocks for {computed} KV tokens"
        return blocks

    def check(self, running, swapped=(), waiting=(), group=None, holding=()) -> None:
        """Every block is held by a running request, by one of ``holding`` (a prompt's KV reserved for, or loaded
        from, a prefill instance: the blocks of its whole prompt) or free (a member of ``group`` holds the blocks of
        its exact context, written or not); swapped requests hold host blocks; other waiting ones hold none."""
        held = 0
        for r in holding:
            assert r.num_blocks == self.blocks_for(r.prompt_len), (
                f"request {r.id} holds {r.num_blocks} blocks for its {r.prompt_len}-token prompt's KV")
            held += r.num_blocks
        for r in running:
            held += self.checked_blocks(r, group)
        assert self.free >= 0, f"negative free KV blocks: {self.free}"
        assert held + self.free == self.total, (
            f"KV block leak: {held} held + {self.free} free != {self.total} total")
        assert sum(r.num_blocks for r in swapped) + self.swap_free == self.swap_total, "swap leak"
        for r in waiting:
            assert (r.num_blocks == 0 and r.num_computed == 0) or (r in holding and r.num_computed == r.prompt_len - 1
                                                                  and not r.num_generated), \
                f"waiting request {r.id} holds KV"

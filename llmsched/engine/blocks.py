"""Paged KV cache accounting: blocks of ``block_size`` tokens, counted per request.

The simulator needs how many blocks each request holds, not which ones, so the
manager counts. It owns the only mutation of ``Request.num_blocks`` and keeps
``free + Σ held == total`` exact (checked by ``check()``).
"""
from __future__ import annotations

from .errors import KVCapacityError
from ..request import Request


class BlockManager:
    __slots__ = ("block_size", "total", "free")

    def __init__(self, total_blocks: int, block_size: int = 16):
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if total_blocks < 1:
            raise ValueError(f"KV cache must hold at least one block, got {total_blocks} blocks")
        self.block_size = block_size
        self.total = total_blocks
        self.free = total_blocks

    @property
    def used(self) -> int:
        return self.total - self.free

    @property
    def utilisation(self) -> float:
        return (self.total - self.free) / self.total

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def extra_blocks(self, req: Request, tokens: int) -> int:
        """Blocks ``req`` must gain to hold ``tokens`` KV tokens."""
        need = -(-tokens // self.block_size) - req.num_blocks
        return need if need > 0 else 0

    def grow(self, req: Request, tokens: int) -> None:
        """Make ``req`` hold enough blocks for ``tokens`` KV tokens."""
        need = -(-tokens // self.block_size) - req.num_blocks
        if need > 0:
            if need > self.free:
                raise KVCapacityError(f"request {req.id} needs {need} more KV blocks, {self.free} free")
            self.free -= need
            req.num_blocks += need

    def take(self, req: Request, blocks: int) -> None:
        """Give ``req`` exactly ``blocks`` blocks (swap-in restores a known count)."""
        if blocks > self.free:
            raise KVCapacityError(f"request {req.id} needs {blocks} KV blocks, {self.free} free")
        self.free -= blocks
        req.num_blocks += blocks

    def release(self, req: Request) -> int:
        n = req.num_blocks
        self.free += n
        req.num_blocks = 0
        assert self.free <= self.total, "KV blocks freed twice"
        return n

    def check(self, holders) -> None:
        held = sum(r.num_blocks for r in holders)
        assert self.free >= 0, f"negative free KV blocks: {self.free}"
        assert held + self.free == self.total, (
            f"KV block leak: {held} held + {self.free} free != {self.total} total")


class SwapSpace:
    """Host memory for preemption by swap, in the same blocks as the GPU cache."""

    __slots__ = ("total", "free")

    def __init__(self, total_blocks: int):
        if total_blocks < 0:
            raise ValueError(f"swap space must be >= 0 blocks, got {total_blocks}")
        self.total = total_blocks
        self.free = total_blocks

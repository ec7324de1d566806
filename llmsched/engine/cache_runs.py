"""Cached KV blocks in runs: what engine/prefix_cache.py keeps per block in vLLM v1's terms, kept per run of
consecutive blocks, so that a Mooncake prompt's ~860 blocks cost a few objects, not 860.

A ``Registration`` is the blocks ``[base, end)`` one request registered as cached while it held them; its
content's pieces (``Content.block_groups``: each piece's key and first block) name them, so a registration is
found by piece, not by block. Its blocks still cached are ``runs``: ``Run`` objects, sorted and disjoint, each a
range ``[lo, hi)`` of blocks with one reference count ``ref``. A run nobody references (``ref == 0``) is a node of
the ``Lru`` list, the free queue's cached part; its blocks are in the queue highest first (a request frees its tail
first), so eviction takes a run's top blocks. Runs are split where a
request references part of one and merged back where neighbours agree again; requests hold ranges
``[registration, lo, hi]`` of positions, never runs, so a split changes nothing a holder keeps.
"""
from __future__ import annotations

from bisect import bisect_right
from operator import attrgetter

from .ring import Ring

LO = attrgetter("lo")


class Registration:
    """Blocks ``[base, end)`` one request registered (see the module docstring): block ``p`` lies in the piece
    ``keys[g]`` for the last ``g`` with ``starts[g] <= p`` (the request's own lists, which may grow past ``end``);
    ``owner``: the request that may still extend it; ``dup``: another registration holds or held one of its
    blocks at once (vLLM keeps both), so its lookups and evictions go block by block."""

    __slots__ = ("keys", "starts", "base", "end", "runs", "owner", "dup")

    def __init__(self, keys: list, starts: list, base: int, end: int, owner):
        self.keys = keys
        self.starts = starts
        self.base = base
        self.end = end
        self.runs: list = []
        self.owner = owner
        self.dup = False

    def live_at(self, p: int) -> bool:
        i = self.run_at(p)
        return i >= 0 and self.runs[i].hi > p

    def holds(self, key: int, p: int) -> bool:
        """Block ``p`` of piece ``key`` is cached here (a piece cut short in one content is followed by another
        piece where a longer one goes on: the same block in another piece is another block)."""
        return self.live_at(p) and self.keys[bisect_right(self.starts, p) - 1] == key

    def piece_span(self, key: int, lo: int, hi: int) -> tuple[int, int]:
        """``[lo, hi)`` cut to this registration's blocks of piece ``key`` (empty if it has none there)."""
        keys, starts = self.keys, self.starts
        g = bisect_right(starts, lo) - 1
        if g < 0 or keys[g] != key:
            return lo, lo
        top = starts[g + 1] if g + 1 < len(starts) else self.end
        return max(lo, self.base), min(hi, top, self.end)

    def has_live(self, lo: int, hi: int) -> bool:
        """Some block of ``[lo, hi)`` is cached."""
        if lo >= hi:
            return False
        i = self.run_at(hi - 1)
        return i >= 0 and self.runs[i].hi > lo

    def run_at(self, p: int) -> int:
        """Index in ``runs`` of the last run starting at or before block ``p`` (-1: none); a registration has a
        run or two, rarely more."""
        runs = self.runs
        i = len(runs) - 1
        if i > 8:
            return bisect_right(runs, p, key=LO) - 1
        while i >= 0 and runs[i].lo > p:
            i -= 1
        return i

    def live_end(self, i: int) -> int:
        """The end of the blocks cached without a gap from run ``i`` on."""
        runs = self.runs
        end = runs[i].hi
        for r in runs[i + 1:]:
            if r.lo != end:
                break
            end = r.hi
        return end

    def cover(self, lo: int, hi: int) -> tuple[int, int]:
        """Split runs so that cached blocks ``[lo, hi)`` are exactly ``runs[i:j]``; returns ``(i, j)``."""
        i = self.run_at(lo)
        if self.runs[i].lo < lo:
            self.split(i, lo)
            i += 1
        j = self.run_at(hi - 1)
        if self.runs[j].hi > hi:
            self.split(j, hi)
        return i, j + 1

    def split(self, i: int, at: int) -> None:
        """Run ``i`` becomes ``[lo, at)`` and ``[at, hi)``; a free run's upper part stays ahead of it in the LRU."""
        r = self.runs[i]
        upper = Run(self, at, r.hi, r.ref)
        r.hi = at
        self.runs.insert(i + 1, upper)
        if r.ref == 0:
            upper.next = r
            upper.prev = r.prev
            r.prev.next = upper
            r.prev = upper

    def merge(self, i: int, j: int) -> None:
        """Join neighbouring runs among ``runs[i-1:j+1]`` that can be one: held ones with the same count, free ones
        whose blocks follow each other in the LRU (the upper run just ahead of the lower)."""
        runs = self.runs
        k = max(i, 1)
        end = min(j + 1, len(runs))
        while k < end:
            a, b = runs[k - 1], runs[k]
            if a.hi == b.lo and a.ref == b.ref and (a.ref or b.next is a):
                if not a.ref:  # b's place in the LRU, then a's blocks: b now spans both
                    a.prev.next = a.next
                    a.next.prev = a.prev
                b.lo = a.lo
                del runs[k - 1]
                end -= 1
            else:
                k += 1


class Run:
    """Cached blocks ``[lo, hi)`` of ``reg`` with ``ref`` holders; a free one is linked in the LRU (prev/next)."""

    __slots__ = ("reg", "lo", "hi", "ref", "prev", "next")

    def __init__(self, reg, lo: int, hi: int, ref: int):
        self.reg = reg
        self.lo, self.hi = lo, hi
        self.ref = ref
        self.prev = self.next = None


class Lru(Ring):
    """The cached free blocks in eviction order: a ring of free runs (``head.next`` is evicted first), and how many
    blocks they hold (``blocks``)."""

    __slots__ = ("blocks",)

    def __init__(self):
        super().__init__(Run(None, 0, 0, -1))
        self.blocks = 0

    def __len__(self) -> int:
        return self.blocks

    def append(self, r: Run) -> None:
        Ring.append(self, r)
        self.blocks += r.hi - r.lo

    def remove(self, r: Run) -> None:
        self.unlink(r)
        self.blocks -= r.hi - r.lo

    runs = Ring.nodes


class Hit:
    """The cached blocks a request would start from: ``segments``, ``(registration, lo, hi)`` ranges covering its
    first ``blocks`` blocks in order."""

    __slots__ = ("segments", "blocks")

    def __init__(self, segments: list, blocks: int):
        self.segments = segments
        self.blocks = blocks

    def __len__(self) -> int:
        return self.blocks

    def prefix(self, n: int) -> "Hit":
        """Its first ``n`` blocks."""
        if n >= self.blocks:
            return self
        out = []
        for reg, lo, hi in self.segments:
            if hi >= n:
                if n > lo:
                    out.append((reg, lo, n))
                break
            out.append((reg, lo, hi))
        return Hit(out, n)

    def runs(self):
        """``(registration, run, lo, hi)``: each run the hit overlaps, cut to the hit's blocks, in order."""
        for reg, lo, hi in self.segments:
            runs = reg.runs
            i = reg.run_at(lo)
            while lo < hi:
                r = runs[i]
                top = r.hi if r.hi < hi else hi
                yield reg, r, lo, top
                lo = top
                i += 1


def agree(keys: list, starts: list, g: int, okeys: list, ostarts: list, p: int, end: int) -> int:
    """The first block from ``p`` (at most ``end``) where two contents' pieces (``keys``/``starts``, block ``p`` in
    piece ``g``; ``okeys``/``ostarts``) differ; they agree at ``p``. Agreeing on a piece key means agreeing on every
    token before the piece, so only piece boundaries need comparing."""
    if okeys is keys:
        return end
    j = bisect_right(ostarts, p) - 1
    n, m = len(starts) - 1, len(ostarts) - 1
    while True:
        if keys[g] != okeys[j]:
            return p
        x = starts[g + 1] if g < n and starts[g + 1] < end else end
        y = ostarts[j + 1] if j < m and ostarts[j + 1] < end else end
        if x != y:
            return x if x < y else y
        if x == end:
            return end
        p = x
        g += 1
        j += 1

"""A straightforward KV tier, one dictionary entry a chunk with its recency rank, pin count and ready flag: the rules
of engine/tier_store.py written the plain way (vLLM 0.32.0's CPU LRU policy: a lowest-rank-first eviction of ready,
unpinned chunks the store does not offer), to check the segment representation against."""
from __future__ import annotations


def chunk_names(keys: list, starts: list, lo: int, hi: int) -> list:
    """``(piece key, chunk)`` of chunks ``[lo, hi)`` of a request with pieces ``keys``/``starts``."""
    out = []
    g = 0
    for p in range(lo, hi):
        while g + 1 < len(starts) and starts[g + 1] <= p:
            g += 1
        out.append((keys[g], p))
    return out


class ReferenceTier:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.chunks: dict = {}  # (key, p) -> [rank, pins, ready]
        self.rank = 0
        self.evicted = 0

    def hits(self, keys, starts, first, most) -> int:
        n = 0
        for name in chunk_names(keys, starts, first, most):
            c = self.chunks.get(name)
            if c is None or not c[2]:
                break
            n += 1
        return n

    def pin(self, keys, starts, lo, hi, by=1) -> None:
        for name in chunk_names(keys, starts, lo, hi):
            if name in self.chunks:
                self.chunks[name][1] += by

    def rerank(self, keys, starts, lo, hi) -> None:
        for name in reversed(chunk_names(keys, starts, lo, hi)):
            if name in self.chunks:
                self.rank += 1
                self.chunks[name][0] = self.rank

    def insert(self, keys, starts, lo, hi, partial=False):
        offered = chunk_names(keys, starts, lo, hi)
        missing = [name for name in offered if name not in self.chunks]
        want = len(missing)
        free = self.capacity - len(self.chunks)
        if want > free:
            protected = set(offered)
            candidates = sorted((c[0], name) for name, c in self.chunks.items()
                                if c[2] and not c[1] and name not in protected)
            take = want - free
            if take > len(candidates):
                if not partial:
                    return None
                take = len(candidates)
                want = free + take
            for _, name in candidates[:take]:
                del self.chunks[name]
                self.evicted += 1
        for name in missing[:want]:
            self.rank += 1
            self.chunks[name] = [self.rank, 0, False]
        return missing[:want]

    def complete(self, names) -> None:
        for name in names:
            if name in self.chunks:
                self.chunks[name][2] = True

    def order(self) -> list:
        """``(name, pins, ready)`` least recent first."""
        return [(name, c[1], c[2]) for name, c in sorted(self.chunks.items(), key=lambda kv: kv[1][0])]

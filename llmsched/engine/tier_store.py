"""One KV tier below the GPU (host memory, a local disk, a remote store): which chunks it holds and which it evicts
first, kept per range of chunks so that a Mooncake prompt's hundreds of chunks cost a few objects.

A chunk is ``chunk_tokens`` tokens of KV (vLLM's offloading connector: one GPU block by default; LMCache: 256
tokens). Two requests share a chunk exactly when their prefix hashes at its end agree, so, as in the GPU cache
(engine/prefix_cache.py), chunk ``p`` of a request is named by the content piece its last token lies in:
``(piece key, p)`` (``Content.block_groups`` at the chunk size). The rules, per chunk, are those of vLLM's CPU
LRU policy (vllm/v1/kv_offload/cpu/policies/lru.py and cpu/manager.py at vLLM 0.32.0):

* every chunk has a recency rank; a store inserts its new chunks with fresh ranks in prefix order (the first
  chunk oldest), ``rerank`` gives a request's chunks fresh ranks with its tail oldest and its head newest
  (vLLM's ``on_request_finished`` and ``touch``, which rank the keys in reverse);
* eviction takes the least recent chunk that is evictable: ready (its store finished) and not pinned (no load
  reading it), never one of the chunks the store being made offers (vLLM's ``protected``);
* a store either fits whole (``partial=False``: vLLM's ``prepare_store`` returns None when eviction cannot make
  room, and nothing is stored) or stores its first chunks while room lasts (``partial=True``: LMCache's
  ``store`` stops at the first chunk it cannot allocate);
* a lookup counts the ready chunks from a position on without a gap (a chunk whose store is still in flight ends
  it: vLLM would defer the request until the store completes, ``LookupResult.HIT_PENDING``; the simulator
  counts the rest as a miss instead).

Representation: a ``Seg`` is a range ``[lo, hi)`` of chunks of one piece key with consecutive ranks, ``up`` when
its lowest chunk is the oldest (a store's order) and not when its highest is (a rerank's order), with one pin
count and one ready flag. The segments are nodes of one linked list in rank order (``head.next`` the least
recent); the table maps a piece key to its segments sorted by ``lo``. Eviction takes whole segments, or the
oldest end of one. ``tests/test_tier_store.py`` checks every answer against a per-chunk implementation of the
rules above (tests/tier_reference.py) on random operations.
"""
from __future__ import annotations

from bisect import bisect_right

from .ring import Ring


class Seg:
    """Chunks ``[lo, hi)`` of piece ``key``, consecutive in rank (``up``: the lowest oldest), ``pins`` loads
    reading them, ``ready`` once stored; a node of the tier's rank list (prev/next)."""

    __slots__ = ("key", "lo", "hi", "up", "pins", "ready", "prev", "next")

    def __init__(self, key: int, lo: int, hi: int, up: bool, pins: int = 0, ready: bool = True):
        self.key = key
        self.lo, self.hi = lo, hi
        self.up = up
        self.pins = pins
        self.ready = ready
        self.prev = self.next = None

    @property
    def evictable(self) -> bool:
        return self.ready and not self.pins


def piece_ranges(keys: list, starts: list, lo: int, hi: int, reverse: bool = False):
    """``(key, a, b)``: the chunks ``[lo, hi)`` of a request split by the piece they lie in (``keys``, ``starts``:
    the request's pieces in chunk units, from ``Content.block_groups``), head first (or tail first)."""
    if lo >= hi:
        return []
    g = bisect_right(starts, lo) - 1
    last = len(starts) - 1
    out = []
    while lo < hi:
        top = starts[g + 1] if g < last and starts[g + 1] < hi else hi
        out.append((keys[g], lo, top))
        lo = top
        g += 1
    if reverse:
        out.reverse()
    return out


def minus_ranges(ranges: list, holes: list) -> list:
    """``ranges`` (``(key, a, b)``, in order) less the chunks of ``holes`` (ranges of the same keys), in order."""
    if not holes:
        return ranges
    out = []
    for key, a, b in ranges:
        p = a
        for _, c, d in sorted(h for h in holes if h[0] == key and h[1] < b and h[2] > a):
            if c > p:
                out.append((key, p, c))
            if d > p:
                p = d
        if p < b:
            out.append((key, p, b))
    return out


def unrecorded_after(holes: list, writing: list, start: int, end: int, offered: int) -> list:
    """The chunks a request has offered only while another store was writing them (``holes``), after it offers
    chunks ``[start, end)`` and finds ``writing`` of them being written; ``offered``: the end of its earlier offers.
    A chunk offered again stays out only if this offer too found it being written."""
    cut = end if end < offered else offered
    keep = [(k, a, b if b < start else start) for k, a, b in holes if a < start]
    keep += [(k, a if a > cut else cut, b) for k, a, b in holes if b > cut]
    old = [(k, a if a > start else start, b if b < cut else cut) for k, a, b in holes if b > start and a < cut]
    again = [(k, a, b if b < cut else cut) for k, a, b in writing if a < cut]
    new = [(k, a if a > offered else offered, b) for k, a, b in writing if b > offered]
    return keep + minus_ranges(old, minus_ranges(old, again)) + new


class TierStore(Ring):
    """A tier of ``capacity`` chunks (see the module docstring); the ring is its rank list."""

    __slots__ = ("capacity", "used", "evictable", "table", "evicted", "inserted")

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"a KV tier must hold at least one chunk, got {capacity}")
        self.capacity = capacity
        self.used = 0  # chunks held, ready or not
        self.evictable = 0  # chunks ready and not pinned
        self.table: dict = {}  # piece key -> its segments, sorted by lo
        super().__init__(Seg(0, 0, 0, True))
        self.evicted = 0  # chunks evicted over the run
        self.inserted = 0  # chunks stored over the run

    segs = Ring.nodes  # the rank list, the first to be evicted first

    # Ring's two moves for segments: compiled, a segment's links are fields, not attributes looked up by name
    def append(self, node: Seg) -> None:
        s = node
        head = self.head
        s.prev = head.prev
        s.next = head
        head.prev.next = s
        head.prev = s

    def unlink(self, node: Seg) -> None:
        s = node
        s.prev.next = s.next
        s.next.prev = s.prev
        s.prev = s.next = None

    # --- the table --------------------------------------------------------------------------------------------
    def overlapping(self, key: int, a: int, b: int) -> list:
        """The segments of ``key`` holding chunks of ``[a, b)``, by position."""
        out = []
        listed = self.table.get(key)
        if listed:
            for s in listed:
                if s.lo < b and s.hi > a:
                    out.append(s)
        return out

    def split(self, seg: Seg, at: int) -> Seg:
        """``seg`` becomes ``[lo, at)`` and a new ``[at, hi)`` (returned), in rank order beside it."""
        upper = Seg(seg.key, at, seg.hi, seg.up, seg.pins, seg.ready)
        seg.hi = at
        if seg.up:  # the lower part is older: the upper one follows it
            upper.prev = seg
            upper.next = seg.next
            seg.next.prev = upper
            seg.next = upper
        else:  # the upper part is older: it goes before
            upper.next = seg
            upper.prev = seg.prev
            seg.prev.next = upper
            seg.prev = upper
        listed = self.table[seg.key]
        listed.insert(listed.index(seg) + 1, upper)
        return upper

    def cover(self, key: int, a: int, b: int) -> list:
        """The segments of ``key`` split so that those holding chunks of ``[a, b)`` lie inside it; returned."""
        out = []
        for s in self.overlapping(key, a, b):
            if s.lo < a:
                s = self.split(s, a)
            if s.hi > b:
                self.split(s, b)
            out.append(s)
        return out

    def drop(self, seg: Seg) -> None:
        """``seg`` leaves the tier's list and table (its chunks counted out by the caller)."""
        self.unlink(seg)
        listed = self.table[seg.key]
        listed.remove(seg)
        if not listed:
            del self.table[seg.key]

    def place(self, seg: Seg) -> None:
        listed = self.table.get(seg.key)
        if listed is None:
            self.table[seg.key] = [seg]
            return
        i = 0
        while i < len(listed) and listed[i].lo < seg.lo:
            i += 1
        listed.insert(i, seg)

    # --- lookups ----------------------------------------------------------------------------------------------
    def hits(self, keys: list, starts: list, first: int, most: int) -> int:
        """Ready chunks held from chunk ``first`` on without a gap, at most up to chunk ``most``."""
        p = first
        for key, a, b in piece_ranges(keys, starts, first, most):
            listed = self.table.get(key)
            if not listed:
                break
            for s in listed:
                if s.lo <= p < s.hi:
                    if not s.ready:
                        return p - first
                    p = s.hi if s.hi < b else b
            if p < b:
                break
        return p - first

    def present(self, keys: list, starts: list, lo: int, hi: int) -> int:
        """Chunks of ``[lo, hi)`` held, ready or not."""
        n = 0
        for key, a, b in piece_ranges(keys, starts, lo, hi):
            for s in self.overlapping(key, a, b):
                n += min(s.hi, b) - max(s.lo, a)
        return n

    def writing(self, offer: list) -> list:
        """The chunks of the ``(key, a, b)`` ranges ``offer`` held but still being written, as such ranges."""
        out = []
        table = self.table
        for key, a, b in offer:
            listed = table.get(key)
            if listed:
                for s in listed:
                    if not s.ready and s.lo < b and s.hi > a:
                        out.append((key, s.lo if s.lo > a else a, s.hi if s.hi < b else b))
        return out

    def first_ready(self, keys: list, starts: list, lo: int, hi: int) -> int:
        """The first chunk of ``[lo, hi)`` held and ready (``hi``: none)."""
        for key, a, b in piece_ranges(keys, starts, lo, hi):
            for s in self.overlapping(key, a, b):
                if s.ready:
                    return max(s.lo, a)
        return hi

    # --- changes ----------------------------------------------------------------------------------------------
    def pin(self, keys: list, starts: list, lo: int, hi: int, by: int = 1) -> None:
        """Loads reading chunks ``[lo, hi)`` (held and ready) start (``by=1``) or end (``by=-1``): pinned chunks are
        not evicted."""
        self.pin_ranges(piece_ranges(keys, starts, lo, hi), by)

    def pin_ranges(self, ranges: list, by: int = 1) -> None:
        """``pin`` of ``(key, a, b)`` ranges."""
        for key, a, b in ranges:
            for s in self.cover(key, a, b):
                was = s.ready and not s.pins
                s.pins += by
                assert s.pins >= 0, "a KV tier chunk unpinned more often than pinned"
                if was != (s.ready and not s.pins):
                    self.evictable += -(s.hi - s.lo) if was else (s.hi - s.lo)

    def rerank(self, keys: list, starts: list, lo: int, hi: int) -> None:
        """The held chunks of ``[lo, hi)`` take fresh ranks, the tail oldest and the head newest."""
        self.rerank_ranges(piece_ranges(keys, starts, lo, hi))

    def rerank_ranges(self, ranges: list) -> None:
        """``rerank`` of ``(key, a, b)`` ranges given head first."""
        for key, a, b in reversed(ranges):
            parts = self.cover(key, a, b)
            for s in reversed(parts):  # the highest first: the oldest of the new ranks
                self.unlink(s)
                s.up = False
                self.append(s)
            for lower, upper in zip(parts, parts[1:]):  # neighbours alike become one: same order, fewer objects
                if lower.hi == upper.lo and lower.pins == upper.pins and lower.ready == upper.ready:
                    upper.lo = lower.lo
                    self.drop(lower)

    def insert(self, keys: list, starts: list, lo: int, hi: int, partial: bool = False) -> list | None:
        """A store offering chunks ``[lo, hi)``: those not held are inserted, in flight (not ready), with fresh
        ranks in prefix order, evicting the least recent evictable chunks outside the offer to make room. Whole
        or nothing (None: no room, nothing changes), or with ``partial`` the first that fit. Returns the inserted
        ``(key, a, b)`` ranges."""
        return self.insert_ranges(piece_ranges(keys, starts, lo, hi), partial)

    def insert_ranges(self, offer: list, partial: bool = False) -> list | None:
        """``insert`` of the ``(key, a, b)`` ranges ``offer``, head first."""
        missing = []
        want = 0
        held = False  # some chunk of the offer is held already (protected from this store's evictions)
        table = self.table
        for key, a, b in offer:
            listed = table.get(key)
            if listed is None:
                missing.append((key, a, b))
                want += b - a
                continue
            p = a
            for s in listed:
                if s.lo < b and s.hi > a:
                    held = True
                    if s.lo > p:
                        missing.append((key, p, s.lo))
                        want += s.lo - p
                    p = s.hi
            if p < b:
                missing.append((key, p, b))
                want += b - p
        if not want:
            return []
        free = self.capacity - self.used
        if want > free:
            take = want - free
            held = held and self.would_evict(offer, take)
            if held:
                self.pin_ranges(offer)  # the offer's own chunks are protected
            room = self.evictable
            if take > room:
                if not partial:
                    if held:
                        self.pin_ranges(offer, -1)
                    return None
                take = room
                want = free + room
            self.evict(take)
            if held:
                self.pin_ranges(offer, -1)
        out = []
        head = self.head
        stored = 0
        for key, a, b in missing:
            if stored >= want:
                break
            if b - a > want - stored:
                b = a + want - stored
            seg = Seg(key, a, b, True, 0, False)
            listed = table.get(key)
            if listed is None:
                table[key] = [seg]
            else:
                self.place(seg)
            seg.prev = head.prev  # newest: the tail of the rank list
            seg.next = head
            head.prev.next = seg
            head.prev = seg
            out.append((key, a, b))
            stored += b - a
        self.used += stored
        self.inserted += stored
        return out

    def would_evict(self, offer: list, take: int) -> bool:
        """Whether evicting ``take`` chunks without protection would reach a segment holding a chunk of ``offer``
        (else no protection is needed: eviction stops before any)."""
        spans: dict = {}
        for key, a, b in offer:
            spans.setdefault(key, []).append((a, b))
        s = self.head.next
        while take > 0 and s is not self.head:
            if s.evictable:
                for a, b in spans.get(s.key, ()):
                    if s.lo < b and s.hi > a:
                        return True
                take -= s.hi - s.lo
            s = s.next
        return False

    def complete(self, ranges: list) -> None:
        """The stores of ``ranges`` (from ``insert``) finished: their chunks are ready."""
        for key, a, b in ranges:
            listed = self.table.get(key)
            if listed is not None and len(listed) == 1:  # commonly the segment the store made, whole
                s = listed[0]
                if s.lo == a and s.hi == b:
                    if not s.ready:
                        s.ready = True
                        if not s.pins:
                            self.evictable += b - a
                    continue
            for s in self.cover(key, a, b):
                if not s.ready:
                    s.ready = True
                    if not s.pins:
                        self.evictable += s.hi - s.lo

    def evict(self, n: int) -> None:
        """The ``n`` least recent evictable chunks leave (the caller checked there are as many)."""
        s = self.head.next
        while n > 0:
            assert s is not self.head, "KV tier: evicting more chunks than are evictable"
            nxt = s.next
            if s.evictable:
                size = s.hi - s.lo
                if size <= n:
                    self.drop(s)
                    n -= size
                    self.used -= size
                    self.evictable -= size
                    self.evicted += size
                else:
                    if s.up:
                        s.lo += n
                    else:
                        s.hi -= n
                    self.used -= n
                    self.evictable -= n
                    self.evicted += n
                    n = 0
            s = nxt

    # --- checks -----------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Counts agree with the segments; each key's segments are sorted and disjoint; list and table agree."""
        used = evictable = 0
        listed = 0
        for s in self.segs():
            assert s.lo < s.hi, f"an empty KV tier segment [{s.lo}, {s.hi})"
            assert s in self.table.get(s.key, ()), "a KV tier segment missing from the table"
            used += s.hi - s.lo
            evictable += (s.hi - s.lo) if s.evictable else 0
            listed += 1
        assert listed == sum(len(v) for v in self.table.values()), "KV tier table and rank list disagree"
        for segs in self.table.values():
            for x, y in zip(segs, segs[1:]):
                assert x.hi <= y.lo, f"KV tier segments overlap: [{x.lo}, {x.hi}) and [{y.lo}, {y.hi})"
        assert used == self.used <= self.capacity, f"KV tier holds {used} chunks, counts {self.used}"
        assert evictable == self.evictable, f"KV tier: {evictable} evictable chunks, counts {self.evictable}"

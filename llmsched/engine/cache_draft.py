"""What one step's scheduling has done to the prefix cache so far, before anything is taken: the lookups of a
step's admissions in vLLM's order.

vLLM 0.32's ``Scheduler.schedule`` (vllm/v1/core/sched/scheduler.py) changes the cache while it schedules: the
running loop first (``KVCacheManager.allocate_slots`` per request: new blocks taken from the free queue's front,
evicting cached blocks once the uncached ones are gone, and a prompt chunk's full blocks cached at once), then the
waiting loop request by request (``get_computed_blocks``, then ``allocate_slots``: the hit's blocks touched out of
the free queue, new blocks taken, the chunk's full blocks cached). So an admission's lookup sees the evictions of
every allocation before it in the step, and the blocks the step's earlier chunks cached, even those no step has
computed yet. The replica's policy plans before anything is taken, and the replica launches afterwards: a
``CacheDraft`` replays those changes without making them, so that a policy's lookups (``ReplicaView``) and the
launch's sizing (``plan_check.fit_hits_in_order``) see what vLLM's would, and the launch then makes them in the
same order (``Replica.allocate_in_order``), for a policy that declares ``looks_up_in_order`` (vllm-chunked).

* ``take(m)``: ``m`` new blocks: the uncached free ones first, then the LRU's blocks in its order (a free run's top
  blocks first), skipping blocks an earlier admission of the step references (``taken``); those passed are
  evicted for the rest of the step.
* ``register(req, tokens)``: ``req``'s full blocks up to ``tokens`` become cached (a chunk scheduled this step).
* ``lookup(req)``: the real lookup (``PrefixCachingKVManager.walk``), cut at the first block the step evicted, then
  extended by the blocks the step's chunks cached that continue it (each a block the request shares with the
  chunk's request, by the piece keys both contents name it with). The extension is not yet in the cache: the
  ``Hit`` counts its blocks past its segments, and costs no free block (its request references them).

``taken`` is the plan's claims as ``plan_check.fit_hits_in_order`` keeps them: registration -> ``(lo, hi)``
ranges of free cached blocks an admission of this step references (``PrefixCachingKVManager.size_admission`` adds
to it).
"""
from __future__ import annotations

from bisect import bisect_right

from .cache_runs import Hit, agree


class CacheDraft:
    __slots__ = ("kv", "anon", "run", "pos", "bound", "taken", "planned", "version", "memo")

    def __init__(self, kv):
        self.kv = kv
        self.anon = kv.anon_free  # uncached free blocks not yet taken by the step
        self.run = kv.lru.head.next  # the LRU run being evicted, and the next block of it considered, plus one
        self.pos = self.run.hi
        self.bound: dict = {}  # a run the step's evictions reached -> its lowest block passed
        self.taken: dict = {}  # registration -> (lo, hi) ranges of free cached blocks admissions reference
        self.planned: list = []  # [request, full blocks it caches this step], in the order scheduled
        self.version = 0
        self.memo: dict = {}  # request -> (version, hit): a policy asks again for one request

    # --- the step's changes -------------------------------------------------------------------------------------
    def take(self, m: int) -> None:
        """``m`` new blocks (see the module docstring); more than are free takes what there is (the launch's
        overflow handling decides then)."""
        if m <= 0:
            return
        a = self.anon
        if m <= a:
            self.anon = a - m
            return
        m -= a
        self.anon = 0
        self.version += 1
        head = self.kv.lru.head
        run, pos = self.run, self.pos
        taken, bound = self.taken, self.bound
        while m and run is not head:
            if pos <= run.lo:
                run = run.next
                pos = run.hi
                continue
            ranges = taken.get(run.reg)
            if not ranges:
                k = m if m < pos - run.lo else pos - run.lo
                pos -= k
                m -= k
            else:
                pos -= 1
                if not any(lo <= pos < hi for lo, hi in ranges):
                    m -= 1
            bound[run] = pos
        self.run, self.pos = run, pos

    def register(self, req, tokens: int) -> None:
        """``req``'s blocks full by its first ``tokens`` tokens are cached from now on in the step."""
        if req.content is None:
            return
        full = min(tokens, req.num_tokens) // self.kv.block_size
        if full:
            self.planned.append((req, full))
            self.version += 1

    def claim(self, hit: Hit) -> None:
        """An admission references ``hit``'s blocks: its free ones are the step's (counted once, never evicted)."""
        taken = self.taken
        for reg, r, lo, top in hit.runs():
            if r.ref == 0:
                taken.setdefault(reg, []).append((lo, top))
        self.version += 1

    def admit(self, req, n: int) -> None:
        """Waiting ``req`` is admitted with a chunk of ``n`` tokens after its hit (vLLM's waiting loop: touch the
        hit, take the chunk's new blocks, cache its full blocks)."""
        hit = self.lookup(req)
        self.claim(hit)
        bs = self.kv.block_size
        self.take(-(-n // bs))
        self.register(req, len(hit) * bs + n)

    # --- reads --------------------------------------------------------------------------------------------------
    def claimed(self, reg, b: int) -> bool:
        ranges = self.taken.get(reg)
        return ranges is not None and any(lo <= b < hi for lo, hi in ranges)

    def unreferenced(self, hit: Hit) -> int:
        """Free blocks admitting from ``hit`` takes out of the pool: its free cached blocks no admission of the
        step references yet (the extension past its segments is referenced by the chunk that caches it)."""
        n = 0
        for reg, r, lo, top in hit.runs():
            if r.ref == 0:
                ranges = self.taken.get(reg)
                n += (top - lo) if not ranges else sum(1 for b in range(lo, top)
                                                        if not any(a <= b < c for a, c in ranges))
        return n

    def lookup(self, req) -> Hit:
        """``req``'s hit as vLLM's ``get_computed_blocks`` would find it at this point of the step."""
        known = self.memo.get(req)
        if known is not None and known[0] == self.version:
            return known[1]
        hit = self._lookup(req)
        self.memo[req] = (self.version, hit)
        return hit

    def _lookup(self, req) -> Hit:
        kv = self.kv
        hit = kv.lookup(req)
        if not self.bound and not self.planned:
            return hit
        most = (req.num_tokens - 1) // kv.block_size
        if most <= 0 or req.content is None:
            return hit
        if self.bound:
            hit = self.cut(hit)
        p = len(hit)
        if p >= most or not self.planned:
            return hit
        keys, starts, _ = kv.request_pieces(req, most)
        end = p
        moved = True
        while moved and end < most:
            moved = False
            g = bisect_right(starts, end) - 1
            for other, full in self.planned:
                if full <= end or other is req:
                    continue
                okeys, ostarts, _ = kv.request_pieces(other, full)
                e = agree(keys, starts, g, okeys, ostarts, end, full if full < most else most)
                if e > end:
                    end = e
                    moved = True
                    break
        return Hit(hit.segments, end) if end > p else hit

    def cut(self, hit: Hit) -> Hit:
        """``hit`` up to its first block this step evicted."""
        bound = self.bound
        for reg, r, lo, top in hit.runs():
            b = bound.get(r) if r.ref == 0 else None
            if b is None or b >= top:
                continue
            q = lo if lo > b else b
            while q < top and self.claimed(reg, q):
                q += 1
            if q < top:  # a registration's block numbers are the request's (a block's hash names its place)
                return hit.prefix(q)
        return hit


"""vLLM v1's automatic prefix caching inside the KV owner: full blocks named by their prefix hash, shared by
reference count, kept cached when freed and evicted only when an allocation needs their space.

``PrefixCachingKVManager`` is the KV cache manager of a replica whose requests carry content
(``Request.content``); it keeps the counting manager's verbs and meaning (``free`` is every block no request
references, cached or not, as vLLM's ``get_num_free_blocks``) and adds what vLLM v1's ``BlockPool`` and
``KVCacheManager`` do (vllm/v1/core/block_pool.py, kv_cache_manager.py, kv_cache_utils.py, read at vLLM 0.32):

* a request's full blocks are registered under the prefix hash at the block's end (``Content.block_hashes``, a
  chain like vLLM's parent hash + tokens) as soon as a step's allocation covers them (``cache_full_blocks``); two
  blocks may carry one hash (vLLM does not de-duplicate), a lookup takes the first registered still cached;
* a waiting request's hit is its longest run of cached leading blocks, at most ``num_tokens - 1`` tokens (the
  last token is always computed: ``get_computed_blocks``); admitting it references those blocks (``touch``), a
  block nobody referenced leaving the free pool;
* freeing a request returns its blocks in reverse order (its tail first, ``free``): a block without a hash to the
  front of the free queue, a cached one to the back (LRU); an allocation takes the front first, so a cached
  block is evicted (its hash forgotten) only when no uncached free block is left (``get_new_blocks``).

Blocks without a hash are interchangeable, so they are counted (``anon_free``). Cached blocks are kept in runs
(engine/cache_runs.py: consecutive blocks of one request with one reference count, split and merged as requests
share them) and found by the content piece they lie in: block ``p`` whose last token is in a piece with key ``K``
(``Content.block_groups``) has the hash ``H(K, offset)``, so "is this hash cached" is "does a registration listed
under ``K`` hold block ``p``", and a Mooncake prompt's ~860 blocks cost ~27 table entries and a few runs, not 860
blocks each hashed, registered, freed and evicted. The table holds at most one entry per cached block, whatever
the length of the trace. Where two registrations hold a block of one hash at once (vLLM keeps both, and a lookup
takes the first registered), the order is kept per block (``dups``), for those registrations only.

A decode's newly full block is registered when its request releases its blocks (finish, preemption, swap) rather
than at the step that fills it: no lookup can tell the difference, because only a later request whose content
continues this one's reply (a session's next turn) can hit it, and that request arrives after the reply.
Preemption by swap releases the blocks on the GPU as recompute does and keeps a full copy in host memory; the
swap-in references again the leading blocks still cached and takes new blocks for the rest.
"""
from __future__ import annotations

from bisect import bisect_right

from .cache_draft import CacheDraft
from .cache_runs import Hit, Lru, Registration, Run, agree
from .errors import KVCapacityError
from .kv_cache import KVCacheManager
from ..request import Request, Status

NO_HIT = Hit([], 0)


class PrefixCachingKVManager(KVCacheManager):
    """The KV cache manager with vLLM v1's prefix cache (see the module docstring)."""

    __slots__ = ("cached", "dups", "lru", "anon_free", "held", "pieces", "hit_tokens", "step_hits", "tiers")

    def __init__(self, total_blocks: int, block_size: int = 16, swap_blocks: int = 0, tiers=None):
        super().__init__(total_blocks, block_size, swap_blocks)
        # the KV tiers below the GPU (engine/kv_tiers.py: a KVTiers, this manager's component), or None
        self.tiers = tiers
        if tiers is not None and tiers.ct == block_size:  # chunks of one block: the tiers name them by its pieces
            tiers.pieces_of = self.request_pieces
        self.cached: dict = {}  # piece key -> the registrations holding cached blocks in that piece
        self.dups: dict = {}  # (piece key, block) -> registrations holding that block at once, first registered first
        self.lru = Lru()  # the cached blocks nobody references, evicted first
        self.anon_free = total_blocks  # free blocks without a hash (the front of vLLM's free queue)
        self.held: dict = {}  # request -> its leading cached blocks, [registration, lo, hi] ranges in order
        self.pieces: dict = {}  # request -> [piece keys, their first blocks, blocks covered] (dropped on release)
        self.hit_tokens = 0  # tokens found cached at admissions, over the run
        self.step_hits = 0  # of the step being launched

    def draft(self) -> CacheDraft:
        """A step's scheduling against this cache, replayed without changing it (engine/cache_draft.py)."""
        return CacheDraft(self)

    # --- lookups ----------------------------------------------------------------------------------------------
    def request_pieces(self, req: Request, blocks: int, keep: bool = True) -> list:
        """``[keys, starts, n]``: the pieces ``req``'s first ``n >= blocks`` full blocks lie in (kept for the
        request while it is here)."""
        known = self.pieces.get(req) if keep else None
        if known is None:
            known = [[], [], 0]
            if keep:
                self.pieces[req] = known
        if known[2] < blocks:
            req.content.block_groups(self.block_size, known[2], blocks, known[0], known[1])
            known[2] = blocks
        return known

    def lookup(self, req: Request, keep: bool = True) -> Hit:
        """The cached blocks ``req`` would start from: its longest run of cached leading full blocks, short of its
        last token (vLLM's ``get_computed_blocks``); empty for a request without content."""
        if req.content is None:
            return NO_HIT
        most = (req.num_tokens - 1) // self.block_size
        if most <= 0:
            return NO_HIT
        return self.walk(self.request_pieces(req, most, keep), most)

    def holder(self, key: int, p: int, regs: list):
        """The registration whose block ``p`` (in piece ``key``) a lookup takes: the first registered still
        cached; None if none of ``regs`` (those listed under ``key``) holds it."""
        if len(regs) == 1:
            return regs[0] if regs[0].holds(key, p) else None
        rec = self.dups.get((key, p))
        if rec is not None:
            return rec[0]
        for reg in regs:
            if reg.holds(key, p):
                return reg
        return None

    def walk(self, pieces: list, most: int) -> Hit:
        """The leading blocks among the first ``most`` of a request (its ``pieces``) that are cached, each the
        first registered block of its hash, as ranges of registrations: a registration's blocks from one on are
        the request's while they are cached without a gap and lie in the same pieces."""
        keys, starts = pieces[0], pieces[1]
        cached = self.cached
        last = len(starts) - 1
        segments, p, g = [], 0, 0
        while p < most:
            while g < last and starts[g + 1] <= p:
                g += 1
            regs = cached.get(keys[g])
            if regs is None:
                break
            reg = self.holder(keys[g], p, regs)
            if reg is None:
                break
            end = reg.live_end(reg.run_at(p))
            end = agree_end(keys, starts, g, reg, p, end if end < most else most)
            if reg.dup:  # another registration may come first for a later block
                q, h = p + 1, g
                while q < end:
                    while h < last and starts[h + 1] <= q:
                        h += 1
                    rec = self.dups.get((keys[h], q))
                    if rec is not None and rec[0] is not reg:
                        break
                    q += 1
                end = q
            segments.append((reg, p, end))
            p = end
        return Hit(segments, p) if segments else NO_HIT

    def cached_tokens(self, req: Request, keep: bool = False) -> int:
        """Tokens of ``req``'s prompt this cache holds now (a whole number of blocks, never the whole prompt);
        ``keep``: remember its pieces (a request queued here; a router's probe keeps nothing)."""
        return len(self.lookup(req, keep)) * self.block_size

    def report(self) -> dict:
        """What a cache report tells a router: per piece key, the cached blocks there as sorted ``(lo, hi)``
        ranges (a copy: later changes do not show)."""
        out = {}
        for key, regs in self.cached.items():
            ranges = []
            for reg in regs:
                g = reg.keys.index(key)
                lo = max(reg.starts[g], reg.base)
                hi = min(reg.starts[g + 1], reg.end) if g + 1 < len(reg.starts) else reg.end
                ranges += [(max(r.lo, lo), min(r.hi, hi)) for r in reg.runs if r.lo < hi and r.hi > lo]
            out[key] = sorted(ranges)
        return out

    def reported_tokens(self, report: dict, req: Request) -> int:
        """``cached_tokens`` as ``report`` (of this cache, some time ago) shows it."""
        if req.content is None:
            return 0
        most = (req.num_tokens - 1) // self.block_size
        if most <= 0:
            return 0
        keys, starts, _ = self.request_pieces(req, most, keep=False)
        p = 0
        for g, key in enumerate(keys):
            top = starts[g + 1] if g + 1 < len(starts) else most
            for lo, hi in report.get(key, ()):  # sorted: ranges that follow each other chain
                if lo <= p < hi:
                    p = hi
            if p > top:
                p = top
            if p < top:
                break
        return p * self.block_size

    def discard(self, req: Request) -> None:
        """``req`` leaves without releasing blocks (rejected while waiting): its pieces are dropped."""
        self.pieces.pop(req, None)
        if self.tiers is not None:
            self.tiers.forget(req)

    def unreferenced(self, hit: Hit, claimed: set | None = None) -> int:
        """Blocks of ``hit`` nobody references: admitting it takes them out of the free pool; those in ``claimed``
        (``claim``: an earlier admission of the same plan takes them) excepted."""
        if not claimed:
            return sum(top - lo for _, r, lo, top in hit.runs() if r.ref == 0)
        return sum(1 for reg, r, lo, top in hit.runs() if r.ref == 0
                   for b in range(lo, top) if (id(reg), b) not in claimed)

    def claim(self, hit: Hit, claimed: set) -> None:
        """Add ``hit``'s blocks nobody references to ``claimed`` (as ``(id(registration), block)``)."""
        for reg, r, lo, top in hit.runs():
            if r.ref == 0:
                claimed.update((id(reg), b) for b in range(lo, top))

    def size_admission(self, hit: Hit, n: int, remaining: int, taken: dict, fitted: bool) -> tuple:
        """An admission of a request with ``remaining`` tokens to compute, planned as a chunk of ``n`` from its
        cached blocks ``hit``: ``(blocks used, chunk, free blocks it costs)``. It costs the new blocks of its chunk
        and the used blocks nobody references (they leave the free pool), each counted once per plan (``taken``:
        registration -> the ``(lo, hi)`` ranges of free blocks earlier admissions of the plan used). Unfitted, it
        uses the whole hit and computes up to ``n`` tokens after it; ``fitted``, it costs at most the
        ``ceil(n / block_size)`` blocks a policy counting without a cache planned (fewer cached blocks, then a
        shorter chunk), so a plan within the free blocks by that count stays within them."""
        bs = self.block_size
        budget = -(-n // bs) if fitted else len(hit) + -(-n // bs)
        reclaim = used = 0
        claimed = []
        whole = True
        for reg, r, lo, top in hit.runs():
            if r.ref:
                used += top - lo
                continue
            ranges = taken.get(reg) if taken else None
            if ranges:
                stop = lo
                while stop < top:
                    if not any(a <= stop < b for a, b in ranges):
                        if reclaim + 1 >= budget:  # one block at least is left for the chunk
                            break
                        reclaim += 1
                    stop += 1
            else:
                room = budget - 1 - reclaim
                stop = top if top - lo <= room else lo + (room if room > 0 else 0)
                reclaim += stop - lo
            used += stop - lo
            if stop > lo:
                claimed.append((reg, lo, stop))
            if stop < top:
                whole = False
                break
        if whole and used < hit.blocks:  # blocks a chunk of this step caches (engine/cache_draft.py): referenced
            used = hit.blocks
        for reg, lo, stop in claimed:
            taken.setdefault(reg, []).append((lo, stop))
        m = min(n, remaining - used * bs, (budget - reclaim) * bs)
        return hit.prefix(used), m, -(-m // bs) + reclaim

    def frees(self, req: Request) -> int:
        """Blocks releasing ``req`` returns to the free pool: those no other request references."""
        shared = 0
        for reg, lo, hi in self.held.get(req, ()):
            runs = reg.runs
            i = reg.run_at(lo)
            while i < len(runs) and runs[i].lo < hi:
                r = runs[i]
                if r.ref > 1:
                    shared += (r.hi if r.hi < hi else hi) - (r.lo if r.lo > lo else lo)
                i += 1
        return req.num_blocks - shared

    # --- references -------------------------------------------------------------------------------------------
    def reference(self, segments) -> list:
        """One more holder for each range of ``segments``; cached blocks nobody referenced leave the free pool.
        Returns the ranges, as a holder keeps them."""
        lru = self.lru
        held = []
        for reg, lo, hi in segments:
            i, j = reg.cover(lo, hi)
            for r in reg.runs[i:j]:
                if r.ref == 0:
                    lru.remove(r)
                    self.free -= r.hi - r.lo
                r.ref += 1
            reg.merge(i, j)
            held.append([reg, lo, hi])
        return held

    def admit(self, req: Request, hit: Hit) -> None:
        """``req`` (holding nothing) references ``hit``'s blocks: its first ``len(hit)`` blocks are computed."""
        self.held[req] = self.reference(hit.segments)
        n = len(hit)
        req.num_blocks = n
        req.num_computed = n * self.block_size
        self.hit_tokens += n * self.block_size
        self.step_hits += n * self.block_size

    # --- taking and returning blocks --------------------------------------------------------------------------
    def take(self, m: int) -> None:
        """``m`` free blocks leave the pool: uncached ones first, then the least recently freed cached ones (a
        free run's top blocks first), which leave the table."""
        a = self.anon_free
        if m <= a:
            self.anon_free = a - m
        else:
            if m > self.free:
                raise KVCapacityError(f"{m} KV blocks wanted, {self.free} free")
            self.anon_free = 0
            lru = self.lru
            k = m - a
            while k:
                r = lru.head.next
                size = r.hi - r.lo
                if size <= k:
                    lru.remove(r)
                    r.reg.runs.remove(r)
                    self.forget(r.reg, r.lo, r.hi)
                    k -= size
                else:
                    r.hi -= k
                    lru.blocks -= k
                    self.forget(r.reg, r.hi, r.hi + k)
                    k = 0
        self.free -= m

    def forget(self, reg: Registration, lo: int, hi: int) -> None:
        """Blocks ``[lo, hi)`` of ``reg``, no longer cached, leave the table: ``reg`` stays listed under a piece
        while it holds a cached block there."""
        keys, starts, cached = reg.keys, reg.starts, self.cached
        g = bisect_right(starts, lo) - 1
        last = len(starts) - 1
        base, end = reg.base, reg.end
        while lo < hi:
            key = keys[g]
            piece_lo = starts[g] if starts[g] > base else base
            piece_hi = starts[g + 1] if g < last and starts[g + 1] < end else end
            top = piece_hi if piece_hi < hi else hi
            if reg.dup:
                dups = self.dups
                for q in range(lo, top):
                    rec = dups.get((key, q))
                    if rec is not None:
                        rec.remove(reg)
                        if len(rec) == 1:
                            del dups[(key, q)]
            # a piece the evicted blocks cover whole has no cached block left here
            if (lo <= piece_lo and piece_hi <= hi) or not reg.has_live(piece_lo, piece_hi):
                regs = cached[key]
                if len(regs) == 1:
                    del cached[key]
                else:
                    regs.remove(reg)
            lo = top
            g += 1

    def register(self, req: Request, tokens: int) -> None:
        """``req``'s blocks full by its first ``tokens`` tokens become cached: listed under their pieces."""
        full = tokens // self.block_size
        held = self.held.get(req)
        if held is None:
            held = self.held[req] = []
        k = held[-1][2] if held else 0
        if full <= k:
            return
        pieces = self.request_pieces(req, full)
        last = held[-1] if held else None
        if last is not None and last[0].owner is req:  # its own registration grows
            reg = last[0]
            reg.end = full
            r = reg.runs[-1]
            if r.hi == k and r.ref == 1:
                r.hi = full
            else:
                reg.runs.append(Run(reg, k, full, 1))
            last[2] = full
        else:
            reg = Registration(pieces[0], pieces[1], k, full, req)
            reg.runs.append(Run(reg, k, full, 1))
            held.append([reg, k, full])
        cached = self.cached
        keys, starts = pieces[0], pieces[1]
        g = bisect_right(starts, k) - 1
        last = len(starts) - 1
        lo = k
        while lo < full:
            key = keys[g]
            top = starts[g + 1] if g < last and starts[g + 1] < full else full
            regs = cached.get(key)
            if regs is None:
                cached[key] = [reg]
            else:
                if len(regs) > 1 or regs[0] is not reg:
                    self.add_duplicates(reg, key, lo, top, regs)
                if reg not in regs:
                    regs.append(reg)
            lo = top
            g += 1

    def add_duplicates(self, reg: Registration, key: int, lo: int, hi: int, regs: list) -> None:
        """``reg``'s new blocks ``[lo, hi)`` in piece ``key`` where another registration listed there (``regs``)
        holds blocks of the same hashes: vLLM keeps both, a lookup takes the first registered, so the order is
        kept per block and both registrations go block by block from now on."""
        others = [x for x in regs if x is not reg and x.has_live(*x.piece_span(key, lo, hi))]
        if not others:
            return
        dups = self.dups
        reg.dup = True
        for q in range(lo, hi):
            rec = dups.get((key, q))
            if rec is not None:
                rec.append(reg)
                continue
            for x in others:
                if x.holds(key, q):
                    x.dup = True
                    dups[(key, q)] = [x, reg]
                    break

    def return_blocks(self, req: Request) -> None:
        """``req`` lets go of its blocks (it finished, was preempted or swapped out): its full blocks are
        registered, then its references dropped, its tail first: uncached blocks to the front of the free pool,
        cached ones nobody else references to the back of the LRU."""
        if req.content is not None:
            self.register(req, req.num_computed)
        held = self.held.pop(req, ())
        anon = req.num_blocks - (held[-1][2] if held else 0)
        self.anon_free += anon
        freed = anon
        lru = self.lru
        for reg, lo, hi in reversed(held):
            if reg.owner is req:
                reg.owner = None
            i, j = reg.cover(lo, hi)
            runs = reg.runs
            for x in range(j - 1, i - 1, -1):
                r = runs[x]
                r.ref -= 1
                if r.ref == 0:
                    lru.append(r)
                    freed += r.hi - r.lo
            reg.merge(i, j)
        self.free += freed
        if self.tiers is not None:
            self.tiers.released(req, req.status is Status.FINISHED)
        self.pieces.pop(req, None)

    # --- loads from the tiers below the GPU (engine/kv_tiers.py) -------------------------------------------------
    def take_loaded(self, req: Request, blocks: int) -> None:
        """``req`` (admitted from its cached blocks) takes ``blocks`` new blocks that a tier's load fills: its KV
        tokens grow by them, registered as cached when they land (``loaded``, or its chunk's allocation)."""
        self.take(blocks)
        req.num_blocks += blocks
        req.num_computed += blocks * self.block_size

    def loaded(self, req: Request) -> None:
        """``req``'s load landed: its full blocks are registered (vLLM caches them when the transfer finishes); a load
        of its whole prompt leaves the last token to compute (vLLM's ``_update_waiting_for_remote_kv``). A
        request that waited for others' loads of its chunks lets its GPU hit go and is looked up afresh (vLLM
        deferred its lookup: it held nothing)."""
        if self.tiers.take_waited(req):
            self.release(req)
            req.num_computed = 0
            req.tier_cached = None
            return
        self.register(req, req.num_computed)
        if req.num_computed >= req.num_tokens:  # the whole prompt loaded: its last token is computed again
            req.num_computed = req.num_tokens - 1

    # --- the counting manager's verbs ---------------------------------------------------------------------------
    def allocate(self, req: Request, tokens: int) -> None:
        need = -(-tokens // self.block_size) - req.num_blocks
        if need > 0:
            if need > self.free:
                raise KVCapacityError(f"request {req.id} needs {need} more KV blocks, {self.free} free")
            self.take(need)
            req.num_blocks += need
        if req.content is not None:
            self.register(req, min(tokens, req.num_tokens))

    def reserve(self, req: Request, tokens: int) -> None:
        """Blocks for KV that will arrive: taken uncached (a block is cached once its KV is there: ``land``)."""
        need = -(-tokens // self.block_size) - req.num_blocks
        if need > self.free:
            raise KVCapacityError(f"request {req.id} needs {need} more KV blocks, {self.free} free")
        self.take(need)
        req.num_blocks += need

    def land(self, req: Request, tokens: int) -> None:
        if req.content is not None:
            self.register(req, min(tokens, req.num_tokens))

    def allocate_decodes(self, reqs) -> None:
        bs = self.block_size
        for r in reqs:
            want = -(-(r.num_computed + 1) // bs)
            if want > r.num_blocks:
                self.take(want - r.num_blocks)
                r.num_blocks = want

    def allocate_chunks(self, prefills) -> None:
        bs = self.block_size
        for r, n in prefills:
            tokens = r.num_computed + n
            want = -(-tokens // bs)
            if want > r.num_blocks:
                self.take(want - r.num_blocks)
                r.num_blocks = want
            if r.content is not None:
                self.register(r, tokens)

    def swap_in(self, req: Request) -> int:
        """Bring ``req``'s blocks back: its leading blocks still cached are referenced again, the rest taken anew
        (at most ``num_blocks`` free blocks, as the caller checked)."""
        n = req.num_blocks
        self.swap_free += n
        hit = NO_HIT
        if req.content is not None:
            most = req.num_computed // self.block_size
            hit = self.walk(self.request_pieces(req, most), most) if most > 0 else NO_HIT
        self.held[req] = self.reference(hit.segments)
        self.take(n - len(hit))
        if req.content is not None:
            self.register(req, req.num_computed)
        return n

    def take_group(self, blocks: int) -> None:
        self.take(blocks)

    # --- checks -----------------------------------------------------------------------------------------------
    def check(self, running, swapped=(), waiting=(), group=None, holding=()) -> None:
        """Every block is referenced or free, each shared block counted once; each cached block's count is its
        holders'; a request holds its leading cached blocks without a gap; the free pool is the uncached free
        blocks and the LRU's runs; runs are disjoint and sorted, free ones in the LRU; the table lists exactly the
        registrations holding cached blocks in each piece, and the first-registered order of every block two of
        them hold."""
        refs: dict = {}
        anon = 0
        regs: dict = {}
        for r in [*running, *holding]:
            blocks = self.checked_blocks(r, group, r in holding)
            p = 0
            for reg, lo, hi in self.held.get(r, ()):
                assert lo == p < hi, f"request {r.id} holds cached blocks [{lo}, {hi}) after {p}"
                p = hi
                regs[id(reg)] = reg
                for b in range(lo, hi):
                    refs[(id(reg), b)] = refs.get((id(reg), b), 0) + 1
            assert p <= blocks, f"request {r.id} holds {p} cached blocks of {blocks}"
            anon += blocks - p
        lru_blocks = 0
        for run in self.lru.runs():
            assert run.ref == 0 and run.hi > run.lo, f"a free run holds [{run.lo}, {run.hi}) with {run.ref} holders"
            regs[id(run.reg)] = run.reg
            lru_blocks += run.hi - run.lo
        assert lru_blocks == len(self.lru), f"the LRU counts {len(self.lru)} blocks, its runs hold {lru_blocks}"
        held_blocks = 0
        holders: dict = {}  # (piece key, block) -> registrations holding it
        for reg in regs.values():
            end = reg.base
            for run in reg.runs:
                assert run.reg is reg and end <= run.lo < run.hi <= reg.end, (
                    f"run [{run.lo}, {run.hi}) out of order or outside its registration [{reg.base}, {reg.end})")
                end = run.hi
                for b in range(run.lo, run.hi):
                    assert run.ref == refs.get((id(reg), b), 0), (
                        f"block {b} counts {run.ref} references, {refs.get((id(reg), b), 0)} held")
                    key = reg.keys[bisect_right(reg.starts, b) - 1]
                    assert reg in self.cached.get(key, ()), f"cached block {b} not listed under its piece"
                    holders.setdefault((key, b), []).append(reg)
                if run.ref:
                    held_blocks += run.hi - run.lo
                else:
                    assert run.prev is not None, f"free run [{run.lo}, {run.hi}) not in the LRU"
        listed_right = {(key, id(reg)) for (key, _), there in holders.items() for reg in there}
        for key, listed in self.cached.items():
            assert listed and len(set(map(id, listed))) == len(listed), "a piece lists a registration twice or none"
            for reg in listed:
                assert (key, id(reg)) in listed_right, "a piece lists a registration without cached blocks there"
        for place, regs_there in holders.items():
            rec = self.dups.get(place)
            if len(regs_there) > 1:
                assert rec is not None and set(map(id, rec)) == set(map(id, regs_there)), (
                    f"block {place[1]} held by {len(regs_there)} registrations, order kept for {rec and len(rec)}")
            else:
                assert rec is None, f"block {place[1]} held once but kept as a duplicate"
        assert len(self.dups) <= len(holders), "duplicate records of blocks not cached"
        assert self.free == self.anon_free + len(self.lru), (
            f"free {self.free} != uncached {self.anon_free} + cached {len(self.lru)}")
        assert anon + held_blocks + self.free == self.total, (
            f"KV block leak: {anon} uncached + {held_blocks} cached held + {self.free} free != {self.total} total")
        assert sum(r.num_blocks for r in swapped) + self.swap_free == self.swap_total, "swap leak"
        for r in waiting:
            assert (r.num_blocks == 0 and r.num_computed == 0) or r in holding, f"waiting request {r.id} holds KV"



def agree_end(keys: list, starts: list, g: int, reg: Registration, p: int, end: int) -> int:
    """The first block from ``p`` (at most ``end``) where a request's pieces (``keys``, ``starts``, block ``p`` in
    piece ``g``) and ``reg``'s differ; they agree at ``p`` (``cache_runs.agree``)."""
    return agree(keys, starts, g, reg.keys, reg.starts, p, end)

"""vLLM v1's automatic prefix caching inside the KV owner: full blocks named by their prefix hash, shared by
reference count, kept cached when freed and evicted only when an allocation needs their space.

``PrefixCachingKVManager`` is the KV cache manager of a replica whose requests carry content
(``Request.content``); it keeps the counting manager's verbs and meaning (``free`` is every block no request
references, cached or not, as vLLM's ``get_num_free_blocks``) and adds what vLLM v1's ``BlockPool`` and
``KVCacheManager`` do (vllm/v1/core/block_pool.py, kv_cache_manager.py, kv_cache_utils.py, read at vLLM 0.32):

* a request's full blocks are registered under the prefix hash at the block's end (``Content.block_hashes``, a
  chain like vLLM's parent hash + tokens) as soon as a step's allocation covers them (``cache_full_blocks``); two
  blocks may carry one hash (vLLM does not de-duplicate), a lookup takes the first still cached;
* a waiting request's hit is its longest run of cached leading blocks, at most ``num_tokens - 1`` tokens (the
  last token is always computed: ``get_computed_blocks``); admitting it references those blocks (``touch``), a
  block nobody referenced leaving the free pool;
* freeing a request returns its blocks in reverse order (its tail first, ``free``): a block without a hash to the
  front of the free queue, a cached one to the back (LRU); an allocation takes the front first, so a cached
  block is evicted (its hash forgotten) only when no uncached free block is left (``get_new_blocks``).

Blocks without a hash are interchangeable, so they are counted (``anon_free``), and only cached blocks are
objects: the hash table holds at most the cache's blocks, whatever the length of the trace.

A decode's newly full block is registered when its request releases its blocks (finish, preemption, swap) rather
than at the step that fills it: no lookup can tell the difference, because only a later request whose content
continues this one's reply (a session's next turn) can hit it, and that request arrives after the reply.
Preemption by swap releases the blocks on the GPU as recompute does and keeps a full copy in host memory; the
swap-in references again the leading blocks still cached and takes new blocks for the rest.
"""
from __future__ import annotations

from collections import OrderedDict

from .errors import KVCapacityError
from .kv_cache import KVCacheManager
from ..request import Request


class Block:
    """A cached block: its prefix hash and how many requests reference it."""

    __slots__ = ("id", "hash", "ref")

    def __init__(self, id: int, hash: int):
        self.id = id
        self.hash = hash
        self.ref = 1


class PrefixCachingKVManager(KVCacheManager):
    """The KV cache manager with vLLM v1's prefix cache (see the module docstring)."""

    __slots__ = ("cached", "lru", "anon_free", "held", "hashes", "next_id", "hit_tokens", "step_hits")

    def __init__(self, total_blocks: int, block_size: int = 16, swap_blocks: int = 0):
        super().__init__(total_blocks, block_size, swap_blocks)
        self.cached: dict = {}  # hash -> Block, or a list of Blocks (first cached first) when several share it
        self.lru: OrderedDict = OrderedDict()  # block id -> Block: cached blocks nobody references, evicted first
        self.anon_free = total_blocks  # free blocks without a hash (the front of vLLM's free queue)
        self.held: dict = {}  # request -> its leading cached Blocks (its other blocks are counted in num_blocks)
        self.hashes: dict = {}  # request -> its block hashes so far (dropped when it releases its blocks)
        self.next_id = 0
        self.hit_tokens = 0  # tokens found cached at admissions, over the run
        self.step_hits = 0  # of the step being launched

    # --- lookups ----------------------------------------------------------------------------------------------
    def block_hashes(self, req: Request, blocks: int, keep: bool = True) -> list:
        """The prefix hashes of ``req``'s first ``blocks`` full blocks (kept for the request while it is here)."""
        known = self.hashes.get(req) if keep else None
        if known is None:
            known = []
            if keep:
                self.hashes[req] = known
        if len(known) < blocks:
            known.extend(req.content.block_hashes(self.block_size, blocks * self.block_size, len(known)))
        return known

    def first_cached(self, h: int):
        found = self.cached.get(h)
        if found is None or found.__class__ is Block:
            return found
        return found[0]

    def lookup(self, req: Request, keep: bool = True) -> list:
        """The cached blocks ``req`` would start from: its longest run of cached leading full blocks, short of its
        last token (vLLM's ``get_computed_blocks``); empty for a request without content."""
        if req.content is None:
            return []
        most = (req.num_tokens - 1) // self.block_size
        if most <= 0:
            return []
        out = []
        for h in self.block_hashes(req, most, keep):
            b = self.first_cached(h)
            if b is None:
                break
            out.append(b)
        return out

    def cached_tokens(self, req: Request, keep: bool = False) -> int:
        """Tokens of ``req``'s prompt this cache holds now (a whole number of blocks, never the whole prompt);
        ``keep``: remember its hashes (a request queued here; a router's probe keeps nothing)."""
        return len(self.lookup(req, keep)) * self.block_size

    def discard(self, req: Request) -> None:
        """``req`` leaves without releasing blocks (rejected while waiting): its hashes are dropped."""
        self.hashes.pop(req, None)

    def size_admission(self, hit: list, n: int, remaining: int, taken: set, fitted: bool) -> tuple:
        """An admission of a request with ``remaining`` tokens to compute, planned as a chunk of ``n`` from its
        cached blocks ``hit``: ``(blocks used, chunk, free blocks it costs)``. It costs the new blocks of its chunk
        and the used blocks nobody references (they leave the free pool), each counted once per plan (``taken``).
        Unfitted, it uses the whole hit and computes up to ``n`` tokens after it; ``fitted``, it costs at most the
        ``ceil(n / block_size)`` blocks a policy counting without a cache planned (fewer cached blocks, then a
        shorter chunk), so a plan within the free blocks by that count stays within them."""
        bs = self.block_size
        budget = -(-n // bs) if fitted else len(hit) + -(-n // bs)
        reclaim = used = 0
        for b in hit:
            c = 1 if b.ref == 0 and b.id not in taken else 0
            if reclaim + c >= budget:  # one block at least is left for the chunk
                break
            reclaim += c
            used += 1
        for b in hit[:used]:
            if b.ref == 0:
                taken.add(b.id)
        m = min(n, remaining - used * bs, (budget - reclaim) * bs)
        return hit[:used], m, -(-m // bs) + reclaim

    def frees(self, req: Request) -> int:
        """Blocks releasing ``req`` returns to the free pool: those no other request references."""
        return req.num_blocks - sum(1 for b in self.held.get(req, ()) if b.ref > 1)

    # --- admission with a hit ---------------------------------------------------------------------------------
    def admit(self, req: Request, hit: list) -> None:
        """``req`` (holding nothing) references ``hit``'s blocks: its first ``len(hit)`` blocks are computed."""
        lru = self.lru
        for b in hit:
            if b.ref == 0:
                del lru[b.id]
                self.free -= 1
            b.ref += 1
        self.held[req] = list(hit)
        n = len(hit)
        req.num_blocks = n
        req.num_computed = n * self.block_size
        self.hit_tokens += n * self.block_size
        self.step_hits += n * self.block_size

    # --- taking and returning blocks --------------------------------------------------------------------------
    def take(self, m: int) -> None:
        """``m`` free blocks leave the pool: uncached ones first, then the least recently freed cached ones, whose
        hashes are forgotten."""
        a = self.anon_free
        if m <= a:
            self.anon_free = a - m
        else:
            if m > self.free:
                raise KVCapacityError(f"{m} KV blocks wanted, {self.free} free")
            self.anon_free = 0
            lru = self.lru
            for _ in range(m - a):
                self.forget(lru.popitem(last=False)[1])
        self.free -= m

    def forget(self, b: Block) -> None:
        h = b.hash
        found = self.cached[h]
        if found.__class__ is Block:
            del self.cached[h]
        else:
            found.remove(b)
            if len(found) == 1:
                self.cached[h] = found[0]

    def register(self, req: Request, tokens: int) -> None:
        """``req``'s blocks full by its first ``tokens`` tokens become cached under their hashes."""
        full = tokens // self.block_size
        held = self.held.get(req)
        if held is None:
            held = self.held[req] = []
        k = len(held)
        if full <= k:
            return
        cached = self.cached
        for h in self.block_hashes(req, full)[k:full]:
            b = Block(self.next_id, h)
            self.next_id += 1
            held.append(b)
            found = cached.get(h)
            if found is None:
                cached[h] = b
            elif found.__class__ is Block:
                cached[h] = [found, b]
            else:
                found.append(b)

    def give_back(self, req: Request) -> None:
        """Drop ``req``'s references, its tail first: uncached blocks to the front of the free pool, cached ones
        nobody else references to the back of the LRU."""
        held = self.held.pop(req, ())
        anon = req.num_blocks - len(held)
        self.anon_free += anon
        freed = anon
        lru = self.lru
        for b in reversed(held):
            b.ref -= 1
            if b.ref == 0:
                lru[b.id] = b
                freed += 1
        self.free += freed
        self.hashes.pop(req, None)

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

    def release(self, req: Request) -> int:
        n = req.num_blocks
        if req.content is not None:
            self.register(req, req.num_computed)
        self.give_back(req)
        req.num_blocks = 0
        assert self.free <= self.total, "KV blocks freed twice"
        return n

    def swap_out(self, req: Request) -> bool:
        n = req.num_blocks
        if n > self.swap_free:
            return False
        if req.content is not None:
            self.register(req, req.num_computed)
        self.give_back(req)
        self.swap_free -= n
        return True

    def swap_in(self, req: Request) -> int:
        """Bring ``req``'s blocks back: its leading blocks still cached are referenced again, the rest taken anew
        (at most ``num_blocks`` free blocks, as the caller checked)."""
        n = req.num_blocks
        self.swap_free += n
        hit = []
        if req.content is not None:
            for h in self.block_hashes(req, req.num_computed // self.block_size):
                b = self.first_cached(h)
                if b is None:
                    break
                hit.append(b)
        lru = self.lru
        for b in hit:
            if b.ref == 0:
                del lru[b.id]
                self.free -= 1
            b.ref += 1
        self.held[req] = hit
        self.take(n - len(hit))
        if req.content is not None:
            self.register(req, req.num_computed)
        return n

    def take_group(self, blocks: int) -> None:
        self.take(blocks)

    # --- checks -----------------------------------------------------------------------------------------------
    def check(self, running, swapped=(), waiting=(), group=None) -> None:
        """Every block is referenced or free, each shared block counted once; the references each cached block
        holds are its holders'; the free pool is the uncached free blocks and the LRU; the hash table holds only
        blocks of the cache."""
        refs: dict = {}
        anon = 0
        for r in running:
            member = r.lag >= 0
            computed = group.exact(r)[0] if member else r.num_computed
            blocks = self.blocks_for(computed) if member else r.num_blocks
            assert blocks == self.blocks_for(computed), (
                f"request {r.id} holds {blocks} blocks for {computed} KV tokens")
            held = self.held.get(r, ())
            assert len(held) <= blocks, f"request {r.id} holds {len(held)} cached blocks of {blocks}"
            anon += blocks - len(held)
            for b in held:
                refs[b.id] = refs.get(b.id, 0) + 1
                assert b.ref > 0, f"request {r.id} holds a freed block"
        distinct = {b.id: b for r in running for b in self.held.get(r, ())}
        for bid, b in distinct.items():
            assert b.ref == refs[bid], f"block {bid} counts {b.ref} references, {refs[bid]} held"
        assert self.free == self.anon_free + len(self.lru), (
            f"free {self.free} != uncached {self.anon_free} + cached {len(self.lru)}")
        assert anon + len(distinct) + self.free == self.total, (
            f"KV block leak: {anon} uncached + {len(distinct)} cached held + {self.free} free != {self.total} total")
        assert sum(r.num_blocks for r in swapped) + self.swap_free == self.swap_total, "swap leak"
        assert len(self.lru) + len(distinct) <= self.total
        for r in waiting:
            assert r.num_blocks == 0 and r.num_computed == 0, f"waiting request {r.id} holds KV"

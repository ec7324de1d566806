"""The KV tiers below a replica's GPU cache, a component of its KV manager (engine/prefix_cache.py), which alone
writes block state: this component holds which chunks each tier keeps (engine/tier_store.py), the transfers on
each tier's link (engine/kv_transfer.py) and what each request has stored, looked up and is loading.

When stores happen, whether a load blocks the step or only its request, and which chunks move, follow the
connector the run models (``OffloadPlan.mode``; docs/kv-offload.md has the sources):

* ``vllm`` (vLLM 0.32.0's OffloadingConnector, ``distributed/kv_transfer/kv_connector/v1/offloading/
  scheduler.py``): a waiting request's hit in the tiers, from the chunk where its GPU hit ends, is loaded
  asynchronously: the request holds its blocks and waits (``WAITING_FOR_REMOTE_KVS``) while other requests run;
  chunks found only below host memory are first promoted into it (vLLM's tiering manager). After every step each
  running prefill's newly computed prompt chunks not yet in host memory are stored (``_build_store_jobs``;
  ``offload_prompt_only``), one copy job at a time in each direction, then cascaded to every lower tier. When a
  request finishes, the chunks it loaded or stored take fresh ranks (``on_request_finished``).
* ``lmcache`` (vLLM 0.32.0's ``LMCacheConnectorV1``, ``lmcache_integration/vllm_v1_adapter.py``, with LMCache's
  ``LocalCPUBackend``/``LocalDiskBackend``): the hit is LMCache's own prefix from token 0, in 256-token chunks;
  the part past the GPU hit is retrieved inside the step that admits the request (``start_load_kv``: the step
  waits for it); every step's newly computed full prompt chunks past that hit are copied to host memory before
  the step ends (``wait_for_save``), then written to disk asynchronously. Hits are touched at lookup.
  ``lmcache-layerwise``: the load's and the store's layers overlap the step's compute (``use_layerwise``).

Simplifications, each said where it applies: a chunk whose store is still in flight ends a lookup (vLLM defers
the request until the store lands); a store that vLLM would wait for because its GPU block was reallocated
(``jobs_to_flush``) is not modelled; the two PCIe directions are independent links (vLLM measured 83.4 GB/s with
both busy, 18% under their sum).
"""
from __future__ import annotations

from ..request import Status
from .kv_transfer import SharedLink, overlap
from .offload_plan import OffloadPlan
from .tier_store import TierStore, minus_ranges, piece_ranges, unrecorded_after

LOAD1, LOAD2, STORE = 0, 1, 2
RUNNING = Status.RUNNING
USAGE_SAMPLES = 1200


class TierHit:
    """A waiting request's hit in the tiers: ``parts`` ``(tier, lo, hi)`` chunk ranges from the first chunk looked
    up, each from the highest tier holding it; ``gpu_blocks`` its GPU hit; ``blocks`` GPU blocks it adds beyond;
    ``load_parts``: the ranges a load moves (LMCache re-reads the chunk the GPU hit ends in)."""

    __slots__ = ("parts", "gpu_blocks", "blocks", "load_parts")

    def __init__(self, parts: list, gpu_blocks: int, blocks: int, load_parts: list):
        self.parts = parts
        self.gpu_blocks = gpu_blocks
        self.blocks = blocks
        self.load_parts = load_parts

    @property
    def end_chunk(self) -> int:
        return self.parts[-1][2]


class Load:
    """A load in flight (vLLM's async connector): ``pending`` promotions from lower tiers still running."""

    __slots__ = ("req", "hit", "start", "pending", "promoted", "ranges")

    def __init__(self, req, hit: TierHit, start: float, ranges: list):
        self.req = req
        self.hit = hit
        self.start = start
        self.pending = 0
        self.promoted: list = []  # host-memory ranges the promotions filled
        self.ranges = ranges  # the (key, a, b) chunk ranges it moves (other lookups wait for them)


class KVTiers:
    """A replica's tiers (see the module docstring)."""

    def __init__(self, plan: OffloadPlan, block_size: int):
        self.plan = plan
        self.sync = plan.sync
        self.layerwise = plan.mode == "lmcache-layerwise"
        self.block_size = block_size
        self.cb = plan.chunk_blocks
        self.ct = plan.chunk_tokens
        self.stores = [TierStore(t.chunks) for t in plan.tiers]
        self.reads = [SharedLink(t.link.bandwidth, t.link.latency, t.concurrency) for t in plan.tiers]
        self.writes = [SharedLink(t.link.write_bw, t.link.latency, t.concurrency) for t in plan.tiers]
        self.links = self.reads + self.writes
        self.pieces: dict = {}  # request -> [piece keys, first chunks, chunks covered] at the chunk size
        self.pieces_of = None  # the KV manager's pieces of a request, where a chunk is one block (shared)
        self.stored: dict = {}  # request -> its next prompt chunk to store
        self.seen: dict = {}  # request -> the first chunk it looked up or offered (re-ranked at its finish)
        self.retry: dict = {}  # vllm: requests whose last store found no room (offered again), in order
        self.tried: dict = {}  # vllm: request -> the end of the chunks it offered, where beyond its stored ones
        self.unrecorded: dict = {}  # vllm: request -> chunks it offered only while another store was writing them
        self.loads: dict = {}  # request -> Load in flight
        self.waiters: dict = {}  # vllm: request -> the chunk ranges of its hit that loads in flight are moving
        self.waited: dict = {}  # vllm: those requests, until they land (``take_waited``)
        self.deferred_loads = 0  # vllm: hits that waited for another request's load of their chunks
        self.finishing: dict = {}  # request -> its pieces: finished, its last stores and re-ranking due at step end
        self.ready: list = []  # (request, time) whose loads finished, not yet handed back
        self.due: list = []  # lmcache: disk writes of this step's stores, started at its end
        self.version = 0  # moves whenever what a lookup sees may change: a chunk lands or one is evicted
        self.evictions_seen = 0
        self.looked: dict = {}  # request -> (version, GPU hit, its TierHit): a lookup asked again unchanged
        self.next_done = None  # the links' next finish (None: none in flight; 0.0: not known)
        n = len(plan.tiers)
        self.hit_tokens = [0] * n  # tokens loaded from each tier, every admission
        self.loaded_bytes = [0.0] * n  # over each tier's link (a host tier: every rank's share)
        self.stored_bytes = [0.0] * n
        self.stored_chunks = [0] * n
        self.store_skips = [0] * n  # whole stores that found no room
        self.sync_busy = [[0.0, 0.0] for _ in range(n)]  # lmcache: link time inside steps, (read, write)
        self.loads_done = 0
        self.load_time = 0.0  # summed over loads, start to finish
        self.sync_time = 0.0  # lmcache: step time spent loading and storing
        self.slow_loads = 0  # loads that took longer than computing their tokens
        self.released_loads = 0  # landed loads let go to unblock the queue's head (the replica's guard)
        # chunks each tier holds over time, (time, chunks...) a sample, thinned to at most USAGE_SAMPLES (the
        # KV-usage figure's tier lines)
        self.usage: list = []
        self.usage_gap = 0.0
        # seconds to compute ``tokens`` prompt tokens after ``context`` cached ones (the replica's batch-time model),
        # to count slow loads; None: not counted
        self.recompute = None

    # --- chunks of a request ----------------------------------------------------------------------------------
    def chunk_pieces(self, req, chunks: int) -> list:
        """``[keys, starts, n >= chunks]``: the pieces ``req``'s first chunks lie in (the KV manager's own list when a
        chunk is one block: ``pieces_of``)."""
        known = self.finishing.get(req)
        if known is not None:  # its KV manager let it go: its own list, extended here
            if known[2] < chunks:
                req.content.block_groups(self.ct, known[2], chunks, known[0], known[1])
                known[2] = chunks
            return known
        if self.pieces_of is not None:
            return self.pieces_of(req, chunks)
        known = self.pieces.get(req)
        if known is None:
            known = self.pieces[req] = [[], [], 0]
        if known[2] < chunks:
            req.content.block_groups(self.ct, known[2], chunks, known[0], known[1])
            known[2] = chunks
        return known

    # --- lookups ----------------------------------------------------------------------------------------------
    def lookup(self, req, gpu_blocks: int) -> TierHit | None:
        """``req``'s hit beyond its GPU hit of ``gpu_blocks`` in whole chunks, or None: up to its last token in
        vLLM's connector (``_lookup_complete_chunks`` caps at ``num_tokens``; the scheduler recomputes that token
        once the load lands, ``_update_waiting_for_remote_kv``), short of it in LMCache's (its adapter loads one
        token less when the hit is the whole prompt, and the step computes it)."""
        memo = self.looked.get(req)
        if memo is not None and memo[0] == self.version and memo[1] == gpu_blocks:
            return memo[2]
        hit = self.find(req, gpu_blocks)
        self.looked[req] = (self.version, gpu_blocks, hit)
        return hit

    def find(self, req, gpu_blocks: int) -> TierHit | None:
        bs, cb = self.block_size, self.cb
        most = (req.num_tokens - 1) // bs // cb if self.sync else req.num_tokens // bs // cb
        gpu_chunk = gpu_blocks // cb
        first = 0 if self.sync else gpu_chunk
        if most * cb <= gpu_blocks:
            return None
        keys, starts, _ = self.chunk_pieces(req, most)
        stores = self.stores
        parts = []
        p = first
        while p < most:
            for i, store in enumerate(stores):
                n = store.hits(keys, starts, p, most)
                if n:
                    break
            else:
                break
            for higher in stores[:i]:  # a chunk a higher tier holds comes from there
                n = min(n, higher.first_ready(keys, starts, p, p + n) - p)
            parts.append((i, p, p + n))
            p += n
        blocks = p * cb - gpu_blocks
        if blocks <= 0:
            return None
        load = [(i, max(lo, gpu_chunk), hi) for i, lo, hi in parts if hi > gpu_chunk]
        return TierHit(parts, gpu_blocks, blocks, load)

    def tier_tokens(self, hit: TierHit) -> list:
        """Tokens past the GPU hit each tier supplies."""
        out = [0] * len(self.stores)
        g, cb, bs = hit.gpu_blocks, self.cb, self.block_size
        for i, lo, hi in hit.load_parts:
            out[i] += (hi * cb - max(lo * cb, g)) * bs
        return out

    def hit_ranges(self, req, hit: TierHit) -> list:
        """The ``(key, a, b)`` chunk ranges past the GPU hit that ``hit`` loads (``parts`` for a deferred hit)."""
        keys, starts, _ = self.chunk_pieces(req, 0)
        out = []
        for _, lo, hi in (hit.load_parts or hit.parts):
            out += piece_ranges(keys, starts, lo, hi)
        return out

    def loading_any(self, ranges: list, planned) -> bool:
        """Whether a load in flight, or one of ``planned`` (ranges of loads this plan starts), moves a chunk of
        ``ranges``."""
        for other in [*(load.ranges for load in self.loads.values()), *planned]:
            for key, a, b in ranges:
                for k, c, d in other:
                    if k == key and c < b and a < d:
                        return True
        return False

    def defer(self, req, hit: TierHit, planned: list) -> TierHit:
        """vLLM: a hit some of whose chunks a load in flight (or one of ``planned``, the ranges of loads this plan
        starts before it) is moving waits for it: its lookup answers "not yet" (``_lookup_complete_chunks``,
        ``_chunks_being_loaded``) and the request stays out of the step; once those loads land their blocks are in
        the GPU prefix cache, where its admission finds them. Returns ``hit``, or a hit of no blocks that waits (the
        replica holds it among the loads: ``start_load``, ``take_waited``)."""
        if self.loading_any(self.hit_ranges(req, hit), planned):
            self.deferred_loads += 1
            return TierHit(hit.parts, hit.gpu_blocks, 0, [])
        return hit

    def take_waited(self, req) -> bool:
        """Whether ``req`` landed from a wait for others' loads (``defer``), not a load of its own: the KV manager
        then lets its GPU hit go and the request is looked up afresh, as vLLM looks it up at its next step."""
        if req in self.waited:
            del self.waited[req]
            return True
        return False

    # --- admissions -------------------------------------------------------------------------------------------
    def admitted(self, req, hit: TierHit | None, gpu_blocks: int) -> None:
        """``req`` is admitted (with ``hit`` loaded in the step, lmcache) or starts a load (vllm): where its
        stores start, what it has looked up, and the hit counted."""
        if self.sync:  # LMCache stores past its own hit; it touched the hit at lookup (head newest)
            start = hit.end_chunk if hit is not None else self.own_hit(req)
            if hit is not None:
                keys, starts, _ = self.chunk_pieces(req, 0)
                for store in self.stores:
                    store.rerank(keys, starts, 0, hit.end_chunk)
        else:  # vLLM stores from the start, or past a load; it re-ranks what it looked up at the finish
            start = hit.end_chunk if hit is not None else 0
            self.seen[req] = hit.parts[0][1] if hit is not None else 0
        self.stored[req] = start
        if hit is not None:
            for i, tokens in enumerate(self.tier_tokens(hit)):
                self.hit_tokens[i] += tokens

    def own_hit(self, req) -> int:
        """LMCache's hit of ``req`` from token 0 in its tiers (chunks), loaded or not."""
        most = (req.num_tokens - 1) // self.block_size // self.cb
        if most < 1:
            return 0
        keys, starts, _ = self.chunk_pieces(req, most)
        p = 0
        while p < most:
            n = max(store.hits(keys, starts, p, most) for store in self.stores)
            if not n:
                break
            p += n
        return p

    def transfer_bytes(self, hit: TierHit) -> tuple[list, int, int]:
        """``([(tier, chunks, bytes)] from the tiers below host memory, host->GPU bytes a rank moves, chunks)``."""
        plan = self.plan
        lower = []
        chunks = 0
        for i, lo, hi in hit.load_parts:
            chunks += hi - lo
            if i:
                lower.append((i, hi - lo, (hi - lo) * plan.tiers[i].chunk_bytes))
        if self.sync:  # LMCache re-reads whole chunks, the one the GPU hit ends in included
            rank = chunks * plan.tiers[0].rank_chunk_bytes
        else:  # vLLM copies the blocks past the GPU hit
            rank = hit.blocks * plan.block_rank_bytes
        return lower, rank, chunks

    def sync_load(self, req, hit: TierHit) -> float:
        """LMCache: the seconds the step waits for ``hit`` (chunks below host memory read one after another, then
        the host->GPU copy); what is read from a lower tier lands in host memory where room allows."""
        self.version += 1
        lower, rank, chunks = self.transfer_bytes(hit)
        plan = self.plan
        t = 0.0
        for i, n, nbytes in lower:
            tier = plan.tiers[i]
            d = tier.link.latency + n * tier.op_latency + nbytes / tier.link.bandwidth
            t += d
            self.sync_busy[i][0] += d
            self.loaded_bytes[i] += nbytes
        keys, starts, _ = self.chunk_pieces(req, 0)
        for i, lo, hi in hit.load_parts:
            if i:
                done = self.stores[0].insert(keys, starts, lo, hi, partial=True)
                if done:
                    self.stores[0].complete(done)
        host = plan.tiers[0]
        d = host.link.latency + chunks * host.op_latency + rank / host.link.bandwidth
        self.sync_busy[0][0] += d
        self.loaded_bytes[0] += rank * self.copies
        t += d
        self.sync_time += t
        self.loads_done += 1
        self.load_time += t
        self.count_slow(hit, t)
        return t

    def count_slow(self, hit: TierHit, seconds: float) -> None:
        """A load that took longer than computing its tokens would have (neither connector checks: both load)."""
        if self.recompute is not None:
            bs = self.block_size
            if seconds > self.recompute(hit.blocks * bs, hit.gpu_blocks * bs):
                self.slow_loads += 1

    @property
    def copies(self) -> int:
        """Ranks whose shares cross their own host links at once (a tier's chunk over a rank's)."""
        host = self.plan.tiers[0]
        return host.chunk_bytes // host.rank_chunk_bytes

    def start_load(self, req, hit: TierHit, now: float) -> None:
        """vLLM: a load of ``hit`` starts at ``now`` (``req`` holds its blocks): its chunks pinned, those below
        host memory promoted into it first."""
        self.poll(now)  # the links' clocks reach now in order of their events
        if not hit.blocks:  # a hit whose chunks another load is moving: wait for it (``defer``)
            self.waited[req] = None
            ranges = self.hit_ranges(req, hit)
            if self.loading_any(ranges, ()):
                self.waiters[req] = ranges
            else:
                self.ready.append((req, now))
            return
        keys, starts, _ = self.chunk_pieces(req, 0)
        for i, lo, hi in hit.load_parts:
            self.stores[i].pin(keys, starts, lo, hi)
        load = Load(req, hit, now, self.hit_ranges(req, hit))
        self.loads[req] = load
        plan = self.plan
        for k, (i, lo, hi) in enumerate(hit.load_parts):  # each part below host memory: one read of its tier
            if i:
                n = hi - lo
                nbytes = n * plan.tiers[i].chunk_bytes
                load.pending += 1
                self.send(self.reads[i], now, nbytes, (LOAD1, req, k), n * plan.tiers[i].op_latency)
                self.loaded_bytes[i] += nbytes
        for i, lo, hi in hit.load_parts:
            if i:
                load.promoted += self.stores[0].insert(keys, starts, lo, hi, partial=True) or []
        self.note_evictions()
        if not load.pending:
            self.host_load(load, now)

    def host_load(self, load: Load, now: float) -> None:
        _, rank, chunks = self.transfer_bytes(load.hit)
        self.send(self.reads[0], now, rank, (LOAD2, load.req, 0), chunks * self.plan.tiers[0].op_latency)
        self.loaded_bytes[0] += rank * self.copies

    def note_evictions(self) -> None:
        """Stores (in flight: no lookup sees them yet) changed what lookups see only if they evicted."""
        n = 0
        for store in self.stores:
            n += store.evicted
        if n != self.evictions_seen:
            self.evictions_seen = n
            self.version += 1

    def send(self, link: SharedLink, now: float, nbytes: float, tag, extra: float) -> None:
        link.start(now, nbytes, tag, extra)
        nxt = self.next_done
        if link.fifo is not None and nxt != 0.0:  # one at a time: the others' finishes stay where they were
            first = link.fifo[0][0]
            self.next_done = first if nxt is None or first < nxt else nxt
        else:
            self.next_done = 0.0

    # --- transfers finishing ----------------------------------------------------------------------------------
    def poll(self, now: float) -> None:
        """Every transfer finished by ``now``, in order of finishing: stores land, promotions go on to the host
        link, finished loads join ``ready``."""
        nxt = self.next_done
        if nxt is None or (nxt and nxt > now):
            return
        links = self.links
        while True:
            t = self.next_event()
            self.next_done = t
            if t is None or t > now:
                return
            done = []
            for link in links:
                if len(link):
                    done += link.advance(t)
            self.version += 1
            self.next_done = 0.0
            for tag, _ in done:
                self.finished(tag, t)

    def finished(self, tag, t: float) -> None:
        kind = tag[0]
        if kind == STORE:
            _, i, ranges, nbytes, chunks = tag
            self.stores[i].complete(ranges)
            if i == 0 and len(self.stores) > 1:
                self.cascade(ranges, chunks, t)
            return
        req = tag[1]
        load = self.loads[req]
        keys, starts, _ = self.chunk_pieces(req, 0)
        if kind == LOAD1:
            i, lo, hi = load.hit.load_parts[tag[2]]
            self.stores[i].pin(keys, starts, lo, hi, -1)
            load.pending -= 1
            if not load.pending:
                if load.promoted:
                    self.stores[0].complete(load.promoted)
                    self.stores[0].pin_ranges(load.promoted)
                self.host_load(load, t)
            return
        for j, lo, hi in load.hit.load_parts:  # the host copy landed
            if j == 0:
                self.stores[0].pin(keys, starts, lo, hi, -1)
        if load.promoted:
            self.stores[0].pin_ranges(load.promoted, -1)
        del self.loads[req]
        self.ready.append((req, t))
        if self.waiters:  # hits that waited for chunks no load moves any more go back too, their KV on the GPU
            for w, ranges in list(self.waiters.items()):
                if not self.loading_any(ranges, ()):
                    del self.waiters[w]
                    self.ready.append((w, t))
        self.loads_done += 1
        self.load_time += t - load.start
        self.count_slow(load.hit, t - load.start)

    def cascade(self, ranges: list, chunks: int, t: float) -> None:
        """Chunks that landed in host memory go on to every lower tier (vLLM's tiering: all of them; LMCache: the
        disk backend's put)."""
        for i in range(1, len(self.stores)):
            done = self.stores[i].insert_ranges(ranges, partial=self.sync)
            if done is None:
                self.store_skips[i] += 1
                continue
            n = sum(b - a for _, a, b in done)
            if n:
                tier = self.plan.tiers[i]
                nbytes = n * tier.chunk_bytes
                self.send(self.writes[i], t, nbytes, (STORE, i, done, nbytes, n), n * tier.op_latency)
                self.stored_bytes[i] += nbytes
                self.stored_chunks[i] += n
        self.note_evictions()

    def next_event(self) -> float | None:
        """When the next transfer finishes (None: none in flight)."""
        t = None
        for link in self.links:
            if len(link):
                c = link.next_completion()
                if c is not None and (t is None or c < t):
                    t = c
        return t

    # --- stores -----------------------------------------------------------------------------------------------
    def offer(self, req, tokens: int) -> tuple[list, int] | None:
        """The prompt chunks ``req`` holds once it has computed ``tokens`` tokens and has not offered yet: their
        ``(key, a, b)`` ranges and count (None: none); the store's start moves past them."""
        start = self.stored.get(req)
        if start is None:
            return None
        end = min(tokens, req.prompt_len) // self.ct
        if end <= start:
            return None
        self.stored[req] = end
        keys, starts, _ = self.chunk_pieces(req, end)
        return piece_ranges(keys, starts, start, end), end - start

    def step_ended(self, prefills, now: float) -> None:
        """After a step: transfers finished by ``now`` land; vLLM stores each prompt chunk just computed (not yet in
        host memory); LMCache starts the disk writes of its step's stores."""
        nxt = self.next_done
        if nxt is not None and (not nxt or nxt <= now):  # poll's own test, without the call on most steps
            self.poll(now)
        usage = self.usage
        if not usage or now - usage[-1][0] >= self.usage_gap:
            usage.append((now, *[store.used for store in self.stores]))
            if len(usage) > USAGE_SAMPLES:  # every other sample, twice the gap: bounded whatever the run's length
                del usage[1::2]
                self.usage_gap = 2 * self.usage_gap if self.usage_gap else now / len(usage)
        if self.sync:
            for ranges, chunks in self.due:
                self.cascade(ranges, chunks, now)
            self.due = []
            if self.finishing:
                self.finish()
            return
        inserted = False
        if self.retry:  # running requests whose stores found no room, outside this step's prefills: again
            listed = {r for r, _ in prefills}
            for r in list(self.retry):
                if r.status is RUNNING and r not in listed:
                    inserted = self.store_host(r, r.num_computed, now) or inserted
        for r, _ in prefills:
            inserted = self.store_host(r, r.num_computed, now) or inserted
        if self.finishing:
            inserted = self.finish(now) or inserted
        if inserted:  # only this step's stores can have evicted since the last note
            self.note_evictions()

    def store_host(self, req, tokens: int, now: float) -> bool:
        """vLLM: ``req``'s prompt chunks computed by ``tokens`` and not yet stored go to host memory (one store job);
        False when there were none. A store that finds no room is offered again, with the chunks computed since, at
        every later step the request runs in and once when it finishes: vLLM leaves ``next_stored_chunk_idx``
        where it was when ``prepare_store`` returns None (``_build_store_jobs``)."""
        start = self.stored.get(req)
        offered = self.offer(req, tokens)
        if offered is None:
            return False
        host_store = self.stores[0]
        self.note_writing(req, start, self.stored[req], host_store.writing(offered[0]))
        before = host_store.inserted
        done = host_store.insert_ranges(offered[0])
        if done is None:
            self.store_skips[0] += 1
            self.tried[req] = self.stored[req]  # offered: re-ranked at its finish as vLLM records the keys
            self.stored[req] = start
            self.retry[req] = None
            return True
        if self.retry:
            self.retry.pop(req, None)
        n = host_store.inserted - before
        if n:
            host = self.plan.tiers[0]
            nbytes = n * host.rank_chunk_bytes
            self.send(self.writes[0], now, nbytes, (STORE, 0, done, nbytes, n), n * host.op_latency)
            self.stored_bytes[0] += nbytes * self.copies
            self.stored_chunks[0] += n
        return True

    def note_writing(self, req, start: int, end: int, writing: list) -> None:
        """vLLM records a request's offered chunks for its finish's re-rank only where they are absent or ready
        (``_record_request_cache_access`` in ``prepare_store``): chunks another store is still writing are left out,
        unless an offer again (after a refusal: ``[start, end)``) finds them absent or ready."""
        holes = self.unrecorded.get(req)
        if holes is None and not writing:
            return
        offered = self.tried.get(req, start)
        kept = unrecorded_after(holes or [], writing, start, end, offered if offered > start else start)
        if kept:
            self.unrecorded[req] = kept
        elif holes is not None:  # (none before and none kept: nothing to drop)
            del self.unrecorded[req]

    def sync_stores(self, prefills) -> float:
        """LMCache: the seconds this step's stores add (every full prompt chunk past the stored ones, copied to
        host memory before the step ends; kept as room allows, the disk writes at the step's end)."""
        host = self.plan.tiers[0]
        self.version += 1
        t = 0.0
        for r, n in prefills:
            offered = self.offer(r, r.num_computed + n)
            if offered is None:
                continue
            ranges, chunks = offered
            nbytes = chunks * host.rank_chunk_bytes
            d = host.link.latency + chunks * host.op_latency + nbytes / host.link.write_bw
            t += d
            self.sync_busy[0][1] += d
            self.stored_bytes[0] += nbytes * self.copies
            done = self.stores[0].insert_ranges(ranges, partial=True)
            if done:
                self.stores[0].complete(done)
                k = sum(b - a for _, a, b in done)
                self.stored_chunks[0] += k
                self.due.append((done, k))
        self.sync_time += t
        return t

    def step_time(self, compute: float, load: float, store: float, layers: int) -> float:
        """A step's time with its synchronous loads and stores: in turn, or their layers overlapping
        (layer-wise)."""
        if not (load or store):
            return compute
        if self.layerwise:
            return overlap((load, compute, store), layers)
        return load + compute + store

    # --- a request leaving --------------------------------------------------------------------------------------
    def released(self, req, finished: bool) -> None:
        """``req`` let go of its blocks; when it finished, its last step's stores and vLLM's re-ranking of what it
        looked up and stored come at the step's end (``step_ended``: vLLM builds them from the finished requests at
        its next step), with its pieces kept until then."""
        self.looked.pop(req, None)
        if finished:
            self.finishing[req] = self.chunk_pieces(req, 0)
        elif self.retry:  # preempted: vLLM stores nothing for it until it runs again (its blocks are gone)
            self.retry.pop(req, None)

    def finish(self, now: float = 0.0) -> bool:
        """The requests that finished: a store still waiting for room is offered once more (vLLM's pass over
        ``finished_req_ids``), then vLLM re-ranks the chunks each looked up or stored, tail oldest; their records
        go. True if a store was offered."""
        offered = False
        for req, (keys, starts, _) in self.finishing.items():
            if req in self.retry:
                del self.retry[req]
                offered = self.store_host(req, req.prompt_len, now) or offered
                self.retry.pop(req, None)
            seen = self.seen.pop(req, None)
            end = self.stored.pop(req, None)
            tried = self.tried.pop(req, None) if self.tried else None
            if tried is not None and end is not None and tried > end:
                end = tried
            holes = self.unrecorded.pop(req, None) if self.unrecorded else None
            if seen is not None and end is not None and end > seen:
                self.chunk_pieces(req, end)
                ranges = minus_ranges(piece_ranges(keys, starts, seen, end), holes)
                for store in self.stores:
                    store.rerank_ranges(ranges)
            self.pieces.pop(req, None)
        self.finishing = {}
        return offered

    def warm(self, req) -> None:
        """``req``'s prompt ran before the run (a benchmark's warm-up, ``Replica.warm``): its whole prompt chunks are
        in every tier, stored and landed as a run's stores are (vLLM stores a prefill's computed chunks, LMCache its
        prompt's), so a later request whose GPU blocks were evicted loads them; then its records go."""
        end = req.prompt_len // self.ct
        if end:
            keys, starts, _ = self.chunk_pieces(req, end)
            ranges = piece_ranges(keys, starts, 0, end)
            for store in self.stores:
                done = store.insert_ranges(ranges)
                if done:
                    store.complete(done)
            self.version += 1
        self.forget(req)

    def forget(self, req) -> None:
        """``req`` left without releasing (rejected while waiting)."""
        self.looked.pop(req, None)
        self.finishing.pop(req, None)
        self.seen.pop(req, None)
        self.stored.pop(req, None)
        self.pieces.pop(req, None)
        self.retry.pop(req, None)
        self.tried.pop(req, None)
        self.unrecorded.pop(req, None)

    # --- figures ----------------------------------------------------------------------------------------------
    def stats(self, duration: float) -> dict:
        """Per tier: tokens its hits supplied, bytes each way, chunks stored and evicted, stores without room,
        chunks held at the end and the link's busy share each way; loads and their mean time."""
        tiers = []
        for i, tier in enumerate(self.plan.tiers):
            read = self.reads[i].busy_time + self.sync_busy[i][0]
            write = self.writes[i].busy_time + self.sync_busy[i][1]
            tiers.append({"medium": tier.medium, "hit_tokens": self.hit_tokens[i],
                          "loaded_bytes": self.loaded_bytes[i], "stored_bytes": self.stored_bytes[i],
                          "stored_chunks": self.stored_chunks[i], "evicted_chunks": self.stores[i].evicted,
                          "store_skips": self.store_skips[i], "chunks_held": self.stores[i].used,
                          "chunks": tier.chunks, "read_busy_s": read, "write_busy_s": write,
                          "read_utilisation": read / duration if duration > 0 else 0.0,
                          "write_utilisation": write / duration if duration > 0 else 0.0})
        return {"mode": self.plan.mode, "loads": self.loads_done, "deferred_loads": self.deferred_loads,
                "load_time_s": self.load_time,
                "sync_time_s": self.sync_time, "slow_loads": self.slow_loads, "released_loads": self.released_loads,
                "tiers": tiers, "usage": list(self.usage)}

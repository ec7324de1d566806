"""The ReplicaView interface, answered from a live vLLM scheduler.

The adapter refreshes ``waiting`` and ``running`` (lists of llmsched ``Request`` mirrors, kept in sync with vLLM's
requests) at the start of every step; KV figures are read from vLLM's block pool when asked.
"""
from __future__ import annotations

from collections import deque

from ..request import Request, Status

WAITING = Status.WAITING


class VLLMView:
    __slots__ = ("_s", "now", "waiting", "running", "swapped", "recent_step_times", "num_steps", "busy_time",
                 "batch_time", "oracle", "block_size", "total_blocks", "max_num_seqs", "max_num_batched_tokens",
                 "max_model_len", "replica_index", "external")

    decode_group = None  # vLLM keeps every request's own state: no lazily stepped decode group
    # the policy counts one block per block_size tokens (engine/kv_windows.py's groups are the simulator's; vLLM's own
    # allocate_slots holds a hybrid model's windowed blocks, which free_blocks reads)
    kv_windowed = False
    # no KV tiers of the simulator's below the cache: with vLLM's own offloading connector, a request waiting for
    # its load is vLLM's (WAITING_FOR_REMOTE_KVS), never in the policy's waiting list
    kv_tiers = False

    def __init__(self, sched, batch_time=None, oracle: bool = False):
        self._s = sched
        self.now = 0.0
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.swapped: list[Request] = []  # vLLM v1 preempts by recompute only
        self.recent_step_times: deque = deque(maxlen=64)
        self.num_steps = 0
        self.busy_time = 0.0
        self.batch_time = batch_time
        self.oracle = oracle
        self.replica_index = 0
        self.block_size = sched.block_size
        self.total_blocks = sched.kv_cache_manager.block_pool.num_gpu_blocks - 1  # one null block
        self.max_num_seqs = min(sched.max_num_running_reqs, sched.max_num_active_reqs)
        self.max_num_batched_tokens = sched.max_num_scheduled_tokens
        self.max_model_len = sched.max_model_len
        # this step's KV-connector answers by request id: (tokens loaded, loaded asynchronously) (``external_tokens``)
        self.external: dict[int, tuple[int, bool]] = {}

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def free_blocks(self) -> int:
        return self._s.kv_cache_manager.block_pool.get_num_free_blocks()

    @property
    def blocks_held_waiting(self) -> int:
        """Blocks vLLM holds for requests outside the policy's running set: those waiting for a KV connector's load
        (WAITING_FOR_REMOTE_KVS, which the policy never sees) and frees deferred past a step in flight; the used
        blocks less what the running requests hold (at least 0: shared prefix blocks count once in vLLM)."""
        used = self.total_blocks - self.free_blocks
        held = used - sum(r.num_blocks for r in self.running)
        return held if held > 0 else 0

    @property
    def kv_utilisation(self) -> float:
        return 1.0 - self.free_blocks / self.total_blocks

    @property
    def swap_free_blocks(self) -> int:
        return 0

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def extra_blocks(self, req: Request, tokens: int) -> int:
        need = -(-tokens // self.block_size) - req.num_blocks
        return need if need > 0 else 0

    def decode_blocks(self, req: Request) -> int:
        return self.extra_blocks(req, req.num_computed + 1)

    # --- vLLM's prefix cache (engine/prefix_cache.py has the same rules) ----------------------------------------
    @property
    def prefix_caching(self) -> bool:
        return self._s.kv_cache_manager.enable_caching

    def cache_hit(self, req: Request) -> tuple[list, int]:
        """vLLM's cached blocks for waiting ``req`` and their tokens, by the lookup its admission makes
        (``get_computed_blocks``, without counting a query in vLLM's statistics)."""
        manager = self._s.kv_cache_manager
        if not manager.enable_caching or req.num_computed or req.status is not WAITING:
            return [], 0
        vreq = self._s.vllm_request(req)
        if not manager.prefix_cache_lookup_enabled(vreq):
            return [], 0
        blocks, tokens, _ = manager.coordinator.find_longest_cache_hit(vreq.block_hashes, vreq.num_tokens - 1)
        return blocks[0], tokens

    def step_draft(self, plan, free: int) -> set | None:
        """The cached blocks a plan's admissions take, each counted once (``admitted``); None without a cache.
        Lookups see vLLM's cache as the step starts: vLLM's own scheduler then admits (engine/view.py's draft
        replays the step's order for the simulator)."""
        return set() if self.prefix_caching else None

    def external_tokens(self, req: Request) -> int:
        """Tokens of waiting ``req`` past its local prefix hit that vLLM's KV connector (``kv_transfer_config``)
        loads at its admission: a disaggregated decode instance's transferred prompt, an offloaded prefix. vLLM's
        scheduler asks the connector (``get_num_new_matched_tokens``) on every admission attempt, so connectors
        answer the same question more than once; asked once a step here (the adapter clears ``external``). A
        connector that loads asynchronously (NIXL) moves the request to WAITING_FOR_REMOTE_KVS instead of running
        it this step (``loads_async``)."""
        return self._external(req)[0]

    def loads_async(self, req: Request) -> bool:
        """Whether admitting waiting ``req`` starts an asynchronous load instead (NIXL's decode side, an offload
        tier): vLLM then parks it, its blocks allocated, and runs none of its tokens this step; the adapter lets
        vLLM do so and leaves it out of the step the plan runs."""
        return self._external(req)[1]

    def _external(self, req: Request) -> tuple[int, bool]:
        connector = self._s.connector
        if connector is None or req.num_computed or req.status is not WAITING:
            return 0, False
        known = self.external.get(req.id)
        if known is None:
            vreq = self._s.vllm_request(req)
            local = self.cache_hit(req)[1]
            ext, load_async = connector.get_num_new_matched_tokens(vreq, local)
            if not ext or vreq.skip_reading_prefix_cache:
                ext, load_async = 0, False
            # a whole prompt loaded (NIXL's remote prefill) still computes its last token, as vLLM recomputes it
            last = req.prompt_len + req.num_generated - 1 - local
            known = self.external[req.id] = (ext if ext < last else last, bool(load_async))
        return known

    def cached_tokens(self, req: Request, draft=None) -> int:
        """Leading tokens of waiting ``req`` that vLLM's prefix cache holds now, and those its KV connector loads
        (its admission starts after them); for a request whose connector's load has landed, what it holds (as
        engine/view.py counts a received request's)."""
        if req.num_blocks and req.status is WAITING:
            return req.num_computed
        return self.cache_hit(req)[1] + self.external_tokens(req)

    def tokens_to_compute(self, req: Request) -> int:
        if req.num_computed:  # holding KV: the rest of a landed load, or a chunk
            return req.prompt_len + req.num_generated - req.num_computed
        return req.prompt_len + req.num_generated - self.cached_tokens(req)

    def admission_blocks(self, req: Request, n: int, claimed: set | None = None) -> int:
        """Free blocks admitting waiting ``req`` with ``n`` tokens to compute takes: the chunk's blocks and the
        cached blocks no request holds (they leave vLLM's free queue), less those in ``claimed`` (``claim_hit``)."""
        if req.num_blocks:  # a landed load's request: the blocks beyond those it holds
            return self.extra_blocks(req, req.num_computed + n)
        hit, local = self.cache_hit(req)
        external = self.external_tokens(req)  # loaded into blocks of its own, as the chunk's tokens are
        return (self.blocks_for(local + external + n) - len(hit)
                + sum(1 for b in hit if b.ref_cnt == 0 and (not claimed or b.block_id not in claimed)))

    def claim_hit(self, req: Request, claimed: set) -> None:
        """Add the cached blocks no request holds that admitting ``req`` takes to ``claimed``: a later admission
        of the same plan finds them held."""
        hit, _ = self.cache_hit(req)
        claimed.update(b.block_id for b in hit if b.ref_cnt == 0)

    def admitted(self, req: Request, n: int, draft: set | None) -> None:
        """The policy admits ``req``: its cached blocks go into ``draft`` (``claim_hit``)."""
        if draft is not None:
            self.claim_hit(req, draft)

    def preempt_frees(self, req: Request) -> int:
        """Blocks preempting running ``req`` returns to vLLM's free queue: those no other request holds."""
        if not self._s.kv_cache_manager.enable_caching:
            return req.num_blocks
        blocks = self._s.kv_cache_manager.coordinator.get_blocks(self._s.vllm_request(req).request_id)[0]
        return sum(1 for b in blocks if b.ref_cnt == 1 and not b.is_null)

    @property
    def mean_step_time(self) -> float:
        return self.busy_time / self.num_steps if self.num_steps else 0.0

    def oracle_output_len(self, req: Request) -> int | None:
        """The request's ``max_tokens`` (its true length under ``ignore_eos``), when the operator grants it."""
        return req.output_len if self.oracle else None

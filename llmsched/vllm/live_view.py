"""The ReplicaView interface, answered from a live vLLM scheduler.

The adapter refreshes ``waiting`` and ``running`` (lists of llmsched ``Request`` mirrors, kept in sync with vLLM's
requests) at the start of every step; KV figures are read from vLLM's block pool when asked.
"""
from __future__ import annotations

from collections import deque

from ..request import Request


class VLLMView:
    __slots__ = ("_s", "now", "waiting", "running", "swapped", "recent_step_times", "num_steps", "busy_time",
                 "batch_time", "oracle", "block_size", "total_blocks", "max_num_seqs", "max_num_batched_tokens",
                 "max_model_len", "replica_index")

    decode_group = None  # vLLM keeps every request's own state: no lazily stepped decode group

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

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def free_blocks(self) -> int:
        return self._s.kv_cache_manager.block_pool.get_num_free_blocks()

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

    @property
    def mean_step_time(self) -> float:
        return self.busy_time / self.num_steps if self.num_steps else 0.0

    def oracle_output_len(self, req: Request) -> int | None:
        """The request's ``max_tokens`` (its true length under ``ignore_eos``), when the operator grants it."""
        return req.output_len if self.oracle else None

"""A replica's hard limits and mechanism options, named as in vLLM."""
from __future__ import annotations

from dataclasses import dataclass

OVERFLOW_MODES = ("error", "evict-newest", "evict-newest-recompute")


@dataclass
class ReplicaConfig:
    """Hard limits of a replica, named as in vLLM."""

    num_blocks: int
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 8192
    preemption_mode: str = "recompute"  # or "swap"
    swap_blocks: int = 0
    swap_seconds_per_block: float = 0.0  # host<->GPU transfer time of one block
    oracle: bool = False  # schedulers may read true output lengths
    # a plan needing more KV blocks than are free: "error" (PlanError), or evict running requests newest
    # admission first until it fits (Ao et al., seed 003, §1.4): "evict-newest" restarts them from scratch (generated
    # tokens lost), "evict-newest-recompute" keeps their tokens and re-prefills them (vLLM/Vidur)
    overflow: str = "error"
    # a request evicted when it has been preempted or evicted this many times is rejected: under a policy that
    # admits beyond the cache, overflow evictions can cycle for ever (Ao et al. §2's "vicious cycle", Example 1)
    max_evictions: int = 1000
    check_invariants: bool = False  # full KV accounting check after every step (tests)
    # advance runs of identical decode-only steps in one go when the policy declares steady_decodes (same results
    # as stepping; False steps every time, for the identity check)
    fast_forward: bool = True

    def __post_init__(self):
        for name in ("num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
                     "max_evictions"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"replica config {name} must be a positive integer, got {v!r}")
        if self.preemption_mode not in ("recompute", "swap"):
            raise ValueError(f"preemption_mode must be 'recompute' or 'swap', got {self.preemption_mode!r}")
        if self.overflow not in OVERFLOW_MODES:
            raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_MODES)}, got {self.overflow!r}")
        if self.swap_blocks < 0 or self.swap_seconds_per_block < 0:
            raise ValueError("swap_blocks and swap_seconds_per_block must be >= 0")

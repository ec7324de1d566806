"""A replica's hard limits and mechanism options, named as in vLLM; defaults, ranges and help declared once in
``limits.py`` (shared with RunConfig and the vLLM engine)."""
from __future__ import annotations

from dataclasses import dataclass

from .limits import (BLOCK_SIZE, CHECK_INVARIANTS, FAST_FORWARD, MAX_MODEL_LEN, MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS,
                     ORACLE, OVERFLOW, OVERFLOW_MODES, PREEMPTION_MODE, PREEMPTION_MODES, PREFIX_CACHING)


@dataclass
class ReplicaConfig:
    """Hard limits of a replica, named as in vLLM."""

    num_blocks: int
    block_size: int = BLOCK_SIZE.field()
    max_num_seqs: int = MAX_NUM_SEQS.field()
    max_num_batched_tokens: int = MAX_NUM_BATCHED_TOKENS.field()
    max_model_len: int = MAX_MODEL_LEN.field()
    preemption_mode: str = PREEMPTION_MODE.field()
    swap_blocks: int = 0
    swap_seconds_per_block: float = 0.0  # host<->GPU transfer time of one block
    oracle: bool = ORACLE.field()  # schedulers may read true output lengths
    overflow: str = OVERFLOW.field()
    # a request evicted when it has been preempted or evicted this many times is rejected: under a policy that
    # admits beyond the cache, overflow evictions can cycle for ever (Ao et al. §2's "vicious cycle", Example 1)
    max_evictions: int = 1000
    check_invariants: bool = CHECK_INVARIANTS.field()  # full KV accounting check after every step (tests)
    # advance runs of identical decode-only steps in one go when the policy declares steady_decodes (same results
    # as stepping; False steps every time, for the identity check)
    fast_forward: bool = FAST_FORWARD.field()
    # vLLM v1's prefix cache (engine/prefix_cache.py); the run turns it on only when its requests carry content,
    # so a replica of requests without identities keeps the counting KV manager
    prefix_caching: bool = PREFIX_CACHING.field(default=False)
    # KV tiers below the GPU cache (engine/offload_plan.py's OffloadPlan, resolved for the run), None: none
    kv_offload: object = None
    # the model's KV cache groups with windowed layers (hardware/kv_groups.py's KVGroups), counted as vLLM's hybrid
    # KV cache manager holds them (engine/kv_windows.py); None: every layer holds every token's KV
    kv_groups: object = None

    def __post_init__(self):
        for name in ("num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
                     "max_evictions"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"replica config {name} must be a positive integer, got {v!r}")
        if self.preemption_mode not in PREEMPTION_MODES:
            raise ValueError(f"preemption_mode must be 'recompute' or 'swap', got {self.preemption_mode!r}")
        if self.overflow not in OVERFLOW_MODES:
            raise ValueError(f"overflow must be one of {', '.join(OVERFLOW_MODES)}, got {self.overflow!r}")
        if self.swap_blocks < 0 or self.swap_seconds_per_block < 0:
            raise ValueError("swap_blocks and swap_seconds_per_block must be >= 0")
        if self.kv_groups is not None:
            if self.prefix_caching or self.kv_offload is not None or self.preemption_mode == "swap":
                raise ValueError("windowed KV cache groups (kv_groups) are counted without a prefix cache, KV tiers "
                                 "or swapping; leave kv_groups out (the all-full-attention count) for those")
            self.fast_forward = False  # the decode group and its folds count one block per block_size tokens

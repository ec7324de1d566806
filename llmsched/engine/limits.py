"""A replica's limits and switches, declared once.

``ReplicaConfig`` (the mechanism), ``RunConfig`` (a run: the command line and config files) and the vLLM
engine's config take these fields' defaults, ranges, help and vLLM argument names from here; names and units
match vLLM's where the concept is the same.
"""
from __future__ import annotations

from ..bounds import MAX_REQUESTS, MAX_TOKENS
from ..run_field import RunField

PREEMPTION_MODES = ("recompute", "swap")
# a plan needing more KV blocks than are free: "error" (PlanError), or evict running requests newest admission
# first until it fits (Ao et al. §1.4): "evict-newest" restarts them from scratch (generated tokens lost),
# "evict-newest-recompute" keeps their tokens and re-prefills them (vLLM/Vidur)
OVERFLOW_MODES = ("error", "evict-newest", "evict-newest-recompute")

BLOCK_SIZE = RunField(16, "KV block size in tokens (vLLM's block_size)", low=1, high=4096, vllm="block_size")
MAX_NUM_SEQS = RunField(256, "most requests running at once (vLLM's max_num_seqs)", low=1, high=MAX_REQUESTS,
                        vllm="max_num_seqs")
MAX_NUM_BATCHED_TOKENS = RunField(8192, "most tokens in one step (vLLM's max_num_batched_tokens)", low=1,
                                  high=MAX_TOKENS, vllm="max_num_batched_tokens")
MAX_MODEL_LEN = RunField(8192, "longest prompt+output served", low=2, high=MAX_TOKENS, vllm="max_model_len")
PREEMPTION_MODE = RunField("recompute", "recompute or swap", choices=PREEMPTION_MODES)
OVERFLOW = RunField("error", "a plan that overflows the KV cache: error (default), evict-newest (newest admitted "
                             "restart from scratch), evict-newest-recompute (they keep their tokens)",
                    choices=OVERFLOW_MODES)
ORACLE = RunField(False, "let schedulers read true output lengths (off by default)", flag="--oracle", switch=True)
FAST_FORWARD = RunField(True, "step every decode-only step through the policy instead of fast-forwarding runs of "
                              "them (the same results, slower; for checking)", flag="--no-fast-forward",
                        switch=True)
PREFIX_CACHING = RunField(True, "switch vLLM v1's automatic prefix caching off (on by default, as in vLLM v1): it acts "
                                "on requests whose prompts have identities (Mooncake and session traces, "
                                "--workload shared-prefix, --turns)", flag="--no-prefix-caching", switch=True)
CHECK_INVARIANTS = RunField(False, "check the KV and decode-group accounting of every replica after every step "
                                   "(slow; the tests run with it)", flag="--check-invariants", switch=True)


def vllm_refusal(max_num_batched_tokens: int, max_num_seqs: int, max_model_len: int | None,
                 chunked_prefill: bool) -> str | None:
    """What vLLM says when it refuses these limits at start-up, or None: vLLM 0.32.0's
    ``SchedulerConfig.verify_max_model_len`` (vllm/config/scheduler.py; vLLM v0's ``_verify_args`` had the same two
    rules), its messages word for word. A step of fewer tokens than sequences would leave running requests without
    their decode, and without chunked prefill a step shorter than the context could never take the longest prompt."""
    if not chunked_prefill and max_model_len is not None and max_num_batched_tokens < max_model_len:
        return (f"max_num_batched_tokens ({max_num_batched_tokens}) is smaller than max_model_len ({max_model_len}). "
                f"This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM "
                f"reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.")
    if max_num_batched_tokens < max_num_seqs:
        return (f"max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or equal to max_num_seqs "
                f"({max_num_seqs}).")
    return None

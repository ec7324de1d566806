"""RAD's low-TBT mirror (Bari et al., App. D) with a batch of one decode and a KV cache full of other decodes."""
from __future__ import annotations

import numpy as np

from llmsched.experiment import RunConfig, run
from llmsched.request import Status


def test_a_batch_of_one_short_of_a_block_preempts_another_decode_not_itself():
    """One token a step makes the decode batch one request; when it needs a block and the cache is full of the
    other running decodes, the newest of those yields (before: the batch preempted itself alone, the replica went
    idle and the run ended with requests left unscheduled: the conservation fuzz's seed 2150)."""
    cfg = RunConfig(scheduler="rad-lowtbt", workload="lmsys", num_requests=15, concurrency=19, max_total_tokens=256,
                    max_num_seqs=19, max_num_batched_tokens=1, max_model_len=4096, num_blocks=30,
                    overflow="evict-newest-recompute", seed=1019783029)
    result = run(cfg)
    status = np.asarray(result.requests.cols["status"])
    assert len(status) == 15 and (status == int(Status.FINISHED)).all()
    assert result.replica_stats[0]["preemptions"] > 0


def test_rad_starts_a_head_whose_kv_a_tier_loaded_on_the_blocks_it_still_needs():
    """With KV tiers below the GPU a waiting request may hold blocks a tier loaded for it. RAD counted them again
    when deciding whether the head could start, so a long head waited for ever beside free blocks and the replica
    stalled (10 of 30 requests rejected as "the scheduler stalled", conservation fuzz seed 51,059, before
    2026-11-30); without tiers the same run finishes all that fit."""
    cfg = dict(scheduler="rad", model="qwen3-14b", gpu="h100", workload="azure-conv", num_requests=30, concurrency=9,
               turns=4, max_total_tokens=1024, block_size=32, max_num_seqs=64, max_model_len=8192, num_blocks=119,
               seed=151301621, check_invariants=True)
    tiered, bare = run(RunConfig(**cfg, kv_offload="cpu:2GiB,disk:20GiB")), run(RunConfig(**cfg))
    for result in (tiered, bare):
        assert not [why for why in result.requests.reasons.values() if "stalled" in why]
    finished = lambda r: int((r.requests.column("status") == int(Status.FINISHED)).sum())  # noqa: E731
    assert finished(tiered) == finished(bare) == 29

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

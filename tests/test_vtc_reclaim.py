"""vtc and wfq reclaim KV for a tenant below its share, each request at most ``max_reclaims`` times: two tenants
below their share in turn took each other's requests back for ever before (the lanes fuzz's seed 61, with four
times the conservation fuzz's requests: a 25-block request on a 27-block cache recomputed 692 times, and the run
never ended)."""
import pytest

from llmsched.experiment import RunConfig, run
from llmsched.request import Status

SEED_61 = dict(scheduler="vtc", model="llama-3-8b", gpu="a100", batch_time="roofline", replicas=2, router="random",
               workload="lmsys", rate=2.0, num_requests=120, tiers="gold:ttft=1:tpot=0.05:share=0.5,bronze:ttft=5",
               tenants="t0:rate=0.529375:weight=1:priority=1,t1:rate=1.16853:weight=1:priority=0",
               max_total_tokens=256, block_size=8, max_num_seqs=4, max_num_batched_tokens=28, num_blocks=27,
               prefix_caching=True, seed=59178899)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("scheduler", ["vtc", "wfq"])
@pytest.mark.parametrize("limit", [0, 1, 3])
def test_every_request_ends_and_none_is_reclaimed_more_than_max_reclaims(scheduler, limit):
    cfg = RunConfig(**{**SEED_61, "scheduler": scheduler, "scheduler_params": {"max_reclaims": limit}},
                    check_invariants=True)
    result = run(cfg)
    status = result.requests.cols["status"]
    assert len(status) == cfg.num_requests
    assert all(s in (int(Status.FINISHED), int(Status.REJECTED)) for s in status)
    times = {}
    for row in result.replica_stats:
        for n, count in row["policy"]["reclaims_per_request"].items():
            times[int(n)] = times.get(int(n), 0) + count
    assert max(times, default=0) <= limit
    assert bool(times) == (limit > 0)  # this run reclaims whenever it may


def test_max_reclaims_must_be_a_whole_number_of_times():
    for bad in (-1, 1.5):
        with pytest.raises(ValueError, match="max_reclaims must be an integer >= 0"):
            run(RunConfig(**{**SEED_61, "num_requests": 2, "scheduler_params": {"max_reclaims": bad}}))

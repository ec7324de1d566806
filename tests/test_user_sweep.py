"""Cases a new user's sweep of the commands found: each failed before its fix (see the commit that added it)."""
import pytest

from llmsched.capacity.sound_bound import SoundBoundViolation, capacity_bound, check_capacity
from llmsched.run_config import RunConfig
from llmsched.theory.throughput_bound import bound_for_config


def config(**fields):
    return RunConfig.checked({"scheduler": "sarathi", "workload": "sharegpt", "rate": 2.0, "num_requests": 400,
                              **fields})


def test_the_capacity_check_bounds_every_replica_that_serves():
    """`capacity --dp 2` and `capacity --autoscaler ... --max-replicas 3` found capacities of 5.5 and 5.3 req/s
    and failed them as a simulator bug: the sound bound counted one replica (3.4 req/s)."""
    one = bound_for_config(config()).requests_per_s
    assert bound_for_config(config(dp=2)).requests_per_s == pytest.approx(2 * one, rel=1e-9)
    scaled = config(autoscaler="hpa", min_replicas=1, max_replicas=3)
    assert bound_for_config(scaled).requests_per_s == pytest.approx(3 * one, rel=1e-9)
    check_capacity("sarathi", config(dp=2), 1.6 * one, [0])
    check_capacity("sarathi", scaled, 2.5 * one, [0])
    with pytest.raises(SoundBoundViolation):  # the check still fails what no schedule can reach
        check_capacity("sarathi", config(), 1.6 * one, [0])


@pytest.mark.parametrize("fields", [{"disaggregate": "2P1D"}])
def test_no_one_pool_bound_for_a_disaggregated_run(fields):
    """`capacity --disaggregate 2P1D` found 6.3 req/s and failed it against one colocated replica's 3.4."""
    assert capacity_bound(config(**fields), 6.3, [0]) is None
    check_capacity("sarathi", config(**fields), 6.3, [0])


def test_no_bound_where_a_prefix_cache_skips_prefill():
    """`capacity --workload shared-prefix` found 77.8 req/s (cache hits skip the shared system prompts) and failed
    it against a bound of 69.6 that counts every prompt token as computed."""
    cached = config(workload="shared-prefix", num_requests=150)
    assert capacity_bound(cached, 77.8, [0]) is None
    check_capacity("sarathi", cached, 77.8, [0])
    plain = config(workload="shared-prefix", num_requests=150, prefix_caching=False)
    assert capacity_bound(plain, 50.0, [0]) is not None

"""WAIT's reservation profiles for all types at once equal the per-type computation, array for array."""
import numpy as np
import pytest

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.request import Request, Status
from llmsched.schedulers.registry import create_scheduler
from llmsched.schedulers.wait.reserve import ProfileCohortPlan

from conftest import AffineStepTime


@pytest.mark.parametrize("seed", range(20))
def test_all_types_at_once_equal_one_type_at_a_time(seed):
    rng = np.random.default_rng(seed)
    rep = Replica(0, create_scheduler("sarathi"), AffineStepTime(),
                  ReplicaConfig(num_blocks=5000, block_size=int(rng.choice([8, 16, 32])), oracle=True))
    groups = {}
    for i in range(int(rng.integers(0, 60))):
        prompt, output = int(rng.integers(1, 3000)), int(rng.integers(1, 2000))
        r = Request(i, 0.0, prompt, output)
        if rng.random() < 0.7:  # in flight: somewhere in its prompt or its output
            r.status = Status.RUNNING
            r.num_generated = int(rng.integers(0, output))
            r.num_computed = int(rng.integers(0, prompt + r.num_generated + 1))
        else:
            r.status = Status.WAITING
        groups.setdefault(int(rng.integers(0, 10)), []).append(r)
    if seed % 3 == 0:
        groups[99] = []  # a type with nobody in it
    plan = ProfileCohortPlan(rep.view, True, groups={})
    profiles, peaks = plan._profiles(groups)
    assert list(profiles) == list(groups) and list(peaks) == list(groups)
    for j, rs in groups.items():
        base, count = plan._profile(rs)
        assert profiles[j][0].tobytes() == base.tobytes() and profiles[j][1].tobytes() == count.tobytes()
        assert peaks[j] == plan._peak(base, count)

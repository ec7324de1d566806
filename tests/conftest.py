import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from llmsched.batchtime.linear import LinearBatchTime
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.request import Request
from llmsched.schedulers import create_scheduler
from llmsched.sim.simulator import simulate

# Every figure a test makes, in this process or a command it starts, is checked for readability when written
# (llmsched/report/readable.py); an unreadable one fails the test that wrote it.
os.environ.setdefault("LLMSCHED_CHECK_FIGURES", "1")


# The longest files first (measured: the whole suite with 2 workers, --durations): with `--dist loadfile` a file
# runs on one worker, and xdist hands files out by test count, which put the vLLM server file (8 servers
# started one after another, 10+ minutes) last, alone on one worker while the other idled. The other files that
# run a vLLM engine come after several long simulator files, so that two engines rarely share the 2 cores.
LONGEST_FIRST = ("test_vllm_serve.py", "test_compiled.py", "test_fairbatching_reproduce.py", "test_lanes.py",
                 "test_fast_forward.py", "test_infermax_reproduce.py", "test_vllm_adapter.py",
                 "test_vllm_prefix_cache.py", "test_fairness_bounds.py", "test_plan.py", "test_prefix_cache.py",
                 "test_fuzz_conservation.py")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order below, not test counts'
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="module", autouse=True)
def module_environment():
    """What a test module sets in the process environment (an in-process vLLM engine sets TMPDIR, its cache and
    thread counts) ends with the module: under xdist a worker runs several files, and a later one inherited it
    (Ray's socket paths under that TMPDIR outgrew AF_UNIX's 107 bytes)."""
    saved, tempdir = dict(os.environ), tempfile.tempdir
    yield
    os.environ.clear()
    os.environ.update(saved)
    tempfile.tempdir = tempdir


def shared_data_dir() -> Path | None:
    env = os.environ.get("LLMSCHED_DATA")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"
    return path if path.is_dir() else None


@pytest.fixture
def shared_data():
    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data is absent (set LLMSCHED_DATA to run this test)")
    return path


def AffineStepTime():
    """The library's linear model with fixed round numbers: 10 ms + 50 µs/token + 20 ns/context token."""
    return LinearBatchTime(const=0.010, per_token=5e-5, per_context=2e-8, per_prefill=0.0)


class ListSource:
    def __init__(self, requests):
        self.requests = requests

    def initial(self):
        return self.requests

    def on_done(self, req, now):
        return []


def make_requests(n=300, rate=8.0, prompt=(10, 1500), output=(1, 300), seed=0, tier=None):
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    kw = {"tier": tier} if tier else {}
    return [Request(i, float(arrivals[i]), int(rng.integers(*prompt)), int(rng.integers(*output)), **kw)
            for i in range(n)]


def run_sim(scheduler, requests, num_blocks=2000, replicas=1, router=None, horizon=None, params=None, **cfg):
    config = ReplicaConfig(num_blocks=num_blocks, check_invariants=True, **cfg)
    from llmsched.metrics.steps import StepLog
    steps = StepLog()
    reps = [Replica(i, create_scheduler(scheduler, **(params or {})), AffineStepTime(), config, steps)
            for i in range(replicas)]
    result = simulate(ListSource(requests), reps, router=router, horizon=horizon)
    return result, reps

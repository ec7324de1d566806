"""WAIT / Nested WAIT fidelity: memory-feasible admission, fluid thresholds below one, (11)/(12)
checks, the KV ledger and the authors' budget gate."""
import warnings

import numpy as np
import pytest

from llmsched.reproduce.wait_runs.paper_model import run_model
from llmsched.schedulers.wait.fluid_model import PromptType
from llmsched.schedulers.wait.nested import nested_thresholds, segments
from llmsched.schedulers.wait.synthetic_workloads import WAIT_WORKLOADS, Mixture
from llmsched.schedulers.wait.thresholds import (RandomisedThresholds, nested_means, nested_violations, wait_means,
                                                 wait_violations)

TYPES = [(3.0, 4, 4), (2.0, 4, 9), (1.0, 4, 14)]  # (λ, l, l') paper units
SPEC = ",".join(f"{r}:{l}:{lp}" for r, l, lp in TYPES)
LENGTHS = Mixture([(r, l, lp + 1) for r, l, lp in TYPES])


def _run(algo, memory, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_model(algo, LENGTHS, 60.0, memory, d0=0.05, d1=0.0005, num_requests=400, seed=1,
                         overflow="evict-newest-recompute", types=SPEC, thresholds="6,4,2", **params)


@pytest.mark.parametrize("algo", ["wait", "nested-wait"])
def test_reserving_admission_removes_the_preemptions_a_free_kv_gate_causes(algo):
    loose = _run(algo, 250, reserve=False)
    tight = _run(algo, 250)
    assert loose["preemptions"] > 50  # the old gate admitted past what fits
    assert tight["preemptions"] == 0 and tight["evictions"] == 0
    assert tight["finished"] == 400


@pytest.mark.parametrize("gate", ["type", "entry", "budget"])
def test_wait_never_preempts_under_any_gate(gate):
    res = _run("wait", 150, gate=gate, batch_cap=40)
    assert res["preemptions"] == 0 and res["finished"] == 400


def test_randomised_thresholds_have_the_fluid_mean_and_are_seeded():
    r = RandomisedThresholds([0.3, 2.6], seed=7)
    draws = np.array([r.draw() for _ in range(20000)])
    assert set(draws[:, 0]) == {0, 1} and set(draws[:, 1]) == {2, 3}
    assert abs(draws[:, 0].mean() - 0.3) < 0.02 and abs(draws[:, 1].mean() - 2.6) < 0.02
    again = RandomisedThresholds([0.3, 2.6], seed=7)
    assert [again.draw() for _ in range(50)] == draws[:50].tolist()
    with pytest.raises(ValueError):
        RandomisedThresholds([0.0, 1.0])


def test_rounded_thresholds_break_12_and_the_fluid_means_satisfy_it():
    wl = WAIT_WORKLOADS["nested-synthetic"]().scaled(55 / 66)
    types = list(wl.types)
    segs = segments(types)
    d0, d1 = 0.0134, 4.6e-7  # eq. (1) fitted to Llama-2-7B on an A100 (docs/wait.md)
    rounded = nested_thresholds(segs, 256)
    bad = nested_violations(segs, rounded, 60, d0, d1, 117840)
    assert any(b.startswith("(12b)") for b in bad)
    means = nested_means(types, segs, d0, d1, slack=0.01)
    assert min(means) < 1  # later segments: the regime where integers cannot follow the fluid
    assert nested_violations(segs, means, 60, d0, d1, 117840) == []
    wtypes = [PromptType(20, 10, 10), PromptType(10, 10, 20)]
    assert wait_violations(wtypes, wait_means(wtypes, 0.01, 1e-5, 0.0), 0.01, 1e-5, 1000) == []
    assert any(b.startswith("(11a)") for b in wait_violations(wtypes, [50, 50], 0.01, 1e-5, 1000))


def test_thresholds_breaking_the_conditions_warn_and_strict_refuses():
    with pytest.warns(UserWarning, match=r"\(12b\)"):
        run_model("nested-wait", LENGTHS, 6.0, 10_000, d0=0.05, d1=0.0005, num_requests=20, seed=0,
                  types=SPEC, thresholds="4,2,1")
    with pytest.raises(ValueError, match=r"\(12b\)"):
        run_model("nested-wait", LENGTHS, 6.0, 10_000, d0=0.05, d1=0.0005, num_requests=20, seed=0,
                  types=SPEC, thresholds="4,2,1", strict=True)


@pytest.mark.parametrize("algo", ["wait", "nested-wait"])
def test_fluid_random_rule_serves_everything_without_warnings(algo):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = run_model(algo, LENGTHS, 6.0, 10_000, d0=0.05, d1=0.0005, num_requests=300, seed=3, types=SPEC,
                        rule="fluid-random", slack=0.1, max_wait=0.5)
    assert res["finished"] == 300 and res["preemptions"] == 0


def test_kv_ledger_shows_algorithm_1_pausing_and_the_entry_gate_not():
    paused = _run("wait", 10_000, gate="type")["kv"]
    flowing = _run("wait", 10_000, gate="entry")["kv"]
    for kv in (paused, flowing):
        assert kv["resident_kv"] >= kv["paused_kv"] >= 0 and kv["batch_kv"] > 0
        assert kv["peak_resident_kv"] <= kv["kv_total"]
    assert paused["paused_share"] > 0.05
    assert flowing["paused_share"] < paused["paused_share"] / 2


def test_wait_budget_gate_keeps_in_flight_within_the_batch_cap():
    from llmsched.batchtime.linear import LinearBatchTime
    from llmsched.engine.replica import Replica, ReplicaConfig
    from llmsched.schedulers.registry import create_scheduler
    from llmsched.sim.simulator import simulate
    from llmsched.workload.arrivals.processes import Poisson
    from llmsched.workload.workload import OpenLoop, Workload
    for algo in ("wait",):
        cfg = ReplicaConfig(num_blocks=100_000, block_size=1, max_num_seqs=10_000, max_num_batched_tokens=1 << 30,
                            max_model_len=1 << 20, oracle=algo == "wait")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rep = Replica(0, create_scheduler(algo, types=SPEC, batch_cap=30, gate="budget"),
                          LinearBatchTime.from_wait(0.05, 0.0005), cfg)
            simulate(OpenLoop(Workload(Poisson(60.0), LENGTHS, num_requests=300, seed=2).requests()), [rep], seed=2)
        running = np.asarray(rep.steps.num_running)
        assert running.max() <= 30  # the per-type budgets B_j sum to B
        assert running.max() >= 20  # and the budget is used


def test_overloaded_fluid_random_fills_the_memory_instead():
    from llmsched.schedulers.wait.nested import segment_memory
    from llmsched.schedulers.wait.thresholds import fluid_or_memory_means
    types = [PromptType(2000.0, 10, 10), PromptType(1000.0, 10, 20)]
    means, over = fluid_or_memory_means("wait", types, None, 0.01, 1e-3, 0.0, memory=5000, seats=10_000)
    assert over and abs(sum(x * t.memory for x, t in zip(means, types)) - 5000) < 1e-6
    assert abs(means[0] / means[1] - 2) < 1e-9  # the rates' proportions
    segs = segments(types)
    means, over = fluid_or_memory_means("nested", types, segs, 0.01, 1e-3, 0.0, memory=1e9, seats=300)
    assert over and abs(sum(x * s.stages for x, s in zip(means, segs)) - 300) < 1e-6
    stable, over = fluid_or_memory_means("nested", types, segs, 0.01, 1e-7, 0.01, memory=1e9, seats=300)
    assert not over and segment_memory(10, segs, stable) > 0


def test_fluid_random_keeps_sparse_segments_moving_where_integer_thresholds_starve():
    # n_s = 1 everywhere (B rule, small B): a segment whose boundary is empty pauses its in-flight prompts, so at
    # a low rate they crawl at one stage per max_wait; time-shared thresholds let them advance every iteration
    kw = dict(d0=0.02, d1=1e-6, num_requests=150, seed=4, types=SPEC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rounded = run_model("nested-wait", LENGTHS, 2.0, 100_000, batch_cap=4, **kw)
        shared = run_model("nested-wait", LENGTHS, 2.0, 100_000, rule="fluid-random", slack=0.01, **kw)
    assert shared["finished"] == rounded["finished"] == 150
    assert shared["latency"] < 0.5 * rounded["latency"]


def test_authors_kv_is_vidurs_memory_planner_for_llama3_8b_on_an_a100():
    # vidur/scheduler/utils/memory_planner.py: slots = ⌊(0.9·80 GiB − 2 bytes·params) / (max_tokens·KV/token)⌋,
    # num_blocks = slots · max_tokens / block_size, with the custom generator's max_tokens = 4096
    from llmsched.hardware.models import model
    from llmsched.reproduce.wait_runs.authors import VIDUR_A100_LLAMA3_8B_BLOCKS
    m = model("llama-3-8b")
    slots = int((0.9 * 80 * 2**30 - m.weight_bytes) // (4096 * m.kv_bytes_per_token))
    assert slots * 4096 // 16 == VIDUR_A100_LLAMA3_8B_BLOCKS

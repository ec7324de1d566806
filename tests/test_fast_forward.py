"""Fast-forwarded decode runs give exactly what stepping gives: every registered scheduler, byte for byte.

The old step-by-step path is ``fast_forward=False`` (``--no-fast-forward``); the files compared are the ones a
user gets from ``llmsched simulate --out``: requests.csv, steps.csv and summary.json (less its wall time).
"""
from __future__ import annotations

import dataclasses

import pytest

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import RunConfig, run
from llmsched.metrics.summary import summarize
from llmsched.schedulers.base import Scheduler
from llmsched.schedulers.registry import create_scheduler, scheduler_names

from run_files import written_files

WORKLOADS = {
    "kv-pressure": dict(workload="sharegpt", rate=12.0, num_requests=60, num_blocks=300, max_num_seqs=32),
    "evict-restart": dict(workload="sharegpt", rate=12.0, num_requests=60, num_blocks=300, overflow="evict-newest"),
    "evict-recompute": dict(workload="sharegpt", rate=12.0, num_requests=60, num_blocks=300,
                            overflow="evict-newest-recompute"),
    "swap": dict(workload="sharegpt", rate=12.0, num_requests=60, num_blocks=300, preemption_mode="swap"),
    "replicas-tiers": dict(workload="azure-conv", rate=20.0, num_requests=80, replicas=3, router="least-load",
                           tiers="paid:ttft=1:tbt=0.1:share=0.3,free:ttft=5:tbt=0.5"),
    "closed-loop": dict(workload="sharegpt", concurrency=16, num_requests=60, rate=None, num_blocks=800),
    "horizon": dict(workload="azure-conv", rate=8.0, num_requests=100, horizon=6.0, num_blocks=600),
    "light": dict(workload="sharegpt", rate=1.0, num_requests=40),
}
ALL_WORKLOADS = ("sarathi", "vllm-chunked", "vllm", "fcfs", "orca")


def _cases():
    names = scheduler_names()
    keys = list(WORKLOADS)
    for i, name in enumerate(names):
        picks = keys if name in ALL_WORKLOADS else [keys[i % len(keys)], keys[(i + 3) % len(keys)], "light"]
        for key in dict.fromkeys(picks):
            if key == "swap" and create_scheduler(name).recompute_only:
                continue
            yield name, key


def _files(cfg: RunConfig, tmp_path, label: str) -> dict[str, str]:
    try:
        result = run(cfg)
    except ValueError as e:
        return {"error": str(e)}
    return written_files(result, summarize(result, warmup=cfg.warmup, cooldown=cfg.cooldown), tmp_path / label)


@pytest.mark.parametrize("name,workload", list(_cases()))
def test_fast_forward_is_identical_to_stepping(name, workload, tmp_path):
    cfg = RunConfig(scheduler=name, oracle=True, seed=5, **WORKLOADS[workload])
    stepped = _files(dataclasses.replace(cfg, fast_forward=False), tmp_path, "stepped")
    fast = _files(cfg, tmp_path, "fast")
    assert stepped.keys() == fast.keys()
    for key in stepped:
        assert fast[key] == stepped[key], f"{name} on {workload}: {key} differs with fast-forward"


def _count_policy_calls(cfg: RunConfig) -> tuple[int, int]:
    from llmsched import experiment
    calls = [0]
    original = experiment.build_replicas

    def counting(*args, **kwargs):
        replicas = original(*args, **kwargs)
        for rep in replicas:
            decide = rep.scheduler.schedule

            def counted(view, decide=decide):
                calls[0] += 1
                return decide(view)
            rep.scheduler.schedule = counted
        return replicas
    experiment.build_replicas = counting
    try:
        result = run(cfg)
    finally:
        experiment.build_replicas = original
    return calls[0], len(result.steps)


@pytest.mark.parametrize("name", ["sarathi", "vllm-chunked", "vllm", "orca", "fcfs", "rad"])
def test_fast_forward_skips_the_policy_in_decode_runs(name):
    """Light load, long outputs: most steps are decode-only runs, which the policy no longer sees one by one."""
    cfg = RunConfig(scheduler=name, workload="sharegpt", rate=0.5, num_requests=30, seed=2)
    fast_calls, fast_steps = _count_policy_calls(cfg)
    step_calls, step_steps = _count_policy_calls(dataclasses.replace(cfg, fast_forward=False))
    assert fast_steps == step_steps
    assert step_calls >= step_steps
    assert fast_calls < 0.5 * step_calls


def test_policies_with_per_step_state_are_stepped():
    for name in scheduler_names():
        sched = create_scheduler(name)
        if type(sched).on_step_end is not Scheduler.on_step_end:
            assert not sched.steady_decodes, name


def test_a_policy_with_per_step_state_cannot_declare_steady_decodes():
    with pytest.raises(TypeError, match="per-step state"):
        type("Counting", (Scheduler,), {"steady_decodes": True, "on_step_end": lambda self, v, p, d: None})
    # a new decision rule does not inherit the declaration
    sarathi = type(create_scheduler("sarathi"))
    assert not type("Custom", (sarathi,), {"schedule": lambda self, view: None}).steady_decodes


@pytest.mark.parametrize("num_blocks", [40, 97, 2000])
def test_kv_limit_and_horizon_stop_a_run_exactly(num_blocks, tmp_path):
    """Few blocks: decodes cross into new blocks mid-run and the run must stop where stepping preempts."""
    cfg = RunConfig(scheduler="vllm-chunked", workload="sharegpt", rate=3.0, num_requests=40, seed=11,
                    num_blocks=num_blocks, horizon=20.0, max_model_len=600)
    assert _files(cfg, tmp_path, "a") == _files(dataclasses.replace(cfg, fast_forward=False), tmp_path, "b")


def _checked_run(cfg: RunConfig):
    """``cfg``'s run with the full accounting check after every step: (result, replicas)."""
    from llmsched.experiment import build_replicas, build_source, workload_params
    from llmsched.sim.simulator import simulate
    source = build_source(cfg)
    replicas = build_replicas(cfg, workload_params(cfg, source))
    for rep in replicas:
        rep.config = dataclasses.replace(rep.config, check_invariants=True)
    return simulate(source, replicas, horizon=cfg.horizon), replicas


def test_invariants_hold_after_every_fast_forward():
    cfg = RunConfig(scheduler="sarathi", workload="sharegpt", rate=2.0, num_requests=40, seed=4, num_blocks=400)
    result, replicas = _checked_run(cfg)
    assert len(result.requests) == 40 and replicas[0].num_steps == len(result.steps)


def test_replica_without_a_simulator_never_fast_forwards():
    """A replica driven step by step (the real engine, InferMax's offline runner) passes no ``until``."""
    from llmsched.batchtime.registry import make_batch_time_model
    from llmsched.request import Request
    rep = Replica(0, create_scheduler("sarathi"), make_batch_time_model("roofline", "llama-3-8b", "a100"),
                  ReplicaConfig(num_blocks=100))
    rep.add(Request(0, 0.0, 20, 50), 0.0)
    now, steps = 0.0, 0
    while rep.num_outstanding:
        d = rep.start_step(now)
        now += d
        rep.end_step(now)
        steps += 1
    assert steps == 50 and rep.num_steps == 50


@pytest.mark.parametrize("name", ["sarathi", "vllm-chunked"])
def test_open_loop_runs_fold_past_finishes(name, tmp_path, monkeypatch):
    """Short outputs: requests finish inside decode runs. Folding past them matches stepping and asks the policy
    less often than stopping at each finish."""
    cfg = RunConfig(scheduler=name, workload="azure-conv", rate=3.0, num_requests=120, seed=9, num_blocks=700)
    assert _files(cfg, tmp_path, "a") == _files(dataclasses.replace(cfg, fast_forward=False), tmp_path, "b")
    past, steps = _count_policy_calls(cfg)
    monkeypatch.setattr(type(create_scheduler(name)), "steady_after_finishes", False)
    stopping, steps_stopping = _count_policy_calls(cfg)
    assert steps == steps_stopping and past < stopping


def test_steady_after_finishes_needs_steady_decodes_and_is_not_inherited_by_a_new_rule():
    with pytest.raises(TypeError, match="needs steady_decodes"):
        type("Eager", (Scheduler,), {"steady_after_finishes": True})
    sarathi = type(create_scheduler("sarathi"))
    assert sarathi.steady_after_finishes
    assert not type("Custom", (sarathi,), {"schedule": lambda self, view: None}).steady_after_finishes


def test_only_a_source_whose_completions_add_nothing_lets_runs_fold_past_finishes():
    from llmsched.workload.workload import ClosedLoop, OpenLoop, StreamedOpenLoop
    assert not OpenLoop.done_adds_requests and not StreamedOpenLoop.done_adds_requests
    assert getattr(ClosedLoop, "done_adds_requests", True)
    assert type("Refilling", (OpenLoop,), {"on_done": lambda self, req, now: []}).done_adds_requests


@pytest.mark.parametrize("name,num_blocks", [("sarathi", 120), ("vllm-chunked", 120), ("vllm-chunked", 3000)])
def test_invariants_hold_when_runs_fold_past_finishes(name, num_blocks, tmp_path):
    """Short outputs and few blocks: finishes free blocks mid-run and later decodes need them."""
    cfg = RunConfig(scheduler=name, workload="azure-conv", rate=6.0, num_requests=150, seed=12, num_blocks=num_blocks,
                    max_model_len=1500)
    result, replicas = _checked_run(cfg)
    assert len(result.requests) == 150 and replicas[0].num_steps == len(result.steps)
    assert replicas[0].quiet_finishes and replicas[0].scheduler.steady_after_finishes
    assert _files(cfg, tmp_path, "a") == _files(dataclasses.replace(cfg, fast_forward=False), tmp_path, "b")

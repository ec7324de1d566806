"""A policy written with ``RunningFirst``'s hooks alone gets the decode-group path and the fast-forward, exactly.

Two policies no module defines, each only an order, a budget and an admission rule (schedulers/running_first.py): one
serves every decode first and admits the shortest waiting prompts, the other runs vLLM v1's pass in admission order
and admits whole prompts that fit. Neither declares ``steady_decodes``, ``steady_after_finishes`` or
``plans_decode_group`` nor looks at the decode group; the runs that fold decode steps and plan from the group must give
the files of the runs that step every request, and the group must carry most steps.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from operator import attrgetter

import pytest

from llmsched.experiment import RunConfig, build_replicas, build_source, workload_params
from llmsched.schedulers import registry
from llmsched.schedulers.running_first import RunningFirst
from llmsched.sim.simulator import simulate

from test_decode_group import MORE
from test_fast_forward import WORKLOADS, _checked_run, _files

PROMPT_LEN = attrgetter("prompt_len")


@dataclass
class DecodesThenShortest(RunningFirst):
    """Every decode, then the unfinished prompts' chunks oldest first, then the shortest waiting prompts."""
    name = "test-decodes-then-shortest"
    running_order = attrgetter("arrival")
    token_budget: int = 256

    def step_budget(self, view):
        return min(self.token_budget, view.max_num_batched_tokens)

    def admit(self, view, plan, budget, free, room):
        for r in sorted(view.waiting, key=PROMPT_LEN):
            n = min(view.tokens_to_compute(r), budget)
            need = view.admission_blocks(r, n)
            if n <= 0 or room < 1 or need > free:
                break
            plan.prefills.append((r, n))
            budget, free, room = budget - n, free - need, room - 1


@dataclass
class InOrderWholePrompts(RunningFirst):
    """vLLM v1's pass over the running requests in admission order; waiting prompts admitted whole when they fit."""
    name = "test-in-order-whole"
    decodes_first = False

    def admit(self, view, plan, budget, free, room):
        for r in view.waiting:
            n = view.tokens_to_compute(r)
            need = view.admission_blocks(r, n)
            if n > budget or room < 1 or need > free:
                break
            plan.prefills.append((r, n))
            budget, free, room = budget - n, free - need, room - 1


POLICIES = (DecodesThenShortest, InOrderWholePrompts)


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    registry.scheduler_names()  # the built-in ones first
    for cls in POLICIES:
        monkeypatch.setitem(registry._REGISTRY, cls.name, (cls, {}, cls.__doc__))


@pytest.mark.parametrize("cls", POLICIES)
def test_the_three_properties_come_from_the_hooks(cls):
    declared = {"steady_decodes", "steady_after_finishes", "plans_decode_group", "schedule"} & set(cls.__dict__)
    assert not declared
    assert cls.steady_decodes and cls.steady_after_finishes and cls.plans_decode_group


@pytest.mark.parametrize("workload", [*WORKLOADS, *MORE])
@pytest.mark.parametrize("cls", POLICIES)
def test_the_derived_group_path_is_identical_to_stepping(cls, workload, tmp_path):
    spec = {**WORKLOADS, **MORE}[workload]
    if cls is InOrderWholePrompts and "max_num_batched_tokens" in spec:
        spec = {**spec, "max_num_seqs": 64}  # whole prompts: a budget below a prompt would reject it, as intended
    cfg = RunConfig(scheduler=cls.name, seed=3, **spec)
    fast = _files(cfg, tmp_path, "group")
    assert "error" not in fast, fast
    assert fast == _files(dataclasses.replace(cfg, fast_forward=False), tmp_path, "ref")
    result, _ = _checked_run(cfg)  # the full KV and group check after every step
    assert cfg.horizon is not None or len(result.requests) == cfg.num_requests


@pytest.mark.parametrize("cls", POLICIES)
def test_the_group_carries_most_steps(cls):
    cfg = RunConfig(scheduler=cls.name, workload="sharegpt", concurrency=64, rate=None, num_requests=300, seed=2)
    source = build_source(cfg)
    replicas = build_replicas(cfg, workload_params(cfg, source))
    calls = {"listed": 0}
    for rep in replicas:  # on the instance: a compiled Replica's type is immutable (llmsched/compiled.py)
        listed = rep._end_listed_step

        def counting(plan, now, listed=listed):
            calls["listed"] += 1
            return listed(plan, now)

        rep._end_listed_step = counting
    result = simulate(source, replicas)
    assert len(result.requests) == 300
    assert 0 < calls["listed"] < 0.1 * len(result.steps)


def test_a_pass_in_admission_order_takes_no_other_order():
    with pytest.raises(TypeError, match="admission order"):
        type("Sorted", (RunningFirst,), {"decodes_first": False, "running_order": PROMPT_LEN})

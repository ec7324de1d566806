"""The decode group (event-driven decode accounting) gives exactly what stepping every request gives.

``fast_forward=False`` is the reference: every request's fields written at every step. With it on, sarathi and
vllm-chunked plan from the view's decode group and the replica advances its members by a clock; the files a user
gets must not change by a byte, whatever settles the group (a preemption, a router reading the running requests
mid-step, swap, eviction, a horizon) and with the full KV check after every step.
"""
from __future__ import annotations

import dataclasses
import random

import pytest

from llmsched.engine.decode_group import DecodeGroup
from llmsched.engine.kv_cache import KVCacheManager
from llmsched.engine.replica import Replica
from llmsched.experiment import RunConfig
from llmsched.request import Request
from llmsched.routing.base import Router
from llmsched.routing.registry import router_classes
from llmsched.schedulers.base import Scheduler
from llmsched.schedulers.registry import create_scheduler

from test_fast_forward import WORKLOADS, _checked_run, _files

GROUP_POLICIES = ("sarathi", "sarathi-spf", "vllm-chunked", "vllm", "orca", "fcfs", "rad", "fastertransformer")
MORE = {
    "tight-kv-short-outputs": dict(workload="azure-conv", rate=6.0, num_requests=150, num_blocks=120,
                                   max_model_len=1500),
    "vllm-dp-router": dict(workload="azure-conv", rate=16.0, num_requests=120, replicas=2, router="vllm-dp"),
    "small-budget": dict(workload="sharegpt", rate=6.0, num_requests=60, max_num_batched_tokens=64,
                         max_num_seqs=96, num_blocks=2000),
}


@pytest.mark.parametrize("workload", [*WORKLOADS, *MORE])
@pytest.mark.parametrize("name", GROUP_POLICIES)
def test_group_is_identical_to_stepping_every_request(name, workload, tmp_path):
    spec = {**WORKLOADS, **MORE}[workload]
    if name in ("vllm-chunked", "vllm") and "max_num_batched_tokens" in spec:
        spec = {**spec, "max_num_seqs": 64}  # vLLM's budget must hold every decode
    if name == "vllm" and "max_num_batched_tokens" in spec:
        spec = {**spec, "max_model_len": 64}  # and without chunked prefill, the context
    cfg = RunConfig(scheduler=name, seed=3, **spec)
    assert _files(cfg, tmp_path, "group") == _files(dataclasses.replace(cfg, fast_forward=False), tmp_path, "ref")
    result, _ = _checked_run(cfg)  # the full KV and group check after every step
    assert cfg.horizon is not None or len(result.requests) == cfg.num_requests


@pytest.mark.parametrize("name", GROUP_POLICIES)
def test_group_carries_most_steps(name):
    """The group is used, not just correct: few steps of a busy run end as a plan that lists its decodes."""
    from llmsched.experiment import build_replicas, build_source, workload_params
    from llmsched.sim.simulator import simulate
    cfg = RunConfig(scheduler=name, workload="sharegpt", concurrency=64, rate=None, num_requests=300, seed=2)
    source = build_source(cfg)
    replicas = build_replicas(cfg, workload_params(cfg, source))
    calls = {"listed": 0}
    for rep in replicas:  # on the instance: a compiled Replica's type is immutable (llmsched/compiled.py)
        listed = rep._end_listed_step

        def counting(plan, now, listed=listed):
            calls["listed"] += 1
            return listed(plan, now)

        rep._end_listed_step = counting
        rep.config = dataclasses.replace(rep.config, check_invariants=True)
    result = simulate(source, replicas)
    assert len(result.requests) == 300
    assert 0 < calls["listed"] < 0.1 * len(result.steps)


class ReadsRunning(Router):
    """Routes by the running requests' remaining prompt tokens: reads them while a step is in flight."""

    name = "reads-running"

    def route(self, req, replicas, rng):
        loads = [sum(r.prompt_len - min(r.num_computed, r.prompt_len) for r in rep.view.running) + len(rep.waiting)
                 for rep in replicas]
        return loads.index(min(loads))


@pytest.mark.parametrize("name", GROUP_POLICIES)
def test_a_reader_mid_step_settles_the_group_exactly(name, tmp_path, monkeypatch):
    """A router that reads ``view.running`` while a group step is in flight dissolves the group there: the step
    then ends as a listed plan (its blocks taken at launch), and every figure matches stepping."""
    monkeypatch.setitem(router_classes(), ReadsRunning.name, ReadsRunning)
    cfg = RunConfig(scheduler=name, workload="azure-conv", rate=12.0, num_requests=150, seed=8, replicas=2,
                    num_blocks=500, router=ReadsRunning.name)
    assert _files(cfg, tmp_path, "group") == _files(dataclasses.replace(cfg, fast_forward=False), tmp_path, "ref")
    result, _ = _checked_run(cfg)
    assert len(result.requests) == 150


def test_plans_decode_group_needs_steady_decodes_and_a_new_rule_declares_it_again():
    with pytest.raises(TypeError, match="needs steady_decodes"):
        type("Eager", (Scheduler,), {"plans_decode_group": True})
    sarathi = type(create_scheduler("sarathi"))
    assert sarathi.plans_decode_group
    assert not type("Custom", (sarathi,), {"schedule": lambda self, view: None}).plans_decode_group


def test_a_group_plan_without_a_group_is_refused():
    from llmsched.batchtime.registry import make_batch_time_model
    from llmsched.engine.errors import PlanError
    from llmsched.engine.plan import BatchPlan
    from llmsched.engine.replica import ReplicaConfig

    class Claims(Scheduler):
        name = "claims-group"

        def schedule(self, view):
            return BatchPlan(decode_group=True)

    rep = Replica(0, Claims(), make_batch_time_model("roofline", "llama-3-8b", "a100"), ReplicaConfig(num_blocks=50))
    rep.add(Request(0, 0.0, 10, 5), 0.0)
    with pytest.raises(PlanError, match="decode_group"):
        rep.start_step(0.0)


def test_group_accounting_matches_writing_every_step():
    """Members joining, settling, leaving and finishing at random: their fields, once settled, are what writing
    every step gives, and the totals (size, context sum, block crossings) stay those of the members."""
    rng = random.Random(5)
    bs = 16
    g = DecodeGroup(KVCacheManager(1 << 20, bs))
    exact: dict[Request, list] = {}  # request -> [computed, generated, token times]
    next_id = 0
    for step in range(3000):
        if rng.random() < 0.3 or not g.members:
            prompt, out = rng.randint(1, 200), rng.randint(2, 60)
            r = Request(next_id, 0.0, prompt, out)
            next_id += 1
            r.num_computed, r.num_generated, r.num_blocks = prompt, 1, -(-prompt // bs)
            r.token_times.append(float(step))
            g.join(r)
            exact[r] = [prompt, 1, [float(step)]]
        if rng.random() < 0.05 and g.members:
            r = rng.choice(list(g.members))
            g.leave(r)
            assert (r.num_computed, r.num_generated, list(r.token_times)) == tuple(exact.pop(r))
            assert r.num_blocks == -(-r.num_computed // bs) and r.lag == -1
        assert g.blocks_needed == sum(1 for c, _, _ in exact.values() if c % bs == 0)
        assert g.context_sum == sum(c + 1 for c, _, _ in exact.values())
        end = float(step) + 0.5
        for e in exact.values():
            e[0] += 1
            e[1] += 1
            e[2].append(end)
        for r in g.step(end):
            assert (r.num_computed, r.num_generated, list(r.token_times)) == tuple(exact.pop(r))
            assert r.num_generated == r.output_len and r.last_token == end
        assert len(g.members) == len(exact)
        assert all(k > g.clock for k in g.due), "finish times already passed are kept"
    for r in list(g.members):
        g.settle(r)
        assert (r.num_computed, r.num_generated, list(r.token_times)) == tuple(exact[r])

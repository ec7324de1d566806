"""Replicas run as lanes (sim/lanes.py) give the event loop's rows and values; only rows of different replicas
that end at the same instant may come in another order (then by replica index), and float sums over such ties may
differ in the last digit."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_replicas, build_source, workload_params
from llmsched.metrics.summary import summarize
from llmsched.request import Request, Status
from llmsched.routing.registry import make_router
from llmsched.schedulers.registry import create_scheduler, scheduler_names
from llmsched.sim import lanes as lanes_module
from llmsched.sim.simulator import simulate
from llmsched.workload.workload import ClosedLoop, OpenLoop

from run_files import without_wall_time, written_files

WORKLOADS = {
    "kv-pressure": dict(workload="sharegpt", rate=24.0, num_requests=90, num_blocks=300, max_num_seqs=32,
                        replicas=3, router="round-robin"),
    "evict": dict(workload="sharegpt", rate=24.0, num_requests=90, num_blocks=300, overflow="evict-newest-recompute",
                  replicas=2, router="random"),
    "swap": dict(workload="sharegpt", rate=24.0, num_requests=90, num_blocks=300, preemption_mode="swap",
                 replicas=3, router="random"),
    "tiers-horizon": dict(workload="azure-conv", rate=30.0, num_requests=200, horizon=5.0, replicas=4,
                          router="round-robin", tiers="paid:ttft=1:tbt=0.1:share=0.3,free:ttft=5:tbt=0.5"),
    "light": dict(workload="azure-conv", rate=3.0, num_requests=60, replicas=4, router="round-robin"),
}


def _run(cfg: RunConfig, lanes: bool, source=None):
    source = source or build_source(cfg)
    replicas = build_replicas(cfg, workload_params(cfg, source))
    return simulate(source, replicas, make_router(cfg.router), horizon=cfg.horizon, seed=cfg.seed, lanes=lanes)


def _files(result, tmp_path, label: str) -> dict[str, str]:
    return written_files(result, summarize(result), tmp_path / label)


def _canonical(result):
    """Step rows by (end, replica) and request rows by (finish, replica), each replica's in its own order."""
    cols = {k: np.asarray(v) for k, v in result.steps.columns().items()}
    end = cols["start"] + cols["duration"]
    order = np.lexsort((np.arange(len(end)), cols["replica"], end))
    steps = {k: v[order] for k, v in cols.items()}
    req = {k: np.asarray(v) for k, v in result.requests.cols.items()}
    order = np.lexsort((np.arange(len(req["id"])), req["replica"], req["finish"]))
    return steps, {k: v[order] for k, v in req.items()}


def _cross_replica_ties(result) -> bool:
    cols = result.steps.columns()
    end = np.asarray(cols["start"]) + np.asarray(cols["duration"])
    replica = np.asarray(cols["replica"])
    finished = np.asarray(result.requests.cols["status"]) == int(Status.FINISHED)  # the rest may leave at the end
    finish = np.asarray(result.requests.cols["finish"])[finished]
    reps = np.asarray(result.requests.cols["replica"])[finished]
    for t, r in ((end, replica), (finish, reps)):
        if len(t) < 2:
            continue
        for value in np.unique(t[np.r_[False, np.diff(t) == 0] | np.r_[np.diff(t) == 0, False]]):
            if len(set(r[t == value].tolist())) > 1:
                return True
    return False


def _cases():
    for i, name in enumerate(scheduler_names()):
        keys = list(WORKLOADS)
        for key in dict.fromkeys([keys[i % len(keys)], keys[(i + 2) % len(keys)], "light"]):
            if key == "swap" and create_scheduler(name).recompute_only:
                continue
            yield name, key


@pytest.mark.parametrize("name,workload", list(_cases()))
def test_lanes_give_the_event_loops_files(name, workload, tmp_path):
    cfg = RunConfig(scheduler=name, oracle=True, seed=7, **WORKLOADS[workload])
    loop = _run(cfg, lanes=False)
    lanes = _run(cfg, lanes=True)
    assert not _cross_replica_ties(loop), "no exact ties on these arrivals: the files must be the same bytes"
    assert _files(lanes, tmp_path, "lanes") == _files(loop, tmp_path, "loop")


@pytest.mark.parametrize("name", ["sarathi", "vllm", "rad", "fastertransformer"])
def test_lanes_are_identical_with_and_without_fast_forward(name, tmp_path):
    cfg = RunConfig(scheduler=name, seed=3, **WORKLOADS["kv-pressure"])
    stepped = _run(dataclasses.replace(cfg, fast_forward=False), lanes=True)
    assert _files(_run(cfg, lanes=True), tmp_path, "fast") == _files(stepped, tmp_path, "stepped")


def _burst_source(n_replicas: int, seed: int):
    """Arrivals in bursts of identical requests at the same instants: replicas end steps and requests at exactly
    the same times, the case where the two orders may differ."""
    rng = np.random.default_rng(seed)
    reqs, rid = [], 0
    for t in np.cumsum(rng.exponential(0.4, size=12)):
        prompt, output = int(rng.integers(20, 400)), int(rng.integers(2, 40))
        for _ in range(n_replicas * int(rng.integers(1, 4))):
            reqs.append(Request(rid, float(t), prompt, output))
            rid += 1
    return reqs


@pytest.mark.parametrize("window", [1, 3, 2048])
@pytest.mark.parametrize("name", ["sarathi", "vllm", "orca"])
def test_simultaneous_ends_are_ordered_by_replica(name, window, monkeypatch):
    monkeypatch.setattr(lanes_module, "WINDOW", window)
    monkeypatch.setattr(lanes_module, "PER_LANE", 1)
    cfg = RunConfig(scheduler=name, workload="sharegpt", replicas=3, router="round-robin", num_blocks=400)
    loop = _run(cfg, False, OpenLoop(_burst_source(3, 1)))
    lanes = _run(cfg, True, OpenLoop(_burst_source(3, 1)))
    assert _cross_replica_ties(loop), "the bursts should make replicas end steps at the same instants"
    want_steps, want_req = _canonical(loop)
    got_steps = {k: np.asarray(v) for k, v in lanes.steps.columns().items()}
    got_req = {k: np.asarray(v) for k, v in lanes.requests.cols.items()}
    for k in want_steps:
        assert np.array_equal(got_steps[k], want_steps[k]), f"steps column {k}"
    for k in want_req:
        assert np.array_equal(got_req[k], want_req[k], equal_nan=True), f"requests column {k}"
    _close(without_wall_time(summarize(loop)), without_wall_time(summarize(lanes)))


def _close(a, b, path=""):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and not math.isnan(a):
        assert b == pytest.approx(a, rel=1e-12, abs=1e-15), path
    else:
        assert a == b or (a != a and b != b), path


@pytest.mark.parametrize("window", [1, 5])
def test_small_windows_change_nothing(window, monkeypatch, tmp_path):
    cfg = RunConfig(scheduler="vllm-chunked", seed=2, **WORKLOADS["tiers-horizon"])
    want = _files(_run(cfg, lanes=True), tmp_path, "a")
    monkeypatch.setattr(lanes_module, "WINDOW", window)
    monkeypatch.setattr(lanes_module, "PER_LANE", 1)
    assert _files(_run(cfg, lanes=True), tmp_path, "b") == want


def test_lanes_run_only_where_they_cannot_change_a_result(monkeypatch):
    base = dict(scheduler="sarathi", workload="azure-conv", rate=8.0, num_requests=40)
    ran = []
    original = lanes_module.run_lanes
    monkeypatch.setattr("llmsched.sim.simulator.run_lanes", lambda *a, **k: ran.append(1) or original(*a, **k))
    for extra, expected in ((dict(replicas=2, router="round-robin"), True),
                            (dict(replicas=2, router="random"), True),
                            (dict(replicas=1, router="round-robin"), False),
                            (dict(replicas=2, router="least-outstanding"), False),
                            (dict(replicas=2, router="least-load"), False)):
        ran.clear()
        _run(RunConfig(**base, **extra), lanes=True)
        assert bool(ran) == expected, extra
    ran.clear()
    cfg = RunConfig(scheduler="sarathi", workload="sharegpt", concurrency=4, num_requests=12, rate=None,
                    replicas=2, router="round-robin")
    assert isinstance(build_source(cfg), ClosedLoop)
    _run(cfg, lanes=True)
    assert not ran, "a closed loop adds requests at finishes: one event loop"


def test_no_lanes_runs_the_one_event_loop(tmp_path, monkeypatch):
    """``--no-lanes`` (``lanes = false``) turns lanes off for a run that would take them; same files here."""
    from llmsched.cli import main
    ran = []
    original = lanes_module.run_lanes
    monkeypatch.setattr("llmsched.sim.simulator.run_lanes", lambda *a, **k: ran.append(1) or original(*a, **k))
    args = ["simulate", "--scheduler", "sarathi", "--workload", "azure-conv", "--rate", "8", "--num-requests", "40",
            "--replicas", "3", "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "lanes")]) == 0 and ran
    ran.clear()
    assert main(args + ["--no-lanes", "--out", str(tmp_path / "loop")]) == 0 and not ran
    meta = json.loads((tmp_path / "loop" / "meta.json").read_text())
    assert meta["config"]["lanes"] is False
    for name in ("requests.csv", "steps.csv"):
        assert (tmp_path / "lanes" / name).read_text() == (tmp_path / "loop" / name).read_text()


def test_lanes_keep_the_shared_step_log_on_the_replicas():
    cfg = RunConfig(scheduler="sarathi", workload="azure-conv", rate=8.0, num_requests=30, replicas=3,
                    router="round-robin")
    source = build_source(cfg)
    replicas = build_replicas(cfg, workload_params(cfg, source))
    shared = replicas[0].steps
    result = simulate(source, replicas, make_router(cfg.router), lanes=True)
    assert all(rep.steps is shared for rep in replicas) and result.steps is shared
    assert len(shared) == sum(rep.num_steps for rep in replicas)


def test_a_new_routing_rule_does_not_inherit_routes_ahead():
    from llmsched.routing.simple import RoundRobin
    assert RoundRobin.routes_ahead
    assert not type("Busiest", (RoundRobin,), {"route": lambda self, req, replicas, rng: 0}).routes_ahead
    assert type("Counted", (RoundRobin,), {"left": lambda self, index, count: None}).routes_ahead


def test_lanes_refuse_a_source_out_of_arrival_order(monkeypatch):
    class Backwards:
        done_adds_requests = False

        def initial(self):
            yield Request(0, 5.0, 10, 5)
            yield Request(1, 1.0, 10, 5)

        def on_done(self, req, now):
            return []
    ran = []
    original = lanes_module.run_lanes
    monkeypatch.setattr("llmsched.sim.simulator.run_lanes", lambda *a, **k: ran.append(1) or original(*a, **k))
    cfg = RunConfig(scheduler="sarathi", replicas=2)
    with pytest.raises(ValueError, match="arrival order; request 1 arrives at 1.0"):
        simulate(Backwards(), build_replicas(cfg), make_router("round-robin"), lanes=True)
    assert ran


def test_lanes_refuse_an_open_loop_whose_completions_add_requests():
    """A source declaring that its completions add nothing, which then adds a request, is told so (not dropped)."""
    class Liar(OpenLoop):
        done_adds_requests = False

        def on_done(self, req, now):
            return [Request(req.id + 100, now, 10, 5)]
    cfg = RunConfig(scheduler="sarathi", replicas=2)
    with pytest.raises(RuntimeError, match="declares done_adds_requests = False"):
        simulate(Liar([Request(0, 0.0, 10, 5), Request(1, 0.5, 10, 5)]), build_replicas(cfg),
                 make_router("round-robin"), lanes=True)

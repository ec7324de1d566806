"""Open-loop requests are built when the run reaches them, with the same results as a list built up front."""
from __future__ import annotations

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_replicas, build_source
from llmsched.request import Request
from llmsched.sim.simulator import simulate
from llmsched.workload.workload import OpenLoop, StreamedOpenLoop


def _columns(result):
    log = result.requests
    return {name: [repr(x) for x in log.column(name).tolist()]  # repr: NaN (unfinished) equals NaN
            for name in ("id", "status", "first_token", "finish", "num_gaps")}


@pytest.mark.parametrize("extra", [{}, {"replicas": 3, "router": "least-load"}, {"horizon": 20.0}])
def test_streamed_source_gives_what_a_list_gives(extra):
    cfg = RunConfig(scheduler="vllm-chunked", workload="azure-conv", rate=6.0, num_requests=150, seed=3, **extra)
    streamed = build_source(cfg)
    assert isinstance(streamed, StreamedOpenLoop) and len(streamed) == 150
    listed = OpenLoop(streamed.requests)
    listed_times = listed.arrival_times.copy()  # vLLM's async admission (the default engine model) re-stamps
    a = simulate(streamed, build_replicas(cfg), horizon=cfg.horizon, seed=cfg.seed)  # a held request's arrival
    b = simulate(listed, build_replicas(cfg), horizon=cfg.horizon, seed=cfg.seed)
    assert _columns(a) == _columns(b)
    assert np.array_equal(streamed.arrival_times, listed_times)
    assert all(np.array_equal(x, y) for x, y in zip(streamed.lengths, listed.lengths))


def test_requests_are_built_only_as_the_run_reaches_them():
    cfg = RunConfig(scheduler="sarathi", workload="sharegpt", rate=2.0, num_requests=200, seed=1)
    source = build_source(cfg)
    built = []
    make = source.initial

    def counting():
        for r in make():
            built.append(r.arrival)
            yield r
    source.initial = counting
    replicas = build_replicas(cfg)
    decide = replicas[0].scheduler.schedule
    seen = []

    def watched(view):
        seen.append(sum(1 for t in built if t > view.now))  # requests built ahead of the clock
        return decide(view)
    replicas[0].scheduler.schedule = watched
    simulate(source, replicas)
    assert len(built) == 200
    assert max(seen) == 1  # only the next arrival is ever built early


def test_a_source_out_of_arrival_order_is_refused():
    class Backwards:
        def initial(self):
            yield Request(0, 5.0, 10, 5)
            yield Request(1, 1.0, 10, 5)

        def on_done(self, req, now):
            return []
    cfg = RunConfig(scheduler="sarathi")
    with pytest.raises(ValueError, match="arrival order; request 1 arrives at 1.0"):
        simulate(Backwards(), build_replicas(cfg))


def test_a_list_in_any_order_is_sorted_by_arrival():
    cfg = RunConfig(scheduler="sarathi")
    reqs = [Request(0, 2.0, 10, 5), Request(1, 0.5, 10, 5), Request(2, 2.0, 20, 5)]
    result = simulate(OpenLoop(reqs), build_replicas(cfg))
    assert sorted(result.requests.column("id").tolist()) == [0, 1, 2]
    assert all(r.first_token >= r.arrival for r in reqs)

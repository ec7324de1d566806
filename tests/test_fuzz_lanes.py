"""Lanes (sim/lanes.py) change nothing but the order of rows tied across replicas, on random valid configurations.

The conservation fuzz's configurations (tests/test_fuzz_conservation.py) made eligible for lanes (at least two
replicas, routed by round-robin or random; closed loops left out: their finishes add requests), with four times its
requests: the run as lanes and the one event loop (``simulate(lanes=False)``) must give the same step rows, the same
request rows and each request's token gaps and reason, the rows compared in the lanes' order (steps by end, requests
by finish, then replica; tiers and tenants by name), or the same error. A quarter of ``LLMSCHED_FUZZ_COUNT`` seeds
(default 50; CI's 1000 gives 250); replay one with ``python tests/test_fuzz_lanes.py <seed>``.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import warnings

import numpy as np

from llmsched.experiment import RunConfig, build_replicas, build_source, workload_params
from llmsched.routing.registry import make_router
from llmsched.sim.simulator import simulate

from test_fuzz_conservation import random_config

# a seed here is eight of the conservation fuzz's runs (four times the requests, with and without lanes): a quarter
# of LLMSCHED_FUZZ_COUNT keeps CI's 1,000 within its time; set the variable higher for a wider search
COUNT = max(50, int(os.environ.get("LLMSCHED_FUZZ_COUNT", "200")) // 4)


def lanes_config(seed: int) -> RunConfig | None:
    """The conservation fuzz's config for ``seed`` with 2+ replicas routed ahead, or None for a closed loop."""
    cfg = random_config(seed)
    if cfg.concurrency:
        return None
    router = cfg.router if make_router(cfg.router).routes_ahead else ("round-robin", "random")[seed % 2]
    return dataclasses.replace(cfg, replicas=max(2, cfg.replicas), router=router,
                               num_requests=cfg.num_requests * 4 if cfg.num_requests else cfg.num_requests)


def outcome(cfg: RunConfig, lanes: bool):
    """The run's rows in the lanes' order, each request's gaps and reason (or the error it raised)."""
    try:
        source = build_source(cfg)
        replicas = build_replicas(cfg, workload_params(cfg, source))
        result = simulate(source, replicas, make_router(cfg.router), horizon=cfg.horizon, seed=cfg.seed,
                          lanes=lanes)
    except ValueError as e:
        return ("error", str(e))
    steps = {k: np.asarray(v) for k, v in result.steps.columns().items()}
    end = steps["start"] + steps["duration"]
    order = np.lexsort((np.arange(len(end)), steps["replica"], end))
    log = result.requests
    req = {k: np.asarray(v) for k, v in log.cols.items()}
    gaps = np.asarray(log.gaps)
    per_request = {int(i): gaps[o:o + n].tobytes()
                   for i, o, n in zip(req["id"], req["gap_offset"], req["num_gaps"])}
    rorder = np.lexsort((np.arange(len(req["id"])), req["replica"], req["finish"]))
    # a tier's or tenant's index is its place in the order the log first saw it, which a tie across replicas may
    # swap: compare their names
    req["tier"] = np.array(log.tiers)[req["tier"]]
    if "tenant" in req:
        req["tenant"] = np.array(log.tenants + [""])[req["tenant"]]  # -1: a request without one
    return ({k: v[order].tobytes() for k, v in steps.items()},
            {k: v[rorder].tobytes() for k, v in req.items() if k != "gap_offset"},
            per_request, dict(log.reasons), result.end_time)


def check(seed: int) -> bool:
    """True if ``seed`` drew an open loop (and both runs agree; else AssertionError)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = lanes_config(seed)
        if cfg is None:
            return False
        lanes, loop = outcome(cfg, True), outcome(cfg, False)
    assert lanes == loop, f"seed {seed}: lanes differ from the event loop for {cfg}"
    return True


def test_lanes_equal_the_event_loop_on_random_configs():
    checked = sum(check(seed) for seed in range(COUNT))
    assert checked >= COUNT // 2


if __name__ == "__main__":
    print("open loop" if check(int(sys.argv[1])) else "a closed loop")

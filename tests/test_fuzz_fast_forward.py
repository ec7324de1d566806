"""Fast-forwarding and the decode group change nothing, on random valid configurations.

The conservation fuzz's configurations (tests/test_fuzz_conservation.py: any router, 1-8 replicas, KV from a few
blocks to thousands, both preemption modes, every overflow mode, open and closed loops, tiers, horizons), with
eight times its requests, for every policy that declares ``steady_decodes``: the run with ``fast_forward`` (runs
of decode steps folded, the decode group for the policies that plan from it) must give the same request and step
columns, token gaps and reasons, byte for byte, as the run that steps every request (``fast_forward=False``), or
the same error. ``LLMSCHED_FUZZ_COUNT`` seeds (default 200; CI sets 1000); replay one with
``python tests/test_fuzz_fast_forward.py <seed>``.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import warnings


from llmsched.experiment import RunConfig, build_replicas, build_source, workload_params
from llmsched.routing.registry import make_router
from llmsched.schedulers.registry import create_scheduler
from llmsched.sim.simulator import simulate

from test_fuzz_conservation import random_config

COUNT = int(os.environ.get("LLMSCHED_FUZZ_COUNT", "200"))


def steady_config(seed: int) -> RunConfig | None:
    """The conservation fuzz's config for ``seed`` with eight times the requests, or None for a policy that
    never fast-forwards."""
    cfg = random_config(seed)
    if not create_scheduler(cfg.scheduler, **cfg.scheduler_params).steady_decodes:
        return None
    return dataclasses.replace(cfg, num_requests=cfg.num_requests * 8) if cfg.num_requests else cfg


def outcome(cfg: RunConfig):
    """Everything a run's files are made of, as bytes (or the error it raised)."""
    try:
        source = build_source(cfg)
        replicas = build_replicas(cfg, workload_params(cfg, source))
        result = simulate(source, replicas, make_router(cfg.router), horizon=cfg.horizon, seed=cfg.seed)
    except ValueError as e:
        return ("error", str(e))
    log = result.requests
    return ({name: col.tobytes() for name, col in log.cols.items()},
            {name: col.tobytes() for name, col in result.steps.columns().items()},
            log.gaps.tobytes(), dict(log.reasons), result.end_time)


def check(seed: int) -> bool:
    """True if ``seed`` drew a steady policy (and both runs agree; else AssertionError)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = steady_config(seed)
        if cfg is None:
            return False
        fast, stepped = outcome(cfg), outcome(dataclasses.replace(cfg, fast_forward=False))
    assert fast == stepped, f"seed {seed}: fast-forward differs from stepping for {cfg}"
    return True


def test_fast_forward_equals_stepping_on_random_configs():
    checked = sum(check(seed) for seed in range(COUNT))
    assert checked >= COUNT // 10  # about a fifth of the draws are steady policies


if __name__ == "__main__":
    print("steady" if check(int(sys.argv[1])) else "not a steady policy")

#!/usr/bin/env python
"""What a bounded drain would cut: a replica given up here drains without limit, where vLLM 0.32 aborts its
in-flight requests on SIGTERM unless ``--shutdown-timeout`` lets it drain (and Kubernetes kills the pod after
``terminationGracePeriodSeconds``). For each autoscaler on a step of load, the requests held by replicas when they
began draining and those a drain of BOUND seconds would have cut (docs/autoscaling.md, "Draining").

    python scripts/drain_bound.py [--bounds 30,45] [--policies kpa,hpa]
"""
from __future__ import annotations

import argparse

from llmsched.experiment import RunConfig, build_source
from llmsched.fleet_setup import simulate_fleet_config

ENGINE = {"latency_boundary": "engine", "batch_time": "roofline", "gpu": "h100", "workload": "azure-conv"}
PARAMS = {"kpa": {"target": 8.0}}  # tests/test_autoscaler_truths.py's step run


def drains(policy: str):
    cfg = RunConfig(rate_schedule="0:4,60:40,180:4", duration=300.0, autoscaler=policy, max_replicas=6,
                    cold_start=30.0, autoscaler_params=PARAMS.get(policy, {}), **ENGINE)
    result, state = simulate_fleet_config(cfg, build_source(cfg))
    replica, finish = result.requests.column("replica"), result.requests.column("finish")
    out = []
    for life in state.lives:
        when = dict(life.entered)
        if "draining" in when:
            held = finish[(replica == life.index) & (finish > when["draining"])] - when["draining"]
            out.append(held)
    return len(result.requests), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bounds", default="30,45", help="drain bounds in seconds, comma-separated")
    ap.add_argument("--policies", default="kpa,hpa", help="autoscalers, comma-separated")
    args = ap.parse_args()
    bounds = [float(b) for b in args.bounds.split(",")]
    for policy in args.policies.split(","):
        n, held = drains(policy)
        longest = max((float(h.max()) for h in held if len(h)), default=0.0)
        cut = {b: sum(int((h > b).sum()) for h in held) for b in bounds}
        print(f"{policy}: {len(held)} drains, {sum(len(h) for h in held)} of {n} requests held at a drain, "
              f"the last finishing {longest:.1f} s in; cut by a bound of "
              + ", ".join(f"{b:g} s: {c}" for b, c in cut.items()))


if __name__ == "__main__":
    main()

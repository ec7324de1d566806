"""A capacity search as Ray tasks on a local Ray instance gives the local executor's answer, byte for byte."""
import json
import os

import pytest

from llmsched.capacity import find_capacities, parse_slos
from llmsched.executors import make_executor
from llmsched.experiment import RunConfig

if os.environ.get("LLMSCHED_REQUIRE_RAY") != "1":
    pytest.importorskip("ray", reason="ray is not installed (pip install 'llmsched[ray]'); "
                                      "LLMSCHED_REQUIRE_RAY=1 makes this a failure")


def test_ray_capacity_matches_local():
    bases = {n: RunConfig(scheduler=n, rate=2.0, duration=120.0) for n in ("sarathi", "vllm")}
    slos = parse_slos("ttft_p50<=2s,tbt_p99<=200ms")
    answers = []
    for kind in ("local", "ray"):
        with make_executor(kind, jobs=2) as ex:
            res = find_capacities(bases, slos, resolution=0.1, executor=ex)
        answers.append(json.dumps({k: v.to_dict(records=True) for k, v in res.items()}))
    assert answers[0] == answers[1]
    assert json.loads(answers[1])["sarathi"]["capacity"] > 1.0

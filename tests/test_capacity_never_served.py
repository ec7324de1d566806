"""capacity stops at the first probe when the requests that can never be served (longer than the model's context
or than the whole KV cache) fail the SLOs on their own: such rejections do not depend on the rate, so every
further probe fails the same way. Before, `capacity --trace conversation_trace.jsonl` (Mooncake, 46% of the
requests over Llama-3-8B's 8192-token context) ran all 11 probes."""
import math
from pathlib import Path

import numpy as np
import pytest

from llmsched.capacity.probe import measure_point
from llmsched.capacity.rate_search import find_capacity
from llmsched.capacity.slo import parse_slos
from llmsched.capacity.verdict import STATS, stats, stats_of
from llmsched.cli import main
from llmsched.experiment import RunConfig
from llmsched.metrics.rejections import never_served

MOONCAKE = "../shared/data/traces/mooncake/conversation_trace.jsonl"


def capacity_lines(args, capsys) -> tuple[str, str]:
    assert main(["capacity", "--no-progress", "--no-cache", *args]) == 0
    out = capsys.readouterr().out
    return next(l for l in out.splitlines() if "capacity:" in l), next(l for l in out.splitlines() if " probes in " in l)


def test_mooncake_conversations_on_llama_3_8b_stop_after_one_probe(capsys):
    """Over half of these 300 conversation turns exceed 8192 tokens: one probe says so, not eleven."""
    if not Path(MOONCAKE).exists():
        pytest.skip(f"{MOONCAKE} not present")
    line, count = capacity_lines(["--trace", MOONCAKE, "--num-requests", "300"], capsys)
    assert count.startswith("1 probes in "), count
    assert "capacity: none" in line and "the search stopped after 1 probe" in line
    assert "fail stability: overloaded on their own, at every rate" in line
    assert "exceed max_model_len 8192" in line and "a model with a longer context" in line


def test_a_small_share_that_never_fits_is_no_bug_of_the_simulator(capsys):
    """ShareGPT's lengths over a 7000-token context: 5 of 157 measured requests never fit, 9.6% of the work. Probes
    whose servable queue was noisy were called stable (t < 3) and the search ended in a sound-bound violation
    ('a bug of the simulator'), the bound being 0 for a deployment that refuses over 5% of its work."""
    line, count = capacity_lines(["--workload", "sharegpt", "--max-model-len", "7000", "--num-requests", "200"],
                                 capsys)
    assert count.startswith("1 probes in "), count
    assert "fail stability: backlogged on their own" in line and "5 of 157 requests (3%) were rejected" in line


def test_attainment_the_rejections_allow_searches_on_and_one_they_break_stops():
    """2 of 157 measured requests exceed an 8000-token context (3.4% of the work: stable): attainment 0.95 is
    reachable and the search brackets a capacity; 0.99 is not (at most 155/157 = 0.987 can be served)."""
    base = RunConfig(**{"workload": "sharegpt", "max_model_len": 8000, "num_requests": 200,
                              "tiers": "all:ttft=30"})
    reachable = find_capacity(base, parse_slos("attainment>=0.95"))
    assert reachable.capacity is not None and len(reachable.probes) > 2
    assert all(not p.hopeless for p in reachable.probes)
    floor = reachable.probes[0].records[0]["floor"]
    assert floor["metrics"]["attainment"] == pytest.approx(155 / 157)
    assert floor["stability"]["verdict"] == "stable"
    broken = find_capacity(base, parse_slos("attainment>=0.99"))
    assert broken.capacity is None and len(broken.probes) == 1
    assert broken.probes[0].hopeless == ["attainment>=0.99"]
    assert "fail attainment>=0.99 on their own" in broken.note


def test_floor_is_never_worse_than_a_probe():
    """Every latency statistic and attainment of a probe is at least as bad as its floor's, at a low and a high
    rate: the floor is what no rate can beat."""
    for rate in (1.0, 4.0):
        rec = measure_point(RunConfig(**{"workload": "sharegpt", "max_model_len": 6000, "num_requests": 200,
                                               "rate": rate, "tiers": "all:ttft=5"}))
        floor = rec["floor"]["metrics"]
        assert rec["counts"]["never_served"] == rec["counts"]["rejected"] > 0
        for key, value in rec["metrics"].items():
            if math.isnan(value):
                assert math.isnan(floor[key]), key
            elif key.endswith("attainment"):
                assert value <= floor[key], key
            else:
                assert value >= floor[key], key


def test_stats_of_counts_match_stats_of_the_values():
    rng = np.random.default_rng(0)
    for zeros, infs in [(0, 0), (0, 3), (5, 0), (1, 1), (99, 1), (98, 2), (150, 7)] + \
            [tuple(rng.integers(0, 60, 2)) for _ in range(40)]:
        values = np.r_[np.zeros(zeros), np.full(infs, math.inf)]
        got, want = stats_of(int(zeros), int(infs)), stats(values)
        for s in STATS:
            assert got[s] == want[s] or (math.isnan(got[s]) and math.isnan(want[s])), (zeros, infs, s)


def test_rejections_for_load_are_not_never_served():
    """FairBatching's PAB turns requests away for load: a higher capacity could serve them, so no floor."""
    rec = measure_point(RunConfig(**{"workload": "sharegpt", "num_requests": 200,
                                           "scheduler": "fairbatching-pab", "rate": 30.0}))
    assert rec["counts"]["rejected"] > 0 and "floor" not in rec and "never_served" not in rec["counts"]
    assert not never_served(rec["counts"]["reasons"][0]["example"])
    assert never_served("prompt 9904 + output 242 tokens exceed max_model_len 8192")
    assert never_served("needs 600 KV blocks at its longest, the cache holds 512: it can never be served here")

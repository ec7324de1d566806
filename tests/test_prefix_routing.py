"""The cache-aware routers (llmsched/routing/): prefix-affinity goes where the longest prefix is cached, within its
load bound, from late reports when told; prefix-hash keeps equal prefixes together within its load bound; both route
a request without content exactly as least-outstanding; bad parameters are refused with the parameter's name; and on
a small shared-prefix workload the affinity router's hit rate beats round-robin's."""
from __future__ import annotations

import math

import numpy as np
import pytest

from llmsched.content import Content, Space, piece_id
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import run
from llmsched.metrics.summary import summarize
from llmsched.request import Request
from llmsched.routing.registry import make_router, router_classes
from llmsched.routing.prefix_affinity import PrefixAffinity
from llmsched.routing.prefix_hash import PrefixHash
from llmsched.run_config import RunConfig
from llmsched.schedulers.registry import create_scheduler

from conftest import AffineStepTime

RNG = np.random.default_rng(0)
SYSTEM = piece_id(Space.SHARED, 1)


def replicas(n: int, caching: bool = True, blocks: int = 400) -> list[Replica]:
    config = ReplicaConfig(num_blocks=blocks, block_size=16, prefix_caching=caching)
    return [Replica(i, create_scheduler("sarathi"), AffineStepTime(), config) for i in range(n)]


def req(rid: int, pieces, arrival: float = 0.0) -> Request:
    content = Content.of_pieces(pieces, piece_id(Space.REPLY, rid))
    return Request(rid, arrival, content.length, 4, content=content)


def warm(rep: Replica, r: Request) -> None:
    """``r``'s prompt computed on ``rep`` and freed: its full blocks stay cached there."""
    kv = rep.kv
    kv.admit(r, kv.lookup(r))
    kv.allocate_chunks([(r, r.prompt_len - r.num_computed)])
    r.num_computed = r.prompt_len
    kv.release(r)


def queue(rep: Replica, count: int) -> None:
    """``count`` requests waiting on ``rep`` (its load)."""
    for k in range(count):
        rep.waiting.append(Request(10_000 + 100 * rep.index + k, 0.0, 10, 1))


def test_affinity_goes_to_the_longest_cached_prefix_and_to_the_least_loaded_without_one():
    reps = replicas(3)
    warm(reps[1], req(0, [(SYSTEM, 160)]))
    warm(reps[2], req(1, [(SYSTEM, 320)]))
    router = make_router("prefix-affinity", {"cache_threshold": 0.5})  # SGLang's
    router.begin(reps)
    queue(reps[1], 1)
    queue(reps[2], 2)
    assert router.route(req(2, [(SYSTEM, 320), (7, 20)]), reps, RNG) == 2  # 320 cached tokens beat 160
    assert router.route(req(3, [(SYSTEM, 160), (8, 20)]), reps, RNG) == 1  # 160 on both: the less loaded
    assert router.route(req(4, [(9, 300)]), reps, RNG) == 0  # no match anywhere: the least outstanding
    short = req(5, [(SYSTEM, 48), (10, 200)])  # 48 of 248 tokens cached on 1 and 2: below the 0.5 threshold
    assert router.route(short, reps, RNG) == 0
    assert make_router("prefix-affinity", {"cache_threshold": 0.0}).route(short, reps, RNG) == 1


def test_affinity_ties_between_equal_matches_go_to_the_less_loaded():
    reps = replicas(3)
    for rep in reps[1:]:
        warm(rep, req(rep.index, [(SYSTEM, 160)]))
    queue(reps[1], 2)
    assert make_router("prefix-affinity").route(req(9, [(SYSTEM, 160), (7, 20)]), reps, RNG) == 2


def test_affinity_load_bound_overrides_the_match():
    reps = replicas(2)
    warm(reps[1], req(0, [(SYSTEM, 320)]))
    queue(reps[0], 1)
    queue(reps[1], 6)
    follow = req(1, [(SYSTEM, 320), (7, 10)])
    assert make_router("prefix-affinity").route(follow, reps, RNG) == 1  # 6 - 1 is within balance_abs 32
    assert make_router("prefix-affinity", {"balance_abs": 4}).route(follow, reps, RNG) == 0  # 5 > 4, 6 > 1.1 x 1
    assert make_router("prefix-affinity", {"balance_abs": 4, "balance_rel": 8.0}).route(follow, reps, RNG) == 1
    assert make_router("prefix-affinity", {"balance_abs": 5}).route(follow, reps, RNG) == 1  # 5 is not > 5
    assert make_router("prefix-affinity", {"balance_abs": 0}).route(follow, reps, RNG) == 0
    assert make_router("prefix-affinity", {"balance_abs": -1}).route(follow, reps, RNG) == 1  # no bound


def test_affinity_weighted_load_score_trades_hits_for_load():
    reps = replicas(2)
    warm(reps[1], req(0, [(SYSTEM, 320)]))
    queue(reps[1], 10)
    follow = req(1, [(SYSTEM, 320), (7, 10)])
    # llm-d's sum: prefix score 1 on replica 1 (0 on 0), queue score 0 on 1 (1 on 0), weighted
    assert make_router("prefix-affinity", {"load_weight": 0.5}).route(follow, reps, RNG) == 1
    assert make_router("prefix-affinity", {"load_weight": 2.0}).route(follow, reps, RNG) == 0


def test_affinity_with_late_reports_sees_the_cache_as_last_read():
    reps = replicas(2)
    router = make_router("prefix-affinity", {"report_delay": 1.0})
    router.begin(reps)
    assert router.route(req(0, [(SYSTEM, 320), (7, 10)], arrival=0.0), reps, RNG) == 0  # nothing cached yet
    warm(reps[1], req(1, [(SYSTEM, 320)]))
    assert router.route(req(2, [(SYSTEM, 320), (8, 10)], arrival=0.5), reps, RNG) == 0  # report from t=0: no hit
    assert router.route(req(3, [(SYSTEM, 320), (9, 10)], arrival=1.0), reps, RNG) == 1  # read again at t=1
    fresh = make_router("prefix-affinity")
    assert fresh.route(req(4, [(SYSTEM, 320), (8, 10)], arrival=0.5), reps, RNG) == 1


def test_prefix_hash_keeps_equal_prefixes_together_and_spreads_others():
    reps = replicas(8, caching=False)
    router = make_router("prefix-hash", {"prefix_blocks": 4})
    router.begin(reps)
    same = {router.route(req(i, [(SYSTEM, 64), (100 + i, 50)]), reps, RNG) for i in range(20)}
    assert len(same) == 1  # the first 4 blocks (64 tokens) are the system prompt for all
    spread = {router.route(req(i, [(piece_id(Space.SHARED, 1000 + i), 64)]), reps, RNG) for i in range(200)}
    assert len(spread) == 8
    longer = make_router("prefix-hash", {"prefix_blocks": 8})  # 128 tokens: the question decides too
    assert len({longer.route(req(i, [(SYSTEM, 64), (100 + i, 64)]), reps, RNG) for i in range(40)}) > 1


def test_prefix_hash_bounds_every_load():
    reps = replicas(4, caching=False)
    router = PrefixHash(prefix_blocks=2, load_factor=1.25)
    router.begin(reps)
    for i in range(60):  # one hot prefix, nothing leaves: each replica capped at ceil(1.25 (m + 1) / 4)
        m = sum(rep.num_outstanding for rep in reps)
        k = router.route(req(i, [(SYSTEM, 64)]), reps, RNG)
        assert reps[k].num_outstanding < math.ceil(1.25 * (m + 1) / 4)
        queue(reps[k], 1)
    loads = [rep.num_outstanding for rep in reps]
    assert max(loads) <= math.ceil(1.25 * 60 / 4) and min(loads) > 0


def test_without_content_both_route_as_least_outstanding():
    """Every existing workload (no prompt identities): the same replicas, hence the same run, as least-outstanding.
    On the roofline: under vLLM v1's async admission an arrival held for a step in flight is in least-outstanding's
    count but not yet in the replica's num_outstanding, which the prefix routers read."""
    base = dict(workload="sharegpt", rate=30.0, num_requests=120, replicas=4, num_blocks=800, seed=3,
                batch_time="roofline")
    want = run(RunConfig(router="least-outstanding", **base)).requests.cols
    for name in ("prefix-affinity", "prefix-hash"):
        got = run(RunConfig(router=name, **base)).requests.cols
        assert list(got["replica"]) == list(want["replica"]), name
        assert list(got["first_token"]) == list(want["first_token"]), name


def test_affinity_beats_round_robin_hit_rate_on_shared_prefixes():
    """inference-perf's shared prefixes, multi-turn: a user's next round finds its conversation only where the
    previous round ran; round-robin scatters the rounds, the affinity router follows them."""
    base = dict(workload="shared-prefix", rate=40.0, num_requests=240, replicas=4, num_blocks=600, seed=1,
                workload_params={"num_groups": 4, "num_prompts_per_group": 6, "system_prompt_len": 400,
                                 "question_len": 40, "output_len": 30, "enable_multi_turn_chat": True})
    rates = {}
    for name in ("round-robin", "prefix-affinity", "prefix-hash"):
        result = run(RunConfig(router=name, **base))
        rates[name] = summarize(result)["prefix_cache"]["hit_rate"]
    assert rates["prefix-affinity"] > rates["round-robin"] + 0.1, rates
    assert rates["prefix-hash"] > rates["round-robin"], rates


@pytest.mark.parametrize("name, params, words", [
    ("prefix-affinity", {"cache_threshold": 1.0}, "cache_threshold must be in [0, 1)"),
    ("prefix-affinity", {"balance_abs": -2}, "balance_abs must be >= 0"),
    ("prefix-affinity", {"balance_rel": 0.9}, "balance_rel must be >= 1"),
    ("prefix-affinity", {"load_weight": -1.0}, "load_weight must be >= 0"),
    ("prefix-affinity", {"report_delay": float("nan")}, "report_delay must be >= 0"),
    ("prefix-hash", {"prefix_blocks": 0}, "prefix_blocks must be an integer >= 1"),
    ("prefix-hash", {"load_factor": 0.5}, "load_factor must be >= 1"),
    ("prefix-hash", {"vnodes": 0}, "vnodes must be an integer in [1, 4096]"),
])
def test_bad_parameters_name_the_parameter(name, params, words):
    with pytest.raises(ValueError, match=r"^router " + name + ": " + words.replace("[", r"\[").replace("(", r"\(")
                       .replace(")", r"\)")):
        make_router(name, params)


def test_cli_refuses_unknown_and_mistyped_router_parameters(capsys):
    from llmsched.cli.commands import main
    common = ["simulate", "--workload", "shared-prefix", "--rate", "5", "--num-requests", "5", "--replicas", "2",
              "--no-progress"]
    for extra, words in ((["--router", "prefix-hash", "--router-param", "prefix_block=3"],
                          "router 'prefix-hash' has no parameter 'prefix_block'; its parameters are: load_factor, "
                          "prefix_blocks, vnodes"),
                         (["--router", "prefix-hash", "--router-param", "vnodes=many"],
                          "router 'prefix-hash' parameter vnodes = \"many\" must be an integer (default 64)"),
                         (["--router", "round-robin", "--router-param", "vnodes=3"],
                          "router 'round-robin' has no parameter 'vnodes'; its parameters are: (none)")):
        assert main(common + extra) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


def test_registered_and_read_state():
    assert {"prefix-affinity", "prefix-hash"} <= set(router_classes())
    assert not PrefixAffinity.routes_ahead and not PrefixHash.routes_ahead  # they read the replicas' state

"""--workload shared-prefix follows inference-perf's shared_prefix generator: group system prompts shared by their
prompts, prompts repeating after N requests, and multi-turn chat where each round carries the conversation so far
and waits for the user's previous round."""
import pytest

from llmsched.experiment import RunConfig, build_replicas, build_source, run
from llmsched.request import Status
from llmsched.sim.simulator import simulate
from llmsched.workload.traces.prefix_stats import prefix_stats
from llmsched.workload.generators.shared_prefix import SharedPrefix


def columns(result):
    cols = result.requests.cols
    return {name: list(cols[name]) for name in ("id", "arrival", "finish", "prompt_len", "status")}


def test_the_prompts_share_their_group_system_prompt_and_repeat_after_n():
    gen = SharedPrefix(seed=3)
    reqs = gen.open_loop(rate=10.0, num_requests=300).requests
    assert len(reqs) == 300 and {r.prompt_len for r in reqs} == {150} and {r.output_len for r in reqs} == {50}
    order = gen.prompts()
    assert sorted(order.tolist()) == list(range(100)) and order.tolist() != list(range(100))  # shuffled
    assert [r.content.pieces() for r in reqs[:100]] == [r.content.pieces() for r in reqs[100:200]]
    assert len({r.content.reply for r in reqs}) == 300
    # 10 groups of 10: a group's first request finds nothing, the other 9 its 96-token system prompt blocks (of 100
    # tokens, block size 16); from request 100 on every prompt was seen: 144 tokens (149 // 16 blocks)
    stats = prefix_stats(reqs, 16)
    assert stats.cached_tokens == 10 * 9 * 96 + 200 * 144 and stats.prompt_tokens == 300 * 150


def test_parameters_follow_inference_perf_names_and_aliases():
    gen = SharedPrefix.from_params({"num_unique_system_prompts": 2, "num_users_per_system_prompt": 3,
                                    "system_prompt_len": 40, "question_len": 7, "output_len": 9}, seed=1)
    assert (gen.num_groups, gen.num_prompts_per_group, gen.system_prompt_len) == (2, 3, 40)
    assert "7b902f7" in gen.describe()["source"]
    reqs = gen.open_loop(rate=1.0, num_requests=12).requests
    assert {r.prompt_len for r in reqs} == {47} and {r.output_len for r in reqs} == {9}
    with pytest.raises(ValueError, match="has no parameter 'num_users'"):
        SharedPrefix.from_params({"num_users": 3})


def test_multi_turn_rounds_carry_the_conversation_and_wait_for_the_previous_round():
    params = {"num_groups": 2, "num_prompts_per_group": 2, "enable_multi_turn_chat": True}
    cfg = RunConfig(workload="shared-prefix", workload_params=params, rate=20.0, num_requests=20, num_blocks=4000)
    source = build_source(cfg)
    assert len(source) == 20 and source.n == 4  # 4 users' first rounds up front, 16 later rounds as they finish
    first = source.requests[0]
    # round 0: the user's context (its system prompt), then its prompt (system prompt and question again)
    assert [n for _, n in first.content.pieces()] == [100, 100, 50] and first.prompt_len == 250
    done = []
    on_done = source.on_done
    source.on_done = lambda req, now: (done.append(req), on_done(req, now))[1]
    simulate(source, build_replicas(cfg), seed=cfg.seed)
    assert len(done) == 20 and {r.status for r in done} == {Status.FINISHED}
    users = {}
    for r in done:  # a user's rounds all start with its first round's three pieces
        users.setdefault(tuple(r.content.ids[:3]), []).append(r)
    assert len(users) == 4
    for rounds in users.values():
        rounds.sort(key=lambda r: r.prompt_len)
        assert [r.prompt_len for r in rounds] == [250 + 200 * k for k in range(5)]
        for before, after in zip(rounds, rounds[1:]):
            assert after.arrival >= before.finish  # a round waits for the previous one
            history = before.prompt_len + before.output_len
            assert after.content.block_hashes(16, history) == before.content.block_hashes(16, history)


def test_closed_loop_sessions_rotate_users_and_think():
    params = {"num_groups": 2, "num_prompts_per_group": 3}
    cfg = RunConfig(workload="shared-prefix", workload_params=params, concurrency=2, turns=3, think_time=0.5,
                    num_requests=12, rate=None, latency_boundary="engine")  # the engine's finish: exact times
    result = run(cfg)
    got = columns(result)
    assert len(got["id"]) == 12 and sorted(set(got["prompt_len"])) == [250, 450, 650]
    finish = dict(zip(got["id"], got["finish"]))
    arrival = dict(zip(got["id"], got["arrival"]))
    later = [i for i in got["id"] if arrival[i] > 0]
    assert all(any(arrival[i] == pytest.approx(f + 0.5) for f in finish.values()) for i in later)


def test_single_turn_closed_loop_sends_prompt_s_mod_n():
    gen = SharedPrefix(num_groups=1, num_prompts_per_group=3)
    source = gen.closed_loop(concurrency=2, num_requests=6)
    a, b = source.initial()
    order = gen.prompts()
    assert a.content.pieces() == gen.single(int(order[0]), 0).pieces()
    assert b.content.pieces() == gen.single(int(order[1]), 0).pieces()
    c, = source.on_done(a, 1.0)
    assert c.content.pieces() == gen.single(int(order[2]), 0).pieces() and c.prompt_len == 150

"""Closed-loop sessions: a user's next turn follows its previous turn's end plus the think time and carries the
conversation so far; a session's requests do not depend on the order in which sessions finish."""
import pytest

from llmsched.experiment import RunConfig, build_source, run
from llmsched.workload.generators.closed_sessions import DrawnSessions, SessionClosedLoop
from llmsched.workload.lengths.length_presets import length_preset
from llmsched.workload.workload import ClosedLoop


def test_one_turn_is_todays_closed_loop():
    cfg = RunConfig(concurrency=4, num_requests=20, rate=None)
    assert type(build_source(cfg)) is ClosedLoop
    assert type(build_source(RunConfig(concurrency=4, num_requests=20, rate=None, turns=2))) is SessionClosedLoop


def test_each_turn_carries_the_previous_prompt_and_reply():
    plan = DrawnSessions(length_preset("azure-conv"), turns=3, num_requests=30, concurrency=2, seed=4)
    turns = list(plan(0))
    assert len(turns) == 3
    for before, after in zip(turns, turns[1:]):
        history = before.prompt_len + before.output_len
        assert after.prompt_len > history
        assert after.content.block_hashes(16, history) == before.content.block_hashes(16, history)


def test_sessions_do_not_depend_on_completion_order():
    def contents(order):
        plan = DrawnSessions(length_preset("sharegpt"), turns=2, num_requests=10, concurrency=3, seed=1)
        return {s: [t.content for t in plan(s)] for s in order}
    assert contents([0, 1, 2, 3]) == contents([0, 1, 2, 3])
    plan = DrawnSessions(length_preset("sharegpt"), turns=2, num_requests=10, concurrency=3, seed=1)
    first = [t.prompt_len for t in plan(0)]
    again = DrawnSessions(length_preset("sharegpt"), turns=2, num_requests=10, concurrency=3, seed=1)
    assert [t.prompt_len for t in again(0)] == first


def test_think_time_between_a_users_turns_in_a_run():
    # the roofline: vLLM v1's engine model (the default) re-stamps an arrival during a step at that step's end
    cfg = RunConfig(workload="azure-conv", concurrency=3, turns=4, think_time=2.0, num_requests=24, rate=None,
                    num_blocks=20000, model="llama-3.1-8b", batch_time="roofline", latency_boundary="engine")
    result = run(cfg)
    cols = result.requests.cols
    assert len(cols["id"]) == 24
    finishes = sorted(cols["finish"])
    for a in cols["arrival"]:
        assert a == 0.0 or any(a == pytest.approx(f + 2.0) for f in finishes)


def test_think_time_applies_to_single_turn_loops_too():
    result = run(RunConfig(concurrency=2, num_requests=6, rate=None, think_time=1.5, batch_time="roofline", latency_boundary="engine"))
    cols = result.requests.cols
    finishes = list(cols["finish"])
    assert all(a == 0.0 or any(a == pytest.approx(f + 1.5) for f in finishes) for a in cols["arrival"])

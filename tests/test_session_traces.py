"""llmsched's session JSONL and LLMServingSim's JSONL: prompts with identities, sessions whose later turns carry
the conversation so far, and agentic sessions whose next call waits for the previous one plus its tool time."""
import json
from pathlib import Path

import pytest

from llmsched.content import Space, name_number, piece_id
from llmsched.experiment import RunConfig, run
from llmsched.workload.traces.readers import TraceError, read_trace, trace_kind
from llmsched.workload.workload import SessionOpenLoop, StreamedOpenLoop, trace_workload


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


SESSIONS = [
    {"arrival": 0.0, "prompt_len": 900, "output_len": 120, "prefix": [["system-a", 800]]},
    {"arrival": 0.4, "session": "u1", "prompt_len": 850, "output_len": 60, "prefix": [["system-a", 800]]},
    {"arrival": 0.5, "session": 7, "prompt_len": 30, "output_len": 5},
    {"arrival": 9.1, "session": "u1", "turn": 1, "prompt_len": 1000, "output_len": 90},
    {"arrival": 9.5, "session": 7, "turn": 1, "prompt_len": 40, "output_len": 5},
    {"arrival": 12.0, "session": "u1", "turn": 2, "prompt_len": 1100, "output_len": 10},
]


def test_session_turns_carry_the_conversation_so_far(tmp_path):
    path = write(tmp_path / "s.jsonl", SESSIONS)
    assert trace_kind(path) == "sessions"
    reqs = trace_workload(path).requests()
    system = piece_id(Space.NAMED, name_number("system-a"))
    assert reqs[0].content.pieces() == [(system, 800), (piece_id(Space.TEXT, 0), 100)]
    first, second, third = reqs[1].content, reqs[3].content, reqs[5].content
    assert second.pieces() == [*first.pieces(), (first.reply, 60), (piece_id(Space.TEXT, 3), 90)]
    assert third.pieces()[:4] == second.pieces() and third.length == 1100
    # the second turn's prompt holds the first's prompt and its 60 reply tokens: 910 tokens, 56 blocks of 16
    assert second.block_hashes(16, 910) == first.block_hashes(16, 910)
    assert reqs[0].content.block_hashes(16, 800) == first.block_hashes(16, 800)  # the shared system prompt
    assert reqs[4].content.pieces()[:2] == [*reqs[2].content.pieces(), (reqs[2].content.reply, 5)]  # session 7


def test_a_prefix_of_the_file_keeps_the_sessions_aligned(tmp_path):
    path = write(tmp_path / "s.jsonl", SESSIONS)
    whole = trace_workload(path).requests()
    part = trace_workload(path, num_requests=4).source(chunk=2).requests
    assert [r.content for r in part] == [r.content for r in whole[:4]]


def test_session_trace_runs_through_the_cli_config(tmp_path):
    path = write(tmp_path / "s.jsonl", SESSIONS)
    result = run(RunConfig(trace=str(path), rate=None))
    assert len(result.requests) == 6


AGENTIC = [
    {"input_toks": 4, "output_toks": 2, "arrival_time_ns": 0, "input_tok_ids": [1, 2, 3, 4],
     "output_tok_ids": [9, 9]},
    {"session_id": "s", "arrival_time_ns": 1_000_000_000, "sub_requests": [
        {"input_toks": 3, "output_toks": 2, "tool_duration_ns": 500_000_000, "input_tok_ids": [1, 2, 3],
         "output_tok_ids": [7, 8]},
        {"input_toks": 6, "output_toks": 1, "tool_duration_ns": 0, "input_tok_ids": [1, 2, 3, 7, 8, 5]},
        {"input_toks": 8, "output_toks": 1}]},
    {"input_toks": 5, "output_toks": 3, "arrival_time_ns": 2_000_000_000},
]


def test_llmservingsim_flat_lines_are_token_contents(tmp_path):
    path = write(tmp_path / "w.jsonl", [AGENTIC[0], AGENTIC[2]])
    assert trace_kind(path) == "llmservingsim"
    source = trace_workload(path).source()
    assert type(source) is StreamedOpenLoop  # no session: the plain stream
    a, b = source.requests
    assert a.content.pieces() == [(t, 1) for t in (1, 2, 3, 4, 9, 9)] and a.prompt_len == 4
    assert b.content is None  # no token ids: shares nothing, as in LLMServingSim
    assert read_trace(path).arrivals.tolist() == [0.0, 2.0]


def test_agentic_calls_arrive_their_tool_time_after_the_previous_call_ends(tmp_path):
    path = write(tmp_path / "w.jsonl", AGENTIC)
    source = trace_workload(path).source()
    assert isinstance(source, SessionOpenLoop) and len(source) == 5
    result = run(RunConfig(trace=str(path), rate=None, latency_boundary="engine"))  # the engine's finish times
    cols = result.requests.cols
    row = {i: k for k, i in enumerate(cols["id"])}
    assert sorted(row) == [0, 1, 2, 3, 4] and set(cols["status"]) == {3}  # all finished
    # ids: first requests 0-2 in arrival order, then the session's later calls as issued
    assert cols["arrival"][row[3]] == pytest.approx(cols["finish"][row[1]] + 0.5)
    assert cols["arrival"][row[4]] == pytest.approx(cols["finish"][row[3]])
    assert cols["prompt_len"][row[4]] == 8


def test_token_ids_are_checked_against_the_counts_and_the_vocabulary(tmp_path):
    path = write(tmp_path / "w.jsonl", AGENTIC)
    with pytest.raises(TraceError, match=r"w.jsonl:1: input_tok_ids\[3\] is 4, outside the model's vocabulary of 4"):
        trace_workload(path, vocab_size=4)
    bad = write(tmp_path / "b.jsonl", [{**AGENTIC[0], "input_toks": 5}])
    with pytest.raises(TraceError, match="b.jsonl:1: input_tok_ids has 4 ids but input_toks is 5"):
        read_trace(bad)


def test_sessions_run_on_several_replicas(tmp_path):
    """A source whose completions add requests never runs as lanes: the later calls still arrive on time."""
    path = write(tmp_path / "w.jsonl", AGENTIC)
    result = run(RunConfig(trace=str(path), rate=None, replicas=3, router="round-robin", latency_boundary="engine"))
    cols = result.requests.cols
    row = {i: k for k, i in enumerate(cols["id"])}
    assert sorted(row) == [0, 1, 2, 3, 4]
    assert cols["arrival"][row[3]] == pytest.approx(cols["finish"][row[1]] + 0.5)

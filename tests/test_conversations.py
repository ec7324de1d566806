"""A client that sends conversations: each later turn's prompt starts with the turn before it, prompt and reply. A
real AIPerf multi-turn run against vLLM 0.32 on this CPU (tests/data/cpu_aiperf_multiturn: 12 conversations of 3
turns through the chat endpoint, scripts/aiperf_capture.py --turns 3) replays with every request's cached tokens
equal to vLLM's ``num_cached_tokens``, from AIPerf's export and from the engine's log alike; without the
conversations its prompts share nothing and its TTFT comes out about 1.7 times the real one."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from llmsched.experiment import run
from llmsched.validate.serving import replay_config, validate
from llmsched.validate.serving_run import load_runs
from llmsched.workload.traces.readers import TraceError
from llmsched.workload.traces.server_log import read_server_log
from test_aiperf_records import step_fit

RUN = Path(__file__).parent / "data" / "cpu_aiperf_multiturn" / "rate-4"


def engine_rows(folder: Path = RUN) -> list[dict]:
    return [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]


def test_each_later_turn_starts_with_the_turn_before_it():
    log = read_server_log(RUN / "profile_export.jsonl", measured=True)
    assert len(log) == 36 and (log.turns >= 0).sum() == 24
    assert "12 conversation(s), 24 later turn(s)" in log.notes[-1]
    contents = next(iter(log.contents(len(log), len(log))))
    for i, before in enumerate(log.turns):
        if before < 0:
            assert log.prompt_lens[i] == 200
            continue
        held = contents[before].length + log.output_lens[before]
        assert log.prompt_lens[i] == held + 200  # AIPerf sent the conversation so far and 200 new words
        assert contents[i].cut(contents[before].length).block_hashes(32, contents[before].length) == \
            contents[before].block_hashes(32, contents[before].length)


@pytest.mark.parametrize("name, boundary", [("profile_export.jsonl", None), ("requests.jsonl", "engine")])
def test_the_replay_finds_what_vllm_found_cached_request_by_request(name, boundary):
    real = load_runs(RUN, name, boundary)[0]
    result = run(replay_config(real, **step_fit(RUN)))
    ids, cached = result.requests.column("id"), result.requests.column("cached_tokens")
    by_send = sorted(engine_rows(), key=lambda r: r["client_sent" if boundary is None else "arrival_time"])
    assert (cached[np.argsort(ids)] == [r["num_cached_tokens"] for r in by_send]).all()
    assert cached.sum() == 8064


def test_validate_serving_meets_the_engines_latencies_only_with_the_conversations(tmp_path):
    with_turns = validate(load_runs(RUN, "requests.jsonl", "engine")[0], **step_fit(RUN))
    blind = tmp_path / "blind"
    shutil.copytree(RUN, blind)
    rows = [{k: v for k, v in r.items() if k not in ("session", "turn")} for r in engine_rows()]
    (blind / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    without = validate(load_runs(blind, "requests.jsonl", "engine")[0], **step_fit(RUN))
    assert abs(with_turns["errors"]["ttft"]["p50"]) < 10 and abs(with_turns["errors"]["e2e"]["p50"]) < 5
    assert without["errors"]["ttft"]["p50"] > 40 and without["prefix_cache"]["simulated"]["cached_tokens"] == 0


@pytest.mark.parametrize("edit, message", [
    ({"session": "s"}, r":1: session without turn; give both `session`"),
    ({"turn": 1}, r":1: turn without session"),
    ({"session": "s", "turn": -1}, r":1: turn is -1"),
    ({"session": True, "turn": 0}, r":1: session is True"),
])
def test_a_conversation_a_log_names_half_of_is_refused(tmp_path, edit, message):
    rows = engine_rows()
    rows[0] = {k: v for k, v in rows[0].items() if k not in ("session", "turn")} | edit
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TraceError, match=message):
        read_server_log(path)


def test_an_aiperf_turn_index_no_run_could_write_is_refused(tmp_path):
    rows = [json.loads(line) for line in (RUN / "profile_export.jsonl").read_text().splitlines()]
    rows[4]["metadata"]["turn_index"] = "second"
    path = tmp_path / "profile_export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(TraceError, match=r":5: metadata.turn_index is 'second', not a turn's index"):
        read_server_log(path)


def test_a_later_turn_waits_for_the_turn_it_follows_where_the_replay_is_slower():
    """The run's steps priced 20 times over: a later turn's recorded send comes before the replay has ended the
    turn it follows; its client could not have sent it then, so it goes when that turn leaves, and finds the whole
    of it cached, as it did in vLLM. At the run's own pace nothing waits (the tests above)."""
    real = load_runs(RUN, "requests.jsonl", "engine")[0]
    fit = step_fit(RUN)
    slow = {k: v * 20 for k, v in fit["batch_time_params"].items()}
    result = run(replay_config(real, **{**fit, "batch_time_params": slow}))
    ids = result.requests.column("id")
    order = np.argsort(ids)
    arrival, finish = result.requests.column("arrival")[order], result.requests.column("finish")[order]
    cached = result.requests.column("cached_tokens")[order]
    later = np.flatnonzero(real.log.turns >= 0)
    before = real.log.turns[later]
    assert (arrival[later] >= finish[before]).all()
    moved = arrival[later] > real.log.arrivals[later] + 1e-9
    assert moved.sum() >= len(later) // 2  # most of them waited
    assert (cached == [r["num_cached_tokens"] for r in sorted(engine_rows(), key=lambda r: r["arrival_time"])]).all()

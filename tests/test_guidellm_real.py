"""Real GuideLLM reports (guidellm 0.8.1, ``guidellm run --output kind=json``) read as client-side logs: multi-turn
runs against vLLM 0.32 on this CPU (scripts/guidellm_capture.py --turns 3: 8 conversations of 3 turns of 200 random
words, 32 tokens out, a constant 8 req/s), through /v1/completions (tests/data/cpu_guidellm_run) and through
/v1/chat/completions (tests/data/cpu_guidellm_chat, ``--chat``), with the engine's own stamps of the same requests
beside them. The other GuideLLM tests (test_client_logs.py) build reports from a vllm bench serve result; these
are GuideLLM's own."""
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

RUN = Path(__file__).parent / "data" / "cpu_guidellm_run" / "rate-8"
CHAT = Path(__file__).parent / "data" / "cpu_guidellm_chat" / "rate-8"
# the same with --cached-tokens --seed 2: vLLM served with --enable-prompt-tokens-details
CACHED = Path(__file__).parent / "data" / "cpu_guidellm_chat_cached" / "rate-8"


def report_rows(folder: Path = RUN) -> list[dict]:
    data = json.loads((folder / "benchmarks.json").read_text())
    return sorted(data["benchmarks"][0]["requests"]["successful"], key=lambda r: r["request_start_time"])


def engine_rows(folder: Path = RUN) -> dict:
    return {json.loads(line)["request_id"]: json.loads(line) for line in (folder / "requests.jsonl").read_text()
            .splitlines()}


def test_the_report_reads_as_the_requests_guidellm_sent():
    log = read_server_log(RUN / "benchmarks.json", measured=True)
    assert log.format == "guidellm" and log.boundary == "client" and len(log) == 24
    assert "8 conversation(s), 16 later turn(s)" in " ".join(log.notes)
    engine = engine_rows()
    for i, rec in enumerate(report_rows()):  # the engine log's client stamps of the same request (vLLM's id)
        row = engine[rec["response_id"]]
        assert log.ttft[i] == pytest.approx(row["client_first"] - row["client_sent"], abs=2e-6)
        assert log.e2e[i] == pytest.approx(row["client_last"] - row["client_sent"], abs=2e-6)
        assert row["first_token_ts"] <= row["client_first"] and log.prompt_lens[i] == row["input_toks"]
    # the sends as they went (the replay keeps them), on the constant schedule give or take GuideLLM's dispatch
    assert np.median(np.diff(log.arrivals)) == pytest.approx(1 / 8, rel=0.05)


def test_the_replay_finds_what_vllm_found_cached_but_where_a_reply_lost_a_token():
    """Each later turn's prompt is the turn before it, prompt and reply, then 200 new words, and the replay's cache
    finds them as vLLM's did; except where GuideLLM's history held one word fewer than the reply's tokens (vLLM
    leaves a special token out of the reply's text), so vLLM's hit ends at that token's block."""
    real = load_runs(RUN, "benchmarks.json")[0]
    result = run(replay_config(real, **step_fit(RUN)))
    ids, cached = result.requests.column("id"), result.requests.column("cached_tokens")
    sim = cached[np.argsort(ids)]
    engine = engine_rows()
    vllm = np.array([engine[r["response_id"]]["num_cached_tokens"] for r in report_rows()])
    log = real.log
    short = [i for i, before in enumerate(log.turns)
             if before >= 0 and log.prompt_lens[i] < log.prompt_lens[before] + log.output_lens[before] + 200]
    assert (sim != vllm).sum() <= len(short) and all(i in short for i in np.flatnonzero(sim != vllm))
    assert (sim == vllm).sum() >= 23 and vllm.sum() > 0


def test_validate_serving_meets_the_run_only_with_the_conversations(tmp_path):
    with_turns = validate(load_runs(RUN, "benchmarks.json")[0], **step_fit(RUN))
    stamped = validate(load_runs(RUN, "requests.jsonl", "client")[0], **step_fit(RUN))
    for metric in ("ttft", "tpot", "e2e"):
        assert with_turns["errors"][metric]["p50"] == pytest.approx(stamped["errors"][metric]["p50"], abs=0.5)
    assert abs(with_turns["errors"]["ttft"]["p50"]) < 15 and abs(with_turns["errors"]["e2e"]["p50"]) < 5
    blind = tmp_path / "blind"
    shutil.copytree(RUN, blind)
    data = json.loads((blind / "benchmarks.json").read_text())
    for row in data["benchmarks"][0]["requests"]["successful"]:
        row["info"]["turn_index"] = None  # a report that says nothing of conversations
    (blind / "benchmarks.json").write_text(json.dumps(data))
    without = validate(load_runs(blind, "benchmarks.json")[0], **step_fit(RUN))
    assert without["errors"]["ttft"]["p50"] > 20 + with_turns["errors"]["ttft"]["p50"]


def test_a_turn_index_no_run_could_write_is_refused(tmp_path):
    data = json.loads((RUN / "benchmarks.json").read_text())
    data["benchmarks"][0]["requests"]["successful"][3]["info"]["turn_index"] = -2
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TraceError, match=r"info.turn_index: -2, not a turn's index"):
        read_server_log(path)


def test_the_chat_report_reads_as_sent_and_says_what_it_left_out():
    """Through the chat endpoint each later turn's messages carry the conversation so far; the benchmark stopped
    with its last request still in flight, which the report counts (scheduler_state.processing_requests) but lists
    nowhere: the log says so, and every request it lists is the engine's to the microsecond."""
    log = read_server_log(CHAT / "benchmarks.json", measured=True)
    assert log.format == "guidellm" and len(log) == 23 and len(engine_rows(CHAT)) == 23
    notes = " ".join(log.notes)
    assert "8 conversation(s), 15 later turn(s)" in notes and "1 request(s) still in flight" in notes
    engine = engine_rows(CHAT)
    for i, rec in enumerate(report_rows(CHAT)):
        row = engine[rec["response_id"]]
        assert rec["response_id"].startswith("chatcmpl-") and log.prompt_lens[i] == row["input_toks"]
        assert log.ttft[i] == pytest.approx(row["client_first"] - row["client_sent"], abs=2e-6)
        assert log.e2e[i] == pytest.approx(row["client_last"] - row["client_sent"], abs=2e-6)


def test_the_chat_replay_finds_what_vllm_found_cached_and_meets_the_run():
    """The messages' history is found cached as vLLM found it (one turn's reply lost a token in its text, as
    through /v1/completions); replayed with the run's own step fit the client's P50s are within a few percent."""
    real = load_runs(CHAT, "benchmarks.json")[0]
    result = run(replay_config(real, **step_fit(CHAT)))
    ids, cached = result.requests.column("id"), result.requests.column("cached_tokens")
    sim = cached[np.argsort(ids)]
    engine = engine_rows(CHAT)
    vllm = np.array([engine[r["response_id"]]["num_cached_tokens"] for r in report_rows(CHAT)])
    log = real.log
    short = [i for i, before in enumerate(log.turns)
             if before >= 0 and log.prompt_lens[i] < log.prompt_lens[before] + log.output_lens[before] + 200]
    assert all(i in short for i in np.flatnonzero(sim != vllm)) and (sim == vllm).sum() >= 22 and vllm.sum() > 0
    report = validate(real, **step_fit(CHAT))
    assert all(abs(report["errors"][m]["p50"]) < 10 for m in ("ttft", "tpot", "e2e")), report["errors"]
    # the report's hit rate is the replay's (GuideLLM's cached_tokens is null where vLLM's usage leaves it out)
    shared = report["prefix_cache"]
    assert shared["simulated"]["cached_tokens"] == int(sim.sum()) and shared["real"] is None
    assert shared["notes"] == ["no hash_ids: the replayed prompts share only their conversations' earlier turns"]


def test_a_count_of_unlisted_requests_that_is_no_count_is_refused(tmp_path):
    data = json.loads((CHAT / "benchmarks.json").read_text())
    data["benchmarks"][0]["scheduler_state"]["processing_requests"] = -1
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TraceError, match=r"scheduler_state.processing_requests: -1, not a count of requests"):
        read_server_log(path)


def test_the_cached_tokens_guidellm_reports_are_vllms_and_the_replay_is_compared_with_them():
    """Served with --enable-prompt-tokens-details, each reply's usage carries the prompt tokens vLLM found cached,
    and GuideLLM's report keeps them: they are the engine's num_cached_tokens, request for request, and the
    replay's hit rate is compared with theirs."""
    log = read_server_log(CACHED / "benchmarks.json", measured=True)
    engine = engine_rows(CACHED)
    vllm = [engine[r["response_id"]]["num_cached_tokens"] for r in report_rows(CACHED)]
    assert list(log.cached_tokens) == vllm and sum(vllm) > 0
    shared = validate(load_runs(CACHED, "benchmarks.json")[0], **step_fit(CACHED))["prefix_cache"]
    assert shared["real"]["cached_tokens"] == sum(vllm) and abs(shared["error_points"]) < 1


@pytest.mark.parametrize("change,message", [
    (lambda rows: rows[3].update(cached_tokens=None), r"successful\[\d+\].cached_tokens: null, but successful"),
    (lambda rows: rows[3].update(cached_tokens=10_000), r"cached_tokens: 10000, not a count of 0..prompt_tokens"),
    (lambda rows: rows[3].update(cached_tokens=-1), r"cached_tokens: -1, not a count"),
])
def test_cached_tokens_on_some_requests_only_or_out_of_range_are_refused(tmp_path, change, message):
    data = json.loads((CACHED / "benchmarks.json").read_text())
    change(data["benchmarks"][0]["requests"]["successful"])
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TraceError, match=message):
        read_server_log(path)

"""Requests a benchmark's client saw fail: a real CPU run whose prompts past max_model_len vLLM refused (HTTP 400,
no token), and the same run with a stream cut part-way, in vllm bench serve's, GuideLLM's and inference-perf's
per-request logs. Those that got tokens are replayed with them and compared with nothing; those that got none are
left out with a note; the rest are compared as before."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from llmsched.validate.serving import validate
from llmsched.validate.serving_run import load_runs
from llmsched.workload.traces.readers import TraceError
from llmsched.workload.traces.server_log import read_server_log
from test_client_logs import cpu_params, guidellm_report, inference_perf_requests

RUN = Path(__file__).parent / "data" / "cpu_failed_run" / "rate-4"
CUT = "Traceback (most recent call last):\n  ...\naiohttp.client_exceptions.ClientPayloadError: Response payload " \
      "is not completed"


def bench() -> dict:
    return json.loads((RUN / "bench.json").read_text())


def refused(data: dict) -> list[int]:
    return [i for i, e in enumerate(data["errors"]) if e]


def folder_with(tmp_path: Path, name: str, content) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / name).write_text(json.dumps(content))
    for other in ("meta.json", "config.json"):
        shutil.copy(RUN / other, folder / other)
    return folder


def cut_stream(data: dict, i: int, chunks: int) -> dict:
    """``data`` with its request ``i`` failed after ``chunks`` streamed chunks, as vllm bench serve records a
    stream broken part-way (its ttft and the gaps before the failure kept, latency 0, output_lens 0)."""
    data = json.loads(json.dumps(data))
    data["errors"][i], data["output_lens"][i], data["latencies"][i] = CUT, 0, 0.0
    data["itls"][i] = data["itls"][i][:chunks - 1]
    data["completed"] -= 1
    data["failed"] += 1
    return data


def test_the_real_runs_refused_prompts_are_the_ones_past_max_model_len():
    data = bench()
    meta = json.loads((RUN / "meta.json").read_text())
    limit = meta["engine_kwargs"]["max_model_len"]
    assert data["failed"] == len(refused(data)) == 7 and data["completed"] == 33
    assert all(data["errors"][i] == "Bad Request" and data["ttfts"][i] == 0.0 for i in refused(data))
    assert all(data["input_lens"][i] > limit for i in refused(data))
    assert all(data["input_lens"][i] + data["output_lens"][i] <= limit
               for i in range(len(data["errors"])) if not data["errors"][i])
    engine = [json.loads(line) for line in (RUN / "requests.jsonl").read_text().splitlines()]
    assert len(engine) == 33  # the engine never saw them


def test_refused_requests_are_left_out_and_the_rest_compared():
    log = read_server_log(RUN / "bench.json", measured=True)
    data = bench()
    ok = [i for i in range(40) if not data["errors"][i]]
    assert len(log) == 33 and log.compared.all() and len(log.itls) == 33
    assert sorted(int(i) for i in log.ids) == ok
    assert log.failed is not None and len(log.failed.got) == 7 and not log.failed.replayed
    assert any("7 of 40 requests failed at the client (first: 'Bad Request')" in n and "7 that got none not "
               "replayed" in n for n in log.notes)
    engine = read_server_log(RUN / "requests.jsonl", measured=True, clock="client")
    np.testing.assert_allclose(np.sort(log.ttft), np.sort(engine.ttft), atol=2e-6)
    np.testing.assert_array_equal(np.sort(log.output_lens), np.sort(engine.output_lens))


def test_validate_serving_replays_a_run_with_refused_requests():
    run_ = load_runs(RUN, "bench.json")[0]
    row = validate(run_, gpu="l4", batch_time="linear", batch_time_params=cpu_params(RUN))
    assert row["requests"] == 33
    assert row["failures"] == {"real": 7, "simulated": 0, "timeout_s": None, "replayed": 0, "not_replayed": 7,
                               "first_error": "Bad Request"}
    assert len(row["samples"]["simulated"]["e2e"]) == 33 == len(row["samples"]["real"]["e2e"])
    # the engine-side log of the same run, which never saw the refused requests, replays the same load
    engine = validate(load_runs(RUN)[0], gpu="l4", batch_time="linear", batch_time_params=cpu_params(RUN))
    assert row["simulated"]["throughput"]["output_tps"] == pytest.approx(
        engine["simulated"]["throughput"]["output_tps"], rel=0.02)
    assert abs(row["errors"]["e2e"]["p50"]) < 10 and abs(row["errors"]["throughput"]["output_tps"]) < 3


def test_a_stream_cut_part_way_is_replayed_with_the_tokens_it_got(tmp_path):
    data = bench()
    ok = [i for i in range(40) if not data["errors"][i]]
    victim = ok[5]
    log = read_server_log(folder_with(tmp_path, "bench.json", cut_stream(data, victim, 6)) / "bench.json",
                          measured=True)
    assert len(log) == 33 and int(log.compared.sum()) == 32 and len(log.itls) == 32
    at = log.ids.index(str(victim))
    assert log.output_lens[at] == 6 and np.isnan(log.ttft[at]) and np.isnan(log.e2e[at])
    assert log.prompt_lens[at] == data["input_lens"][victim]
    assert {victim: 6} == log.failed.replayed
    assert any("1 that got tokens replayed with those tokens as their output" in n for n in log.notes)
    row = validate(load_runs(tmp_path / "run", "bench.json")[0], gpu="l4", batch_time="linear",
                   batch_time_params=cpu_params(RUN))
    assert row["failures"]["replayed"] == 1 and row["failures"]["not_replayed"] == 7
    assert row["requests"] == 33 and len(row["samples"]["simulated"]["e2e"]) == 32
    assert row["failures"]["first_error"] == "Bad Request"


def test_a_run_with_nothing_to_replay_or_compare_is_refused(tmp_path):
    data = bench()
    everyone = json.loads(json.dumps(data))
    for i in range(40):
        everyone["errors"][i], everyone["ttfts"][i], everyone["output_lens"][i] = "Bad Request", 0.0, 0
    everyone["completed"], everyone["failed"] = 0, 40
    path = folder_with(tmp_path, "bench.json", everyone) / "bench.json"
    with pytest.raises(TraceError, match=r"40 of 40 requests failed \(first: 'Bad Request'\) and none got a token"):
        read_server_log(path)
    cut = data
    for i in range(40):
        if not data["errors"][i]:
            cut = cut_stream(cut, i, 2)
    path.write_text(json.dumps(cut))
    assert len(read_server_log(path)) == 33  # a replay of what the server did: every cut stream
    with pytest.raises(TraceError, match=r"and none succeeded, so nothing can be compared"):
        read_server_log(path, measured=True)


def test_the_result_counts_must_agree_with_its_errors(tmp_path):
    data = bench()
    data["completed"] = 34
    path = folder_with(tmp_path, "bench.json", data) / "bench.json"
    with pytest.raises(TraceError, match=r"completed is 34 but its per-request lists hold 33 successes"):
        read_server_log(path, measured=True)
    data["completed"], data["failed"] = 33, 6
    path.write_text(json.dumps(data))
    with pytest.raises(TraceError, match=r"failed is 6 but its per-request lists hold 7 errors"):
        read_server_log(path, measured=True)


def test_guidellms_errored_requests_are_replayed_with_the_tokens_it_counted(tmp_path):
    data = bench()
    ok = [i for i in range(40) if not data["errors"][i]]
    kept = {k: [data[k][i] for i in ok] for k in ("start_times", "input_lens", "output_lens", "ttfts", "latencies")}
    report = guidellm_report(kept)
    requests = report["benchmarks"][0]["requests"]
    rows = requests["successful"]
    cut = dict(rows[4], output_tokens=7, time_to_first_token_ms=None, request_latency=None,
               info={"error": "ClientPayloadError: Response payload is not completed"})
    refused_rows = [{"request_id": f"x{i}", "request_start_time": 1.8e9 + data["start_times"][i],
                     "prompt_tokens": data["input_lens"][i], "output_tokens": None,
                     "info": {"error": "HTTP 400: Bad Request"}} for i in refused(data)]
    first_only = dict(rows[6], output_tokens=None, request_latency=None, info={"error": "ReadTimeout"})
    requests["successful"], requests["errored"] = rows[:4] + rows[5:6] + rows[7:], [cut] + refused_rows + [first_only]
    folder = folder_with(tmp_path, "benchmarks.json", report)
    log = load_runs(folder)[0].log
    assert len(log) == 33 and int(log.compared.sum()) == 31
    assert log.output_lens[log.ids.index(rows[4]["request_id"])] == 7
    assert log.output_lens[log.ids.index(rows[6]["request_id"])] == 1  # its first token timed, none counted
    assert log.failed.replayed == {0: 7, 8: 1} and len(log.failed.got) == 9
    assert any("9 of 40 requests failed at the client (first: 'ClientPayloadError: Response payload is not "
               "completed')" in n for n in log.notes)


def test_inference_perfs_failed_requests_are_left_out_with_a_pointer_to_its_stage_reports(tmp_path):
    data = bench()
    rows = inference_perf_requests(data)
    for i in refused(data):  # as inference-perf writes a failure: InferenceInfo(input_tokens=0), no response
        rows[i]["info"] = {"request_metrics": {"text": {"input_tokens": 0}}}
        rows[i]["error"] = {"error_type": "HTTP Error 400", "error_msg": "max_model_len exceeded"}
        rows[i]["end_time"] = rows[i]["start_time"] + 0.002
    folder = folder_with(tmp_path, "per_request_lifecycle_metrics.json", rows)
    log = load_runs(folder)[0].log
    assert len(log) == 33 and log.compared.all()
    assert sorted(int(i) for i in log.ids) == [i for i in range(40) if not data["errors"][i]]
    assert any("7 of 40 requests failed at the client (first: 'HTTP Error 400: max_model_len exceeded')" in n
               and "stage reports" in n for n in log.notes)
    for i in range(40):  # timed out part-way, with what they streamed kept (as a custom API's process_failure may)
        rows[i]["error"] = rows[i]["error"] or {"error_type": "TimeoutError", "error_msg": "Request timed out"}
    path = folder / "per_request_lifecycle_metrics.json"
    path.write_text(json.dumps(rows))
    assert len(read_server_log(path)) == 33
    with pytest.raises(TraceError, match=r"40 of 40 requests failed .* and none succeeded.*stage reports"):
        read_server_log(path, measured=True)
    for row in rows:
        row["info"] = {"request_metrics": {"text": {"input_tokens": 0}}}
    path.write_text(json.dumps(rows))
    with pytest.raises(TraceError, match=r"40 of 40 requests failed .* and none can be replayed"):
        read_server_log(path)


def test_simulate_replays_a_result_with_failures(tmp_path):
    out = tmp_path / "sim"
    done = subprocess.run([sys.executable, "-m", "llmsched", "simulate", "--trace", str(RUN / "bench.json"),
                           "--model", "llama-3-8b", "--gpu", "l4", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "warning: " in done.stderr and "7 of 40 requests failed at the client" in done.stderr
    with open(out / "requests.csv") as f:
        assert sum(1 for _ in f) == 1 + 33


@pytest.mark.parametrize("seed", range(40))
def test_any_mix_of_failures_reads_consistently_or_is_refused_by_name(tmp_path, seed):
    """The real run's result with a random set of its requests failed, each after a random number of chunks (0:
    refused before its first), with or without its send times: the log holds the successes and the failures that
    got tokens, compares only the successes, and gives each failure the tokens it got; or it is refused with a
    TraceError naming the file."""
    rng = np.random.default_rng(seed)
    data = bench()
    ok = [i for i in range(40) if not data["errors"][i]]
    for i in rng.choice(ok, size=int(rng.integers(0, len(ok) + 1)), replace=False):
        data = cut_stream(data, int(i), int(rng.integers(1, 6)))
        if rng.random() < 0.4:  # refused before any chunk
            data["ttfts"][i], data["itls"][i] = 0.0, []
    if rng.random() < 0.3:
        data.pop("start_times")
    path = folder_with(tmp_path, "bench.json", data) / "bench.json"
    try:
        log = read_server_log(path, measured=rng.random() < 0.5)
    except TraceError as e:
        assert str(path) in str(e)
        return
    failed = refused(data)
    got = {i: (1 + len(data["itls"][i])) if data["ttfts"][i] > 0 else 0 for i in failed}
    assert log.failed is None if not failed else log.failed.got == got
    successes = 40 - len(failed)
    assert len(log) == successes + sum(1 for n in got.values() if n)
    assert len(set(log.ids)) == len(log) and (log.output_lens >= 1).all()
    if log.ttft is not None:
        assert int(log.compared.sum()) == successes
    for rid, out in zip(log.ids, log.output_lens):
        assert out == (got[int(rid)] if int(rid) in got else data["output_lens"][int(rid)])

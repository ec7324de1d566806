"""AIPerf's per-request export (``profile_export.jsonl``) read as a client-side log: two real runs of aiperf 0.13
against vLLM 0.32 on this CPU (tests/data/cpu_aiperf_run, scripts/aiperf_capture.py), each with the engine's own
stamps of the same requests beside it."""
import json
import re
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

RUNS = Path(__file__).parent / "data" / "cpu_aiperf_run"
RUN = RUNS / "rate-4"


def records(folder: Path = RUN) -> list[dict]:
    return [json.loads(line) for line in (folder / "profile_export.jsonl").read_text().splitlines()]


def step_fit(folder: Path) -> dict:
    model = json.loads((folder / "meta.json").read_text())["cpu_step_model"]
    return dict(gpu="l4", batch_time="linear", batch_time_params={"const": model["const"],
                                                                  "per_token": model["per_token"]})


def test_the_export_reads_as_the_requests_the_client_sent():
    log = read_server_log(RUN / "profile_export.jsonl", measured=True)
    rows = records()
    assert log.format == "aiperf" and log.boundary == "client" and len(log) == len(rows) == 42
    warm = [r["metadata"]["benchmark_phase"] == "warmup" for r in rows]
    assert sum(warm) == 2 and np.isnan(log.ttft).sum() == 2  # the warm-ups load the server, compared with nothing
    assert (np.diff(log.arrivals) >= 0).all() and log.arrivals[0] == 0
    assert (log.prompt_lens == 400).all() and (log.output_lens == 32).all()
    # each request's client timings are the engine log's client stamps of the same request (matched by the
    # X-Request-ID AIPerf sent and vLLM took as its own)
    engine = {json.loads(line)["request_id"]: json.loads(line) for line in (RUN / "requests.jsonl").read_text()
              .splitlines()}
    by_start = sorted(rows, key=lambda r: r["metadata"]["request_start_ns"])
    for i, rec in enumerate(by_start):
        row = engine[rec["metadata"]["x_request_id"]]
        if np.isnan(log.ttft[i]):
            continue
        assert log.ttft[i] == pytest.approx(row["client_first"] - row["client_sent"], abs=2e-6)
        assert log.e2e[i] == pytest.approx(row["client_last"] - row["client_sent"], abs=2e-6)
        assert row["first_token_ts"] <= row["client_first"]  # the engine's first token before the client's chunk


@pytest.mark.parametrize("rate", ["rate-4", "rate-8"])
def test_validate_serving_compares_the_export_at_the_client(rate):
    """The export and the engine's log read at the client agree, as two records of one run should; the replay with
    the run's own CPU step fit is near both (rate 8 is this 2-core machine's contention: client and server share
    it, and its decode steps run long)."""
    folder = RUNS / rate
    export = validate(load_runs(folder, "profile_export.jsonl")[0], **step_fit(folder))
    stamped = validate(load_runs(folder, "requests.jsonl", "client")[0], **step_fit(folder))
    assert export["latency_boundary"] == stamped["latency_boundary"] == "client" and export["log_format"] == "aiperf"
    for metric in ("ttft", "e2e"):
        assert export["errors"][metric]["p50"] == pytest.approx(stamped["errors"][metric]["p50"], abs=3.0)
    if rate == "rate-4":
        assert abs(export["errors"]["ttft"]["p50"]) < 15 and abs(export["errors"]["e2e"]["p50"]) < 5


def test_simulate_replays_the_export(tmp_path):
    out = tmp_path / "sim"
    done = subprocess.run([sys.executable, "-m", "llmsched", "simulate", "--trace", str(RUN / "profile_export.jsonl"),
                           "--gpu", "l4", "--out", str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "summary.json").read_text())["counts"]["finished"] == 42  # the two warm-ups included


def write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "profile_export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_failed_request_is_replayed_with_the_tokens_aiperf_counted(tmp_path):
    rows = records()
    rows[10]["error"] = {"code": 500, "type": "ServerError", "message": "engine died"}
    rows[10]["metrics"]["output_sequence_length"]["value"] = 7
    rows[11]["error"] = {"code": 400, "type": "BadRequest", "message": "too long"}
    rows[11]["metrics"] = {k: v for k, v in rows[11]["metrics"].items() if k != "output_sequence_length"}
    log = read_server_log(write(tmp_path, rows), measured=True)
    assert len(log) == 41 and log.failed.replayed == {10: 7}
    assert "2 of 42 requests failed at the client (first: '500 ServerError: engine died')" in log.failed.note
    assert 7 in log.output_lens and np.isnan(log.ttft).sum() == 3  # two warm-ups and the failed one


@pytest.mark.parametrize("edit, message", [
    (lambda rows: rows[3]["metrics"]["time_to_first_token"].update(unit="fortnights"),
     r":4: metrics.time_to_first_token.unit is 'fortnights'; AIPerf writes durations in ns, us, ms"),
    (lambda rows: rows[5]["metrics"].pop("time_to_first_token"), r":6: no metrics.time_to_first_token; run aiperf "
                                                                  r"with --streaming"),
    (lambda rows: rows[5]["metrics"]["input_sequence_length"].update(value=0), r":6: metrics.input_sequence_length "
                                                                               r"is 0, not a count of tokens >= 1"),
    (lambda rows: rows[7]["metadata"].update(request_start_ns="soon"), r":8: metadata.request_start_ns is 'soon'"),
    (lambda rows: rows.__setitem__(9, {"input_toks": 3}), r":10: not an AIPerf record"),
    (lambda rows: [r.update(error={"message": "down"}) for r in rows], r"every one of its 42 requests failed"),
])
def test_an_export_no_run_could_write_is_refused_naming_the_line(tmp_path, edit, message):
    rows = records()
    edit(rows)
    with pytest.raises(TraceError, match=message):
        read_server_log(write(tmp_path, rows), measured=True)


def test_the_bench_line_is_refused_for_an_aiperf_export(tmp_path):
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(RUN / "profile_export.jsonl", alone)
    with pytest.raises(ValueError, match=r"an AIPerf export, not a vllm bench serve result"):
        load_runs(alone / "profile_export.jsonl", bench="vllm bench serve --num-warmups 1")
    assert re.search("AIPerf", read_server_log(alone / "profile_export.jsonl").notes[0])

"""A real GuideLLM report (guidellm 0.8.1, ``guidellm run --output kind=json``) read as a client-side log: a run
against vLLM 0.32 on this CPU (tests/data/cpu_guidellm_run, scripts/guidellm_capture.py: 24 requests of 400 random
words, 32 tokens out, a constant 8 req/s), with the engine's own stamps of the same requests beside it. The other
GuideLLM tests (test_client_logs.py) build reports from a vllm bench serve result; this one is GuideLLM's own."""
import json
from pathlib import Path

import numpy as np
import pytest

from llmsched.validate.serving import validate
from llmsched.validate.serving_run import load_runs
from llmsched.workload.traces.server_log import read_server_log
from test_aiperf_records import step_fit

RUN = Path(__file__).parent / "data" / "cpu_guidellm_run" / "rate-8"


def test_the_report_reads_as_the_requests_guidellm_sent():
    log = read_server_log(RUN / "benchmarks.json", measured=True)
    report = json.loads((RUN / "benchmarks.json").read_text())["benchmarks"][0]["requests"]["successful"]
    assert log.format == "guidellm" and log.boundary == "client" and len(log) == len(report) == 24
    assert (log.prompt_lens == 400).all() and (log.output_lens == 32).all()
    assert "GuideLLM constant strategy: sent on a schedule; replayed at the recorded send times" in log.notes
    # each request's client timings are the engine log's client stamps of the same request (matched by vLLM's id,
    # the report's response_id), and the engine's first token comes before the client's chunk
    engine = {json.loads(line)["request_id"]: json.loads(line) for line in (RUN / "requests.jsonl").read_text()
              .splitlines()}
    for i, rec in enumerate(sorted(report, key=lambda r: r["request_start_time"])):
        row = engine[rec["response_id"]]
        assert log.ttft[i] == pytest.approx(row["client_first"] - row["client_sent"], abs=2e-6)
        assert log.e2e[i] == pytest.approx(row["client_last"] - row["client_sent"], abs=2e-6)
        assert row["first_token_ts"] <= row["client_first"]
    # the sends as they went (the replay keeps them), on the constant schedule give or take GuideLLM's dispatch
    assert np.median(np.diff(log.arrivals)) == pytest.approx(1 / 8, rel=0.02) and np.diff(log.arrivals).std() > 0


def test_validate_serving_compares_the_report_at_the_client():
    """The report and the engine's log read at the client agree, as two records of one run should; the replay with
    the run's own CPU step fit is near both."""
    report = validate(load_runs(RUN, "benchmarks.json")[0], **step_fit(RUN))
    stamped = validate(load_runs(RUN, "requests.jsonl", "client")[0], **step_fit(RUN))
    assert report["log_format"] == "guidellm" and report["latency_boundary"] == stamped["latency_boundary"] == "client"
    for metric in ("ttft", "tpot", "e2e"):
        assert report["errors"][metric]["p50"] == pytest.approx(stamped["errors"][metric]["p50"], abs=0.5)
    assert abs(report["errors"]["ttft"]["p50"]) < 20 and abs(report["errors"]["e2e"]["p50"]) < 5

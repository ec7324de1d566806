"""Trace readers on small temp files, and (when ../shared/data is there) on the real traces."""

import numpy as np
import pytest
from conftest import shared_data_dir

from llmsched.workload import (DataFileNotFound, TraceError, read_azure, read_lengths, read_trace, read_vidur,
                               resolve_data_file, trace_workload)


DATA = shared_data_dir()
needs_data = pytest.mark.skipif(DATA is None, reason="shared data folder not found (set LLMSCHED_DATA)")


def write(tmp_path, text, name="t.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


AZURE_OK = ("TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
            "2023-11-16 18:15:46.6805900,374,44\r\n"
            "2023-11-16 18:15:50.9951690,396,109\r\n"
            "2023-11-16 18:16:00.0000000,10,1")


def test_read_azure(tmp_path):
    tr = read_azure(write(tmp_path, AZURE_OK))
    np.testing.assert_allclose(tr.arrivals, [0.0, 4.314579, 13.31941], atol=1e-9)
    assert tr.prompt_lens.tolist() == [374, 396, 10] and tr.output_lens.tolist() == [44, 109, 1]
    assert tr.format == "azure" and len(tr) == 3
    assert read_trace(tr.source).format == "azure"


def test_read_vidur_and_lengths(tmp_path):
    tr = read_vidur(write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,374,44\n4.31,396,109\n"))
    assert tr.arrivals.tolist() == [0.0, 4.31] and tr.output_lens.tolist() == [44, 109]
    tr = read_lengths(write(tmp_path, "num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n"
                                      "74,918,992,0.08\n290,905,1195,0.32\n\n"))
    assert tr.arrivals is None and tr.prompt_lens.tolist() == [74, 290] and tr.format == "lengths"
    tr = read_trace(write(tmp_path, "question_length,answer_length\n24,10\n6,47.0\n", "lmsys.csv"))
    assert tr.prompt_lens.tolist() == [24, 6] and tr.output_lens.tolist() == [10, 47]


@pytest.mark.parametrize("body, match", [
    ("0.0,374,44\n1.0,12\n", r"t\.csv:3: row has 2 field"),
    ("0.0,374,44\n1.0,,5\n", r"t\.csv:3: num_prefill_tokens is empty"),
    ("0.0,374,44\n1.0,3.5,5\n", r"t\.csv:3: num_prefill_tokens is '3.5', not a whole number"),
    ("0.0,374,44\n1.0,abc,5\n", r"t\.csv:3: num_prefill_tokens is 'abc'"),
    ("0.0,374,44\n1.0,5,-2\n", r"t\.csv:3: num_decode_tokens is -2"),
    ("0.0,374,44\n\n1.0,5,0\n", r"t\.csv:4: num_decode_tokens is 0 .*zero_lengths='drop'"),
    ("0.0,0,44\n", r"t\.csv:2: num_prefill_tokens is 0"),
    ("0.0,374,44\nsoon,5,5\n", r"t\.csv:3: arrived_at is 'soon'"),
    ("0.0,374,44\nnan,5,5\n", r"t\.csv:3: arrived_at .* finite"),
    ("5.0,374,44\n1.0,5,5\n", r"t\.csv:3: arrived_at goes back in time"),
])
def test_malformed_vidur_rows_name_file_and_line(tmp_path, body, match):
    path = write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n" + body)
    with pytest.raises(TraceError, match=match):
        read_trace(path)


@pytest.mark.parametrize("row, match", [
    ("2023-11-16 18:15:50.99,xx,1", r"t\.csv:3: ContextTokens is 'xx'"),
    ("yesterday,5,1", r"t\.csv:3: TIMESTAMP is 'yesterday', not a timestamp"),
    (",5,1", r"t\.csv:3: TIMESTAMP"),
    ("2023-11-16 18:15:40.00,5,1", r"t\.csv:3: TIMESTAMP goes back in time"),
])
def test_malformed_azure_rows_name_file_and_line(tmp_path, row, match):
    path = write(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n" + row)
    with pytest.raises(TraceError, match=match):
        read_azure(path)


def test_zero_length_policy(tmp_path):
    path = write(tmp_path, "question_length,answer_length\n24,10\n6,0\n0,5\n7,8\n")
    with pytest.raises(TraceError, match=r"t\.csv:3: answer_length is 0 \(2 row"):
        read_trace(path)
    dropped = read_trace(path, zero_lengths="drop")
    assert dropped.prompt_lens.tolist() == [24, 7] and dropped.dropped == 2 and dropped.clamped == 0
    clamped = read_trace(path, zero_lengths="clamp")
    assert clamped.prompt_lens.tolist() == [24, 6, 1, 7] and clamped.output_lens.tolist() == [10, 1, 5, 8]
    assert clamped.clamped == 2 and clamped.dropped == 0
    with pytest.raises(ValueError, match="zero_lengths must be one of"):
        read_trace(path, zero_lengths="ignore")


def test_drop_keeps_arrivals_aligned(tmp_path):
    path = write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n1,2,0\n2,3,3\n")
    tr = read_vidur(path, zero_lengths="drop")
    assert tr.arrivals.tolist() == [0, 2] and tr.prompt_lens.tolist() == [1, 3]


def test_unknown_header_lists_supported_formats(tmp_path):
    with pytest.raises(TraceError, match="unknown trace format.*TIMESTAMP.*arrived_at.*question_length"):
        read_trace(write(tmp_path, "a,b,c\n1,2,3\n"))
    with pytest.raises(TraceError, match="empty"):
        read_trace(write(tmp_path, ""))
    with pytest.raises(TraceError, match="header lacks column"):
        read_azure(write(tmp_path, "num_prefill_tokens,num_decode_tokens\n1,1\n"))


def test_resolve_data_file(tmp_path, monkeypatch):
    path = write(tmp_path, "question_length,answer_length\n1,1\n", "mine.csv")
    assert resolve_data_file(path) == path
    (tmp_path / "traces").mkdir()
    inner = write(tmp_path / "traces", "question_length,answer_length\n1,1\n", "inner.csv")
    monkeypatch.setenv("LLMSCHED_DATA", str(tmp_path))
    assert resolve_data_file("mine.csv") == tmp_path / "mine.csv"
    assert resolve_data_file("inner.csv") == inner
    with pytest.raises(DataFileNotFound, match=r"nowhere\.csv.*looked in: nowhere\.csv, .*traces.*shared"):
        resolve_data_file("nowhere.csv")


def test_trace_workload_replays_rows_in_order(tmp_path):
    path = write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n10,1,9\n11,2,8\n14,3,7\n20,4,6\n")
    reqs = trace_workload(path).requests()
    assert [(r.arrival, r.prompt_len, r.output_len) for r in reqs] == [(0, 1, 9), (1, 2, 8), (4, 3, 7), (10, 4, 6)]
    fast = trace_workload(path, target_rate=3.0, num_requests=3).requests()
    # --rate is the mean rate of what is replayed: the prefix's own span, not the whole trace's
    assert [r.arrival for r in fast] == pytest.approx([0, 1 / 6, 4 / 6]) and [r.prompt_len for r in fast] == [1, 2, 3]
    with pytest.raises(ValueError, match="only 4"):
        trace_workload(path, num_requests=5).requests()
    with pytest.raises(ValueError, match="without arrival times"):
        trace_workload(write(tmp_path, "question_length,answer_length\n1,1\n", "l.csv"))


@pytest.mark.shared_data
@needs_data
def test_real_traces_agree():
    azure = read_trace(DATA / "traces" / "AzureLLMInferenceTrace_conv.csv")
    vidur = read_trace(DATA / "traces" / "vidur_splitwise_conv.csv")
    assert len(azure) == len(vidur) == 19_366
    np.testing.assert_allclose(azure.arrivals, vidur.arrivals, atol=1e-6)
    assert np.array_equal(azure.prompt_lens, vidur.prompt_lens)
    assert np.array_equal(azure.output_lens, vidur.output_lens)
    assert len(read_trace(DATA / "traces" / "AzureLLMInferenceTrace_code.csv")) == 8_819
    with pytest.raises(TraceError, match=r"lmsys.*\.csv:\d+: answer_length is 0 \(151 row"):
        read_trace(DATA / "traces" / "lmsys_chat_1m_lengths_sample_input_lt500_output_lt600.csv")


@pytest.mark.shared_data
@needs_data
def test_real_trace_replay_at_target_rate():
    w = trace_workload(DATA / "traces" / "AzureLLMInferenceTrace_conv.csv", target_rate=10.0)
    reqs = w.requests()
    assert len(reqs) == 19_366
    assert (len(reqs) - 1) / reqs[-1].arrival == pytest.approx(10.0)


def test_azure_2024_timestamps_with_offset(tmp_path):
    path = write(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,4808,10\n"
                           "2024-05-10 00:00:01.509930+00:00,3180,8\n")
    assert read_trace(path).arrivals.tolist() == pytest.approx([0.0, 1.5])


@pytest.mark.parametrize("stamps", [("1700158624", "1700158625.5"), ("1700158624000", "1700158625500")])
def test_azure_epoch_seconds_and_milliseconds(tmp_path, stamps):
    """numpy read Unix epoch seconds as years (arrivals 31,622,400 s apart instead of 1 s)."""
    path = write(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                           f"{stamps[0]},4808,10\n{stamps[1]},3180,8\n")
    assert read_trace(path).arrivals.tolist() == pytest.approx([0.0, 1.5])


@pytest.mark.parametrize("body, match", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,5,5\n1700158625,5,5\n",
     r":3: TIMESTAMP is '1700158625', but line 2 holds .* one timestamp format per file"),
    ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\n1e300,5,5\n", r":3: arrived_at puts this arrival at 1e\+300 s"),
])
def test_misread_arrivals_are_refused_by_line(tmp_path, body, match):
    """mixed formats were blamed as 'goes back in time'; a Vidur arrival at 1e300 s ran (TTFT 0)."""
    with pytest.raises(TraceError, match=match):
        read_trace(write(tmp_path, body))

"""Mooncake's traces: `--trace conversation_trace.jsonl` runs, each request carrying its prompt's blocks as a
Content read from the file as the run goes, and equal hash ids giving equal block hashes."""
import json
from pathlib import Path

import pytest

from llmsched.content import Space, piece_id
from llmsched.experiment import RunConfig, build_source, run
from llmsched.workload.traces.readers import TraceError, read_trace, trace_kind
from llmsched.workload.workload import trace_workload


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROWS = [
    {"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 2]},
    {"timestamp": 500, "input_length": 700, "output_length": 3, "hash_ids": [0, 1]},
    {"timestamp": 1500, "input_length": 600, "output_length": 4, "hash_ids": [0, 3]},
]


def test_a_mooncake_file_reads_as_arrivals_lengths_and_block_contents(tmp_path):
    path = write(tmp_path / "m.jsonl", ROWS)
    assert trace_kind(path) == "mooncake"
    trace = read_trace(path)
    assert trace.arrivals.tolist() == [0.0, 0.5, 1.5] and trace.prompt_lens.tolist() == [1100, 700, 600]
    assert trace.hash_block == 512
    reqs = trace_workload(path).requests()
    assert [r.content.pieces() for r in reqs] == [
        [(piece_id(Space.BLOCK, 0), 512), (piece_id(Space.BLOCK, 1), 512), (piece_id(Space.BLOCK, 2), 76)],
        [(piece_id(Space.BLOCK, 0), 512), (piece_id(Space.BLOCK, 1), 188)],
        [(piece_id(Space.BLOCK, 0), 512), (piece_id(Space.BLOCK, 3), 88)]]
    a, b, c = (r.content.block_hashes(16, r.prompt_len) for r in reqs)
    assert a[:43] == b  # b's 188-token block 1 is the start of a's block 1: b's 43 KV blocks are all in a
    assert a[:32] == c[:32] and a[32] != c[32]
    assert len({r.content.reply for r in reqs}) == 3


def test_contents_stream_in_chunks_and_follow_the_requests_kept(tmp_path):
    rows = [{"timestamp": i, "input_length": 513, "output_length": 1, "hash_ids": [i, i + 1]} for i in range(10)]
    path = write(tmp_path / "m.jsonl", rows)
    trace = read_trace(path)
    chunks = list(trace.contents(7, 3))
    assert [len(c) for c in chunks] == [3, 3, 1]
    reqs = trace_workload(path, num_requests=7).source(chunk=3).requests
    assert [r.content.ids[0] for r in reqs] == [piece_id(Space.BLOCK, i) for i in range(7)]
    capped = trace_workload(path, max_total_tokens=100).requests()  # prompt clipped to 99: content cut with it
    assert all(r.prompt_len == 99 and r.content.length == 99 for r in capped)


def test_zero_lengths_follow_the_policy_and_the_contents_stay_aligned(tmp_path):
    rows = [dict(ROWS[0]), {"timestamp": 600, "input_length": 700, "output_length": 0, "hash_ids": [5, 6]},
            dict(ROWS[2])]
    path = write(tmp_path / "m.jsonl", rows)
    with pytest.raises(TraceError, match=r"m.jsonl:2: output_length is 0"):
        read_trace(path)
    kept = trace_workload(path, zero_lengths="drop").requests()
    assert [r.prompt_len for r in kept] == [1100, 600] and kept[1].content.ids[1] == piece_id(Space.BLOCK, 3)


def test_the_conversation_trace_runs_from_the_command_line_name(shared_data, tmp_path):
    cfg = RunConfig(trace="conversation_trace.jsonl", rate=None, num_requests=200, model="llama-3.1-8b", gpu="h100")
    reqs = build_source(cfg).requests
    assert len(reqs) == 200 and all(r.content.length == r.prompt_len for r in reqs)
    assert sum(r.content.ids[0] == piece_id(Space.BLOCK, 0) for r in reqs) > 100  # the shared first block
    result = run(cfg)
    assert len(result.requests) == 200

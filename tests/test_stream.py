"""A streamed run (``simulate --stream``) writes the very files of an in-memory run, and its summary differs only
where metrics/stream_summary.py says: sketch quantiles within their 1% bound, float sums in their last bits."""
from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from llmsched.cli import main
from llmsched.experiment import RunConfig, run
from llmsched.metrics import request_stream, step_stream
from llmsched.metrics.summary import summarize
from llmsched.metrics.writers import write_run
from llmsched.request import Status

WORKLOADS = {
    "kv-pressure": dict(workload="sharegpt", rate=12.0, num_requests=60, num_blocks=300, max_num_seqs=32),
    "evict": dict(workload="sharegpt", rate=12.0, num_requests=60, num_blocks=300, overflow="evict-newest"),
    "swap": dict(workload="sharegpt", rate=12.0, num_requests=60, num_blocks=300, preemption_mode="swap"),
    "replicas-tiers": dict(workload="azure-conv", rate=25.0, num_requests=100, replicas=4, router="least-load",
                           tiers="paid:ttft=1:tbt=0.1:share=0.3,free:ttft=5:tbt=0.5"),
    "replicas-lanes": dict(workload="azure-conv", rate=25.0, num_requests=100, replicas=3, router="round-robin"),
    "closed-loop": dict(workload="sharegpt", concurrency=16, num_requests=60, rate=None, num_blocks=800),
    "horizon": dict(workload="azure-conv", rate=8.0, num_requests=100, horizon=6.0, num_blocks=600),
    "rejects": dict(workload="sharegpt", rate=4.0, num_requests=60, max_model_len=700),
}
SKETCHED = ("ttft", "tpot", "e2e")  # quantiles from a sketch in a streamed summary
EXACT_FLOATS = {"arrival_from", "arrival_to", "start", "end", "span", "max", "end_time", "kv_util_max",
                "requests_per_s", "output_tokens_per_s", "input_tokens_per_s", "fraction", "arrival_rate",
                "per_finished_request", "mean_batch_tokens", "mean_prefill_tokens", "mean_prefills",
                "mean_decodes", "tbt_p99", "p50", "p90", "p99", "ttft", "tbt", "tpot", "all"}


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of a few rows, so every run flushes mid-run many times (and steps wait in the tail)."""
    monkeypatch.setattr(request_stream, "CHUNK_ROWS", 7)
    monkeypatch.setattr(step_stream, "CHUNK_ROWS", 13)


def _both(cfg: RunConfig, tmp_path):
    memory = run(cfg)
    summary = summarize(memory)
    write_run(memory, summary, tmp_path / "memory")
    streamed = run(cfg, stream=True, out=tmp_path / "stream")
    streamed_summary = summarize(streamed)
    write_run(streamed, streamed_summary, tmp_path / "stream")
    return memory, summary, streamed, streamed_summary


@pytest.mark.parametrize("scheduler", ["sarathi", "vllm", "slai", "rad"])
@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_streamed_files_are_identical_and_summary_within_bounds(scheduler, workload, tmp_path):
    cfg = RunConfig(scheduler=scheduler, seed=3, keep_gaps=False, latency_boundary="engine", **WORKLOADS[workload])
    if workload == "swap" and scheduler == "rad":
        cfg = dataclasses.replace(cfg, preemption_mode="recompute")
    memory, summary, streamed, got = _both(cfg, tmp_path)
    for name in ("requests.csv", "steps.csv"):
        assert (tmp_path / "stream" / name).read_bytes() == (tmp_path / "memory" / name).read_bytes(), name
    assert len(streamed.requests) == len(memory.requests) and len(streamed.steps) == len(memory.steps)
    assert got["run"].pop("streamed") is True
    for m in SKETCHED:
        assert got["latency"][m].pop("source") == "sketch"
        _check_sketch_quantiles(got["latency"][m], memory, m)
    _compare(got, summary, path="")


def _check_sketch_quantiles(stats: dict, memory, metric: str):
    """Each sketch quantile lies within 1% of the order statistics numpy interpolates between."""
    finished = memory.requests.cols["status"]
    v = np.frombuffer(memory.requests.cols[metric], dtype=np.float64)[np.asarray(finished) == int(Status.FINISHED)]
    v = np.sort(v[np.isfinite(v)])
    for q in (50, 90, 99):
        got = stats[f"p{q}"]
        stats[f"p{q}"] = "sketched"
        if not len(v):
            assert math.isnan(got)
            continue
        rank = q / 100 * (len(v) - 1)
        lo, hi = v[math.floor(rank)], v[math.ceil(rank)]
        assert lo * (1 - 0.0101) <= got <= hi * (1 + 0.0101), (metric, q, got, lo, hi)


def _compare(got, want, path):
    if isinstance(want, dict):
        assert got.keys() == want.keys(), path
        for k in want:
            if k != "wall_time":
                _compare(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert got == want, path
    elif got == "sketched":
        pass
    elif isinstance(want, float) and not isinstance(want, bool):
        key = path.rsplit(".", 1)[-1]
        if math.isnan(want):
            assert math.isnan(got), path
        elif key in EXACT_FLOATS:
            assert got == want, path
        else:  # a float sum added chunk by chunk
            assert got == pytest.approx(want, rel=1e-12, abs=1e-15), path
    else:
        assert got == want, path


def test_stream_cli_writes_the_files_and_refuses_what_it_cannot_do(tmp_path, capsys):
    args = ["simulate", "--scheduler", "vllm-chunked", "--workload", "sharegpt", "--rate", "4",
            "--num-requests", "30", "--no-progress", "--latency-boundary", "engine"]
    assert main([*args, "--sketch", "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--stream", "--out", str(tmp_path / "b")]) == 0
    for name in ("requests.csv", "steps.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    # what --help says it writes (it said "the files are the same", of a run that keeps the gaps)
    rows = (tmp_path / "b" / "requests.csv").read_text().splitlines()
    offset = rows[0].split(",").index("gap_offset")
    assert {row.split(",")[offset] for row in rows[1:]} == {"0"}
    assert main(["simulate", "--help"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "the files are those of a --sketch run (no gap array is kept, so requests.csv's gap_offset is 0)" in said
    assert json.loads((tmp_path / "b" / "summary.json").read_text())["run"]["streamed"] is True
    assert main([*args, "--stream"]) == 0  # totals only, no files
    for extra in (["--warmup", "5"], ["--cooldown", "5"], ["--plots", "--out", str(tmp_path / "c")]):
        assert main([*args, "--stream", *extra]) != 0  # --plots: no timeline to draw, the others need the rows
        assert "--stream" in capsys.readouterr().err
    assert main([*args, "--stream", "--plots", "--timeline-window", "2", "--out", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "timeline.png").stat().st_size > 0 and not (tmp_path / "d" / "kv_usage.png").exists()


def test_streamed_logs_hold_a_chunk_at_most(tmp_path):
    cfg = RunConfig(scheduler="sarathi", workload="sharegpt", rate=8.0, num_requests=200, seed=1, keep_gaps=False,
                    latency_boundary="engine")
    result = run(cfg, stream=True, out=tmp_path)
    assert len(result.requests) == 200 and len(result.requests.cols["id"]) == 0
    assert len(result.steps.start) == 0 and not len(result.steps.tail["start"])
    with pytest.raises(ValueError, match="--stream"):
        result.requests.column("ttft")
    with pytest.raises(ValueError, match="keep_gaps"):
        run(dataclasses.replace(cfg, keep_gaps=True), stream=True)


def test_moe_dp_ranks_in_lockstep_stream_and_cache_prefixes(tmp_path):
    """A MoE model's DP ranks step in lockstep (sim/dp_lockstep.py); with prefixes to cache, or streamed, such a run
    failed with '--stream does not run DP ranks in lockstep' (a log of cached tokens is not the default log)."""
    cfg = RunConfig(scheduler="sarathi", model="qwen3-30b-a3b", gpu="h100", dp=2, expert_parallel=True,
                    workload="shared-prefix", rate=8.0, num_requests=40, seed=2, keep_gaps=False,
                    latency_boundary="engine")
    memory, summary, streamed, got = _both(cfg, tmp_path)
    for name in ("requests.csv", "steps.csv"):
        assert (tmp_path / "stream" / name).read_bytes() == (tmp_path / "memory" / name).read_bytes(), name
    assert summary["counts"]["finished"] == 40 and sum(r["cached_tokens"] for r in memory.replica_stats) > 0

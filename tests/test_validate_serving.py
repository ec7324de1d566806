"""Real servers' per-request logs read as published, replayed, and compared: `llmsched validate-serving`."""
import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from llmsched.cli import main
from llmsched.validate.serving import TARGETS, dp_router, replay_config
from llmsched.validate.serving_run import load_run
from llmsched.workload.traces.server_log import read_server_log

RUNS = Path(__file__).parent / "data" / "gpu_runs"
LLAMA = RUNS / "h200-llama-3.1-8b"


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_requests_jsonl_is_read_as_published():
    log = read_server_log(LLAMA / "requests.jsonl", measured=True)
    rows = rows_of(LLAMA / "requests.jsonl")
    assert len(log) == len(rows) == 300 and log.format == "requests.jsonl"
    assert log.arrivals[0] == 0.0 and np.all(np.diff(log.arrivals) >= 0)
    queued = np.array([r["queued_ts"] for r in rows])
    assert np.allclose(log.arrivals, np.sort(queued) - queued.min())  # the engine's own arrival clock
    ttft = np.array([r["first_token_ts"] - r["queued_ts"] for r in rows])
    assert np.median(log.ttft) == pytest.approx(np.median(ttft))
    e2e = np.array([r["last_token_ts"] - r["queued_ts"] for r in rows])
    out = np.array([r["output_toks"] for r in rows])
    assert np.median(log.tpot) == pytest.approx(np.median((e2e - ttft) / (out - 1)))
    assert sorted(log.prompt_lens.tolist()) == sorted(r["input_toks"] for r in rows)


def bench_result(folder: Path) -> dict:
    """The fixture's requests as `vllm bench serve --save-result --save-detailed` writes them (its schema:
    vllm/benchmarks/serve.py), each request's decode gaps spread evenly."""
    rows = rows_of(folder / "requests.jsonl")
    ttfts = [r["first_token_ts"] - r["queued_ts"] for r in rows]
    lat = [r["last_token_ts"] - r["queued_ts"] for r in rows]
    itls = [[(e - t) / (r["output_toks"] - 1)] * (r["output_toks"] - 1) for r, t, e in zip(rows, ttfts, lat)]
    return {"duration": 40.0, "completed": len(rows), "input_lens": [r["input_toks"] for r in rows],
            "output_lens": [r["output_toks"] for r in rows], "ttfts": ttfts, "itls": itls, "latencies": lat,
            "start_times": [1000.0 + r["queued_ts"] - rows[0]["queued_ts"] for r in rows],
            "errors": [""] * len(rows), "generated_texts": [""] * len(rows)}


def test_vllm_bench_results_are_read_with_their_itls(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(bench_result(LLAMA)))
    log = read_server_log(path, measured=True)
    ref = read_server_log(LLAMA / "requests.jsonl", measured=True)
    assert log.format == "vllm-bench" and np.allclose(log.arrivals, ref.arrivals)
    assert np.array_equal(np.sort(log.output_lens), np.sort(ref.output_lens))
    assert sum(len(g) for g in log.itls) == int((log.output_lens - 1).sum())


def test_simulate_replays_a_server_log_exactly(tmp_path):
    out = tmp_path / "sim"
    code = main(["simulate", "--trace", str(LLAMA / "requests.jsonl"), "--model", "llama-3.1-8b", "--gpu", "h200",
                 "--scheduler", "vllm-chunked", "--batch-time", "vllm-v1", "--max-num-seqs", "128",
                 "--max-num-batched-tokens", "2048", "--out", str(out), "--no-progress", "--latency-boundary", "engine"])
    assert code == 0
    with (out / "requests.csv").open() as f:
        sim = sorted(csv.DictReader(f), key=lambda r: int(r["id"]))
    log = read_server_log(LLAMA / "requests.jsonl")
    assert [int(r["prompt_len"]) for r in sim] == log.prompt_lens.tolist()
    assert [int(r["output_len"]) for r in sim] == log.output_lens.tolist()
    # the replay keeps the log's arrivals (async scheduling re-stamps an arrival during a step at its end)
    arrivals = np.array([float(r["arrival"]) for r in sim])
    assert np.all(arrivals >= log.arrivals - 1e-12) and np.all(arrivals - log.arrivals < 0.2)


def test_replay_takes_the_runs_engine_arguments_and_vllms_own_kv_size():
    run = load_run(LLAMA)
    cfg = replay_config(run)
    meta = json.loads((LLAMA / "meta.json").read_text())
    assert (cfg.scheduler, cfg.gpu, cfg.max_num_seqs, cfg.max_num_batched_tokens) == ("vllm-chunked", "h200", 128, 2048)
    assert cfg.scheduler_params == {"token_budget": 2048} and cfg.rate is None
    assert cfg.num_blocks == meta["engine_defaults_seen"]["num_gpu_blocks"]
    assert cfg.batch_time_params["capture_sizes"] == meta["engine_defaults_seen"]["cudagraph_capture_sizes"]
    assert dp_router("0.19.0") == "vllm-dp-0.19" and dp_router("0.26.0") == "vllm-dp-latest"


def test_validate_serving_writes_real_vs_simulated_with_errors(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["validate-serving", str(LLAMA), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "h200-llama-3.1-8b (validation)" in printed and "targets:" in printed
    report = json.loads((out / "validation.json").read_text())
    row = report["runs"][0]
    real, sim, err = row["real"], row["simulated"], row["errors"]
    for metric in ("ttft", "tpot", "e2e"):
        for stat in ("mean", "p50", "p90", "p99"):
            assert err[metric][stat] == pytest.approx(100 * (sim[metric][stat] - real[metric][stat]) /
                                                      real[metric][stat])
    log = read_server_log(LLAMA / "requests.jsonl", measured=True)
    assert real["ttft"]["p50"] == pytest.approx(float(np.median(log.ttft)))
    assert set(row["targets"]) == {f"{m} {s}" for m, s in TARGETS}
    assert "prefix_cache" not in row  # no hash_ids or num_cached_tokens: prompts unique, nothing to compare
    # the measured ground truth is near the simulation: every median within 25% (docs/fidelity.md has the table)
    assert all(abs(err[m]["p50"]) < 25 for m in ("ttft", "tpot", "e2e"))
    with (out / "validation.csv").open() as f:
        table = list(csv.DictReader(f))
    assert {r["metric"] for r in table} == {"ttft", "tpot", "e2e", "throughput"}  # no ITL in a requests.jsonl
    assert (out / "cdf.png").stat().st_size > 10_000


def small_run(tmp_path: Path, n: int = 120, name: str = "small", **engine) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    lines = (LLAMA / "requests.jsonl").read_text().splitlines()[:n]
    (folder / "requests.jsonl").write_text("\n".join(lines) + "\n")
    meta = json.loads((LLAMA / "meta.json").read_text())
    meta["engine_kwargs"].update(engine)
    (folder / "meta.json").write_text(json.dumps(meta))
    shutil.copy(LLAMA / "config.json", folder / "config.json")
    return folder


def test_bench_result_folder_reports_itl(tmp_path):
    folder = small_run(tmp_path)
    (folder / "bench.json").write_text(json.dumps(bench_result(folder)))
    (folder / "requests.jsonl").unlink()
    out = tmp_path / "out"
    assert main(["validate-serving", str(folder), "--out", str(out)]) == 0
    row = json.loads((out / "validation.json").read_text())["runs"][0]
    assert row["log_format"] == "vllm-bench" and row["real"]["itl"]["p50"] > 0 and row["simulated"]["itl"]["p50"] > 0


def test_dp_runs_replay_on_dp_ranks_behind_vllms_balancer(tmp_path):
    folder = small_run(tmp_path, data_parallel_size=2)
    cfg = replay_config(load_run(folder))
    assert cfg.dp == 2 and cfg.router == "vllm-dp-latest" and not cfg.expert_parallel
    out = tmp_path / "out"
    assert main(["validate-serving", str(folder), "--out", str(out)]) == 0
    row = json.loads((out / "validation.json").read_text())["runs"][0]
    assert row["dp"] == 2 and row["simulated"]["throughput"]["rps"] > 0


def test_calibrate_stores_a_profile_and_labels_the_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LLMSCHED_BATCH_TIME_PROFILES", str(tmp_path / "profiles"))
    fit, held = small_run(tmp_path, 80, "fit"), small_run(tmp_path, 80, "held")
    out = tmp_path / "out"
    assert main(["validate-serving", str(fit), str(held), "--calibrate", "h200-test", "--fit", str(fit),
                 "--fit-terms", "mem_eff", "--out", str(out)]) == 0
    profile = json.loads((tmp_path / "profiles" / "h200-test.json").read_text())
    assert profile["kind"] == "vllm-v1" and profile["calibrated_on"] == ["fit"]
    assert 0 < profile["params"]["mem_eff"] <= 1
    assert profile["fit"]["rms_log_error_after"] <= profile["fit"]["rms_log_error_before"]
    splits = {r["run"]: r["split"] for r in json.loads((out / "validation.json").read_text())["runs"]}
    assert splits == {"fit": "calibration", "held": "validation"}
    capsys.readouterr()
    assert main(["validate-serving", str(held), str(fit), "--batch-time", "h200-test"]) == 0
    printed = capsys.readouterr().out
    assert "held (validation)" in printed and "fit (calibration)" in printed and "batch time h200-test" in printed
    assert main(["simulate", "--batch-time", "h200-test", "--model", "llama-3.1-8b", "--gpu", "h200", "--rate", "2",
                 "--num-requests", "20", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["presets"]) == 0
    assert "h200-test            stored profile: vllm-v1 with mem_eff=" in capsys.readouterr().out

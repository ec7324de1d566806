"""Client-side logs compared like with like: this project's CPU capture (vllm serve + vllm bench serve with the
engine's own stamps), GuideLLM reports, inference-perf lifecycle reports, and a replayed log whose preempted
requests find their own cached blocks."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

from llmsched.experiment import run
from llmsched.run_config import RunConfig
from llmsched.validate.serving import kept, replay_config, validate
from llmsched.validate.serving_run import load_runs
from llmsched.workload.traces.lifecycle_report import LifecycleReport
from llmsched.workload.traces.server_log import read_server_log
from llmsched.workload.traces.readers import TraceError

DATA = Path(__file__).parent / "data"
CPU = DATA / "cpu_client_run"
PERF = DATA / "inference_perf_h100"


def cpu_params(folder: Path) -> dict:
    model = json.loads((folder / "meta.json").read_text())["cpu_step_model"]
    return {"const": model["const"], "per_token": model["per_token"]}


def test_the_capture_keeps_the_client_and_the_engine_on_one_clock():
    for folder in (CPU / "rate-2", CPU / "rate-8"):
        rows = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
        bench = json.loads((folder / "bench.json").read_text())
        assert len(rows) == len(bench["ttfts"]) == 30 and not any(bench["errors"])
        for r in rows:  # client send < server receipt < engine queue < first token < client's first chunk
            assert r["client_sent"] < r["http_ts"] < r["added_ts"] <= r["queued_ts"] <= r["scheduled_ts"]
            assert r["scheduled_ts"] < r["first_token_ts"] <= r["first_out_ts"] < r["client_first"]
            assert r["last_token_ts"] <= r["last_out_ts"] < r["client_last"]
        client = read_server_log(folder / "requests.jsonl", measured=True, clock="client")
        from_bench = read_server_log(folder / "bench.json", measured=True)
        np.testing.assert_allclose(np.sort(client.ttft), np.sort(from_bench.ttft), atol=2e-6)
        np.testing.assert_allclose(np.sort(client.e2e), np.sort(from_bench.e2e), atol=2e-6)
        engine = read_server_log(folder / "requests.jsonl", measured=True)
        assert engine.boundary == "engine" and client.boundary == "client"
        assert np.median(client.ttft) > np.median(engine.ttft)  # the front end and the step in flight


@pytest.mark.parametrize("rate", ["rate-2", "rate-8"])
def test_validate_serving_replays_the_cpu_capture_client_side(rate):
    folder = CPU / rate
    run_ = load_runs(folder, None, "client")[0]
    kw = dict(gpu="l4", batch_time="linear", batch_time_params=cpu_params(folder))
    after = validate(run_, **kw)
    before = validate(run_, simulated_at="engine", **kw)
    assert after["latency_boundary"] == "client" and after["front_end"] == "vllm-serve"
    assert before["latency_boundary"] == "engine"
    assert after["real"] == before["real"]  # the same client measurements, two predictions of them
    # the client-side replay adds the front end's measured terms: nearer the client's TTFT and E2E than the
    # engine-side prediction that was all the project gave before
    for metric in ("ttft", "e2e"):
        assert after["simulated"][metric]["p50"] > before["simulated"][metric]["p50"]
        assert abs(after["errors"][metric]["p50"]) < abs(before["errors"][metric]["p50"])
    assert abs(after["errors"]["throughput"]["output_tps"]) < 6


def guidellm_report(bench: dict, benchmarks: int = 1) -> dict:
    """A GuideLLM report (schema version 2) of the same requests as a vllm bench serve result."""
    rows = [{"request_id": str(i), "request_start_time": 1.8e9 + s, "prompt_tokens": p, "output_tokens": o,
             "time_to_first_token_ms": t * 1e3, "request_latency": e,
             "inter_token_latency_ms": (e - t) / (o - 1) * 1e3 if o > 1 else None}
            for i, (s, p, o, t, e) in enumerate(zip(bench["start_times"], bench["input_lens"], bench["output_lens"],
                                                    bench["ttfts"], bench["latencies"]))]
    one = {"type_": "generative_benchmark", "requests": {"successful": rows, "incomplete": [], "errored": []}}
    return {"metadata": {"version": 2}, "benchmarks": [one] * benchmarks}


def test_a_guidellm_report_reads_as_its_requests_at_the_client(tmp_path):
    bench = json.loads((CPU / "rate-8" / "bench.json").read_text())
    for k in (1, 2):
        folder = tmp_path / f"g{k}"
        folder.mkdir()
        (folder / "benchmarks.json").write_text(json.dumps(guidellm_report(bench, k)))
        (folder / "meta.json").write_text((CPU / "rate-8" / "meta.json").read_text())
        runs = load_runs(folder)
        assert len(runs) == k and all(r.boundary == "client" and r.log.format == "guidellm" for r in runs)
        ref = read_server_log(CPU / "rate-8" / "bench.json", measured=True)
        np.testing.assert_allclose(runs[0].log.arrivals, ref.arrivals, atol=1e-6)
        np.testing.assert_allclose(runs[0].log.ttft, ref.ttft, atol=1e-9)
        np.testing.assert_array_equal(runs[0].log.output_lens, ref.output_lens)
    report = guidellm_report(bench)
    report["benchmarks"][0]["requests"]["errored"] = {"count": 1}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(report))
    with pytest.raises(TraceError, match=r"benchmarks\[0\].requests.errored: dict, not a list of requests"):
        read_server_log(path, measured=True)


def test_guidellms_incomplete_requests_load_the_replay_but_are_not_compared(tmp_path):
    """GuideLLM cancels the requests in flight when a benchmark's time runs out: they were sent and served for a
    while, so the replay sends them, but only the successful ones' latencies are compared."""
    bench = json.loads((CPU / "rate-8" / "bench.json").read_text())
    report = guidellm_report(bench)
    requests = report["benchmarks"][0]["requests"]
    ok = sorted(requests["successful"], key=lambda r: r["request_start_time"])
    for r in ok[-10:]:  # the last ten sent, cut with half their output
        r["output_tokens"] //= 2
        for k in ("time_to_first_token_ms", "request_latency", "inter_token_latency_ms"):
            r[k] = None
    requests["successful"], requests["incomplete"] = ok[:-10], ok[-10:]
    folder = tmp_path / "cut"
    folder.mkdir()
    (folder / "benchmarks.json").write_text(json.dumps(report))
    for name in ("meta.json", "config.json"):
        (folder / name).write_text((CPU / "rate-8" / name).read_text())
    run_ = load_runs(folder)[0]
    assert len(run_.log) == len(ok) and int(run_.log.compared.sum()) == len(ok) - 10
    assert any("10 incomplete request(s)" in n for n in run_.log.notes)
    row = validate(run_, gpu="l4", batch_time="linear", batch_time_params=cpu_params(CPU / "rate-8"))
    real = read_server_log(CPU / "rate-8" / "bench.json", measured=True)
    assert row["real"]["ttft"]["p50"] == pytest.approx(float(np.percentile(real.ttft[:-10], 50)))
    assert len(row["samples"]["simulated"]["e2e"]) == len(ok) - 10 == len(row["samples"]["real"]["e2e"])


def test_inference_perf_stages_validate_their_percentiles():
    runs = load_runs(PERF)
    assert [r.name for r in runs] == [f"inference_perf_h100/stage_{i}" for i in range(4)]
    stage = runs[0]
    assert isinstance(stage.log, LifecycleReport) and stage.boundary == "client" and len(stage.log) == 60
    data = json.loads((PERF / "stage_0_lifecycle_metrics.json").read_text())
    assert stage.log.latency["ttft"]["p50"] == data["successes"]["latency"]["time_to_first_token"]["median"]
    assert stage.log.latency["tpot"]["p50"] is None  # meta.json: the demo's TPOT counted a BOS per chunk
    prompts, outputs = stage.log.lengths()
    assert prompts.min() >= 194 and prompts.max() <= 208 and outputs.max() <= 66
    row = validate(stage, "h100")
    assert row["targets"]["tpot p50"]["met"] is None and row["errors"]["tpot"]["p50"] is None
    assert row["simulated"]["throughput"]["rps"] == pytest.approx(1.0, rel=0.05)
    assert abs(row["errors"]["e2e"]["p50"]) < 15


def test_validate_serving_writes_its_figure_where_a_metric_is_not_compared(tmp_path):
    """The demo's TPOT is not comparable (meta.json), so its panel says so instead of a P50 error."""
    from llmsched.cli.commands import main
    stage = tmp_path / "stage"
    stage.mkdir()
    for name in ("meta.json", "config.json", "stage_0_lifecycle_metrics.json"):
        (stage / name).write_bytes((PERF / name).read_bytes())
    assert main(["validate-serving", str(stage), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "cdf.png").stat().st_size > 0
    rows = json.loads((tmp_path / "out" / "validation.json").read_text())["runs"]
    assert rows[0]["errors"]["tpot"]["p50"] is None


def test_an_inference_perf_stage_is_sent_as_its_load_generator_sends_it():
    """inference-perf's constant load draws int(rate x duration) exponential gaps scaled to the stage
    (load_timer.py's ConstantLoadTimer): the replay sends that count with Poisson-like gaps, not evenly spaced,
    over the first-to-last send span the report measured (load_summary.send_duration)."""
    stage = load_runs(PERF)[1]
    cfg = replay_config(stage, "h100")
    assert cfg.trace.endswith(".csv") and cfg.rate is None
    result = run(cfg)
    sends = np.sort(result.requests.column("arrival"))
    gaps = np.diff(sends)
    assert len(sends) == stage.log.count == 2278
    assert sends[-1] - sends[0] == pytest.approx(59.971021658042446, rel=1e-9)  # the stage's send_duration
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.1)  # exponential gaps, not constant ones


def test_a_request_preempted_by_recompute_finds_its_own_blocks(tmp_path):
    """A log without token ids: with vLLM's prefix cache on, a request preempted by recompute re-prefills only what
    the cache lost; without it, all of it."""
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(json.dumps({"request_id": str(i), "input_toks": 900, "output_toks": (50, 500)[i % 2],
                                       "arrival_time": 1.0 + 0.01 * i, "queued_ts": 5.0 + 0.01 * i}) + "\n"
                           for i in range(24)))  # short requests finish and make room before the cache forgets
    base = dict(trace=str(log), rate=None, scheduler="vllm-chunked", model="llama-3-8b", gpu="a100", num_blocks=1000,
                block_size=16, latency_boundary="engine", seed=0)
    cached = run(RunConfig(**base, prefix_caching=True))
    plain = run(RunConfig(**base, prefix_caching=False))
    assert sum(r["preemptions"] for r in cached.replica_stats) > 0
    assert sum(r["cached_tokens"] for r in cached.replica_stats) > 0  # found again after a preemption
    assert (cached.requests.column("cached_tokens") == 0).all()  # no prompt shares anything with another
    assert cached.steps.arrays()["prefill_tokens"].sum() < plain.steps.arrays()["prefill_tokens"].sum()


def current_inference_perf(tmp_path, concurrency=None, load_type=None):
    """The demo's stage 1 as inference-perf writes a stage since a486b01 (successes.prompt_tokens, not prompt_len),
    optionally a concurrent stage (load_summary.concurrency) and a meta.json naming its load type."""
    folder = tmp_path / "perf"
    folder.mkdir(parents=True)
    data = json.loads((PERF / "stage_1_lifecycle_metrics.json").read_text())
    prompts = data["successes"].pop("prompt_len")
    data["successes"]["prompt_tokens"] = {"total": prompts["mean"] * data["successes"]["count"], "cached": 0.0,
                                          **prompts}
    if concurrency:
        data["load_summary"]["concurrency"] = concurrency
        data["load_summary"].pop("requested_rate")
    (folder / "stage_0_lifecycle_metrics.json").write_text(json.dumps(data))
    meta = json.loads((PERF / "meta.json").read_text())
    meta["client"].pop("not_comparable")
    meta["client"].pop("load_type")
    if load_type:
        meta["client"]["load_type"] = load_type
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "config.json").write_text((PERF / "config.json").read_text())
    return folder


def test_current_inference_perf_stages_read_their_prompt_tokens_and_concurrency(tmp_path):
    stage = load_runs(current_inference_perf(tmp_path))[0]
    assert stage.log.prompt_cache[0] == 0 and stage.log.prompt_cache[1] > 0  # the report's cached and total
    assert validate(stage, "h100")["prefix_cache"]["real"]["hit_rate"] == 0.0
    prompts, _ = stage.log.lengths()
    assert prompts.min() >= 194 and stage.log.concurrency is None and stage.log.load_type == "constant"
    closed = load_runs(current_inference_perf(tmp_path / "c", concurrency=12))[0]
    assert closed.log.concurrency == 12 and closed.log.load_type == "concurrent"
    assert any("a closed loop of 12 in flight" in n for n in closed.log.notes)
    cfg = replay_config(closed, "h100")
    assert cfg.concurrency == 12 and cfg.rate is None and cfg.num_requests == closed.log.count
    row = validate(closed, "h100")
    assert row["simulated"]["throughput"]["rps"] > 0 and row["requests"] == closed.log.count


@pytest.mark.parametrize("concurrency, load_type, wanted", [
    (None, "concurrent", "has no load_summary.concurrency"),
    (12, "constant", "is a concurrent stage (load_summary.concurrency 12)"),
])
def test_a_stage_and_its_load_type_must_agree(tmp_path, concurrency, load_type, wanted):
    with pytest.raises(ValueError, match=re.escape(wanted)):
        load_runs(current_inference_perf(tmp_path, concurrency, load_type))


def inference_perf_requests(bench: dict, old: bool = False) -> list:
    """inference-perf's per-request report of the same requests as a vllm bench serve result: its current schema
    (request_metrics/response_metrics with the server's usage) or the KubeCon 2025 demo's (counts in info)."""
    rows = []
    for s, p, o, t, e, itl in zip(bench["start_times"], bench["input_lens"], bench["output_lens"], bench["ttfts"],
                                  bench["latencies"], bench["itls"]):
        times = list(5000.0 + s + t + np.concatenate([[0.0], np.cumsum(itl)]))
        info = ({"input_tokens": p, "output_tokens": o, "output_token_times": times} if old else
                {"request_metrics": {"text": {"input_tokens": p + 3}}, "input_tokens": p + 3,
                 "response_metrics": {"output_tokens": o + 1, "output_token_times": times, "chunk_times": times,
                                      "server_usage": {"prompt_tokens": p, "completion_tokens": o}}})
        rows.append({"start_time": 5000.0 + s, "end_time": 5000.0 + s + e, "request": "{}", "response": None,
                     "info": info, "error": None})
    return rows


@pytest.mark.parametrize("old", [False, True])
def test_inference_perfs_per_request_report_replays_as_its_requests(tmp_path, old):
    bench = json.loads((CPU / "rate-8" / "bench.json").read_text())
    folder = tmp_path / "perf"
    folder.mkdir()
    (folder / "per_request_lifecycle_metrics.json").write_text(json.dumps(inference_perf_requests(bench, old)))
    (folder / "summary_lifecycle_metrics.json").write_text("{}")  # beside it, as inference-perf writes them
    for name in ("meta.json", "config.json"):
        (folder / name).write_text((CPU / "rate-8" / name).read_text())
    run_ = load_runs(folder)[0]
    ref = read_server_log(CPU / "rate-8" / "bench.json", measured=True)
    assert run_.log.format == "inference-perf" and run_.boundary == "client"
    np.testing.assert_allclose(run_.log.arrivals, ref.arrivals, atol=1e-6)
    np.testing.assert_allclose(run_.log.ttft, ref.ttft, atol=1e-6)
    np.testing.assert_allclose(run_.log.e2e, ref.e2e, atol=1e-6)
    np.testing.assert_array_equal(run_.log.prompt_lens, ref.prompt_lens)  # the server's counts where given
    kw = dict(gpu="l4", batch_time="linear", batch_time_params=cpu_params(CPU / "rate-8"))
    got, want = validate(run_, **kw), validate(load_runs(CPU / "rate-8", "bench.json")[0], **kw)
    for metric in ("ttft", "e2e"):
        assert got["errors"][metric]["p50"] == pytest.approx(want["errors"][metric]["p50"], abs=0.5)


def failed_stage(tmp_path, failures: int, timeout: float | None) -> Path:
    """The demo's stage 3 (112 req/s, near the server's ceiling) as if ``failures`` of its requests had failed,
    with ``timeout`` as its config.yaml's load.request_timeout (None: no config.yaml)."""
    folder = tmp_path / "failed"
    folder.mkdir()
    data = json.loads((PERF / "stage_3_lifecycle_metrics.json").read_text())
    data["failures"] = {"count": failures}
    data["load_summary"]["count"] += failures
    (folder / "stage_3_lifecycle_metrics.json").write_text(json.dumps(data))
    for name in ("meta.json", "config.json"):
        (folder / name).write_text((PERF / name).read_text())
    if timeout is not None:
        (folder / "config.yaml").write_text(f"load:\n  type: constant\n  request_timeout: {timeout}\n")
    return folder


def test_a_stage_with_failures_is_replayed_through_its_clients_timeout(tmp_path):
    """Every request sent is replayed, those its client's timeout ends are the replay's failures, and the rest's
    percentiles are compared with the report's successes."""
    stage = load_runs(failed_stage(tmp_path, 40, 1.5))[0]
    assert stage.log.failures == 40 and stage.log.count == 6715 + 40 and stage.log.timeout == 1.5
    assert any("40 of 6755 requests failed" in n and "load.request_timeout" in n for n in stage.log.notes)
    assert replay_config(stage, "h100").client_timeout == 1.5
    row = validate(stage, "h100")
    assert row["failures"]["real"] == 40 and row["failures"]["timeout_s"] == 1.5
    assert 0 < row["failures"]["simulated"] < 6755
    compared = 6755 - row["failures"]["simulated"]
    assert row["simulated"]["e2e"]["p99"] < 1.5 + 0.01  # the kept requests all answered within the timeout
    assert row["simulated"]["throughput"]["rps"] * row["simulated"]["throughput"]["span_s"] == pytest.approx(compared)


def test_a_stage_without_its_timeout_keeps_inference_perfs_default(tmp_path):
    stage = load_runs(failed_stage(tmp_path, 3, None))[0]
    assert stage.log.timeout == 300.0  # aiohttp's ClientTimeout(total=5 * 60), inference-perf's session default
    assert any("aiohttp's default" in n for n in stage.log.notes)
    assert validate(stage, "h100")["failures"] == {"real": 3, "simulated": 0, "timeout_s": 300.0}


@pytest.mark.parametrize("where", ["config.yaml", "meta.json"])
def test_a_timeout_that_is_not_seconds_is_refused_by_name(tmp_path, where):
    folder = failed_stage(tmp_path, 3, -1 if where == "config.yaml" else None)
    if where == "meta.json":
        meta = json.loads((folder / "meta.json").read_text())
        meta["client"]["request_timeout"] = "5m"
        (folder / "meta.json").write_text(json.dumps(meta))
    wanted = "load.request_timeout is -1" if where == "config.yaml" else "client.request_timeout is '5m'"
    with pytest.raises(ValueError, match=re.escape(wanted)):
        load_runs(folder)


def shared_prompt_run(tmp_path, multi_turn: bool = False, caching: bool = True) -> list:
    """The demo's first two stages as if vLLM had served them with its prefix cache on (vLLM's default), and the
    generator's settings from meta.json's client.data (multi-turn chat if asked)."""
    folder = tmp_path / f"perf-{multi_turn}-{caching}"
    folder.mkdir()
    for i in (0, 1):
        name = f"stage_{i}_lifecycle_metrics.json"
        (folder / name).write_text((PERF / name).read_text())
    meta = json.loads((PERF / "meta.json").read_text())
    meta["engine_kwargs"]["enable_prefix_caching"] = caching
    meta["client"]["data"]["enable_multi_turn_chat"] = multi_turn
    if multi_turn:  # the conversations outgrow the demo's 512 tokens; vLLM refuses a budget below the context
        meta["engine_kwargs"]["max_model_len"] = 16384  # length without chunked prefill, so it chunks here
        meta["engine_kwargs"]["enable_chunked_prefill"] = True
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "config.json").write_text((PERF / "config.json").read_text())
    return load_runs(folder)


def test_a_stage_of_shared_prompts_is_replayed_after_the_stages_before_it(tmp_path):
    runs = shared_prompt_run(tmp_path)
    first, second = runs
    assert second.log.before == [(first.log.rate, first.log.count, first.log.drain)]
    cfg = replay_config(second, "h100")
    assert cfg.workload == "shared-prefix" and cfg.arrival == "inference-perf"
    assert cfg.num_requests == first.log.count + second.log.count
    row = validate(second, "h100")
    result = run(cfg)
    assert int(kept(second, result).sum()) == second.log.count  # its own requests, not the first stage's
    assert row["simulated"]["throughput"]["rps"] == pytest.approx(37.97, rel=0.05)
    # the prompts share their groups' system prompts: the cache holds most of every prompt after the first pass
    cached = result.requests.column("cached_tokens")[kept(second, result)]
    assert cached.mean() >= 100
    cache = row["prefix_cache"]  # reported beside the latencies, over the stage's own requests
    assert cache["simulated"]["hit_rate"] == pytest.approx(cached.sum() / (192 * len(cached)), rel=1e-9)
    # without a prefix cache (as the demo really ran) the stage is drawn alone from its report's quantiles
    plain = shared_prompt_run(tmp_path, caching=False)[1]
    assert replay_config(plain, "h100").workload != "shared-prefix"


def test_multi_turn_conversations_carry_over_from_stage_to_stage(tmp_path):
    first, second = shared_prompt_run(tmp_path, multi_turn=True)
    result = run(replay_config(second, "h100"))
    assert (result.requests.column("status") == 3).all()  # every round finished
    k = kept(second, result)
    prompts = result.requests.column("prompt_len")
    assert prompts[k].mean() > 3 * prompts[~k].mean()  # later rounds carry the conversation so far
    assert validate(second, "h100")["requests"] == second.log.count


@pytest.mark.parametrize("kind", ["shared_prefix", "sharedPrefix"])
def test_the_generator_is_read_from_inference_perfs_own_config(tmp_path, kind):
    from llmsched.validate.perf_stages import config_load_type, stage_data
    (tmp_path / "config.yaml").write_text(f"data:\n  type: {kind}\n  shared_prefix:\n    num_groups: 4\n"
                                          f"    num_prompts_per_group: 8\n    system_prompt_len: 300\n")
    assert stage_data(tmp_path, {}) == ({"num_groups": 4, "num_prompts_per_group": 8, "system_prompt_len": 300}, "")
    assert stage_data(tmp_path, {"data": {"type": "random"}}) == stage_data(tmp_path, {})  # (not shared: config.yaml)
    assert config_load_type(tmp_path) is None
    (tmp_path / "config.yaml").write_text("data:\n  type: random\nload:\n  type: poisson\n")
    assert stage_data(tmp_path, {}) == (None, "") and config_load_type(tmp_path) == "poisson"
    # settings the generator does not take: drawn lengths, and a note saying why
    settings, note = stage_data(tmp_path, {"data": {"type": "shared_prefix", "question_distribution": {"mean": 5}}})
    assert settings is None and "question_distribution" in note

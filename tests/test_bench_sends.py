"""vllm bench serve results saved before vLLM recorded start_times (vllm-project/vllm#32667, January 2026): the sends
drawn as the benchmark draws them, or a --max-concurrency run replayed as the closed loop its client ran; and any
trace replayed in order as a closed loop (--trace with --concurrency)."""
import csv
import json
from pathlib import Path

import numpy as np
import pytest

from llmsched.cli import main
from llmsched.validate.serving import replay_config, validate
from llmsched.validate.serving_run import load_run
from llmsched.workload.traces.bench_sends import drawn_sends, request_rates
from llmsched.workload.traces.server_log import read_server_log

from cli_support import one_line_error

RUN = Path(__file__).parent / "data" / "gpu_runs" / "h200-llama-3.1-8b-serve-sharegpt-8"


def old_bench(tmp_path: Path, **settings) -> Path:
    """The H200 capture's bench result as a vLLM before #32667 saved it: no start_times (``settings`` change the
    client's fields)."""
    data = json.loads((RUN / "bench.json").read_text())
    data.pop("start_times")
    data["model_id"] = "meta-llama/Llama-3.1-8B-Instruct"
    data.update(settings)
    folder = tmp_path / "old-bench"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(data))
    return folder


def in_flight(requests_csv: Path) -> int:
    """The most requests between their send and their client's last byte at once."""
    events = []
    with open(requests_csv) as f:
        for r in csv.DictReader(f):
            events += [(float(r["arrival"]), 1), (float(r["arrival"]) + float(r["e2e"]) - 1e-9, -1)]
    now = most = 0
    for _, step in sorted(events):
        now += step
        most = max(most, now)
    return most


def test_drawn_sends_follow_vllm_bench_serves_process():
    sends = drawn_sends(20_000, 8.0)
    gaps = np.diff(sends)
    assert sends[0] == 0 and (gaps >= 0).all()
    assert sends[-1] == pytest.approx(20_000 / 8.0, rel=1e-3)  # vLLM rescales the sum to n / rate
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.03)  # burstiness 1: exponential gaps
    assert np.diff(drawn_sends(2_000, 8.0, burstiness=4.0)).std() * 8.0 == pytest.approx(0.5, abs=0.05)
    assert np.allclose(np.diff(drawn_sends(50, 4.0, burstiness=float("inf"))), 0.25)
    assert not drawn_sends(30, float("inf")).any()
    assert (drawn_sends(100, 8.0) == drawn_sends(100, 8.0)).all()  # seeded
    ramp = ("linear", 2.0, 20.0)
    gaps, wanted = np.diff(drawn_sends(40_000, float("inf"), ramp=ramp)), 1 / request_rates(40_000, 0.0, ramp)[1:]
    assert wanted[0] == pytest.approx(1 / 2.0, rel=1e-3) and wanted[-1] == pytest.approx(1 / 20.0)
    for part in (slice(0, 4_000), slice(-4_000, None)):  # slow at the start, fast at the end
        assert gaps[part].mean() == pytest.approx(wanted[part].mean(), rel=0.06)


def test_an_old_bench_result_is_replayed_from_drawn_sends(tmp_path):
    log = read_server_log(old_bench(tmp_path) / "result.json", measured=True)
    assert log.in_flight is None and log.span == pytest.approx(22.6086, abs=1e-3)
    assert log.arrivals[0] == 0 and log.arrivals[-1] == pytest.approx(150 / 8.0, rel=0.05)
    assert any("no start_times" in n and "8 req/s" in n for n in log.notes)
    assert not any("recorded send times" in n for n in log.notes)
    row = validate(load_run(log.path.parent), gpu="h200")
    # the same run with its recorded sends is within 1-10 points on these (a draw of the same process)
    assert abs(row["errors"]["e2e"]["p50"]) < 10 and abs(row["errors"]["tpot"]["p50"]) < 10
    assert row["real"]["throughput"]["span_s"] == pytest.approx(22.6086, abs=1e-3)


def test_a_capped_old_bench_result_is_replayed_as_its_closed_loop(tmp_path):
    folder = old_bench(tmp_path, max_concurrency=6, request_rate="inf")
    log = read_server_log(folder / "result.json", measured=True)
    assert log.in_flight == 6 and any("6 in flight" in n for n in log.notes)
    assert not any("warning" in n for n in log.notes)  # replayed as it ran: nothing to warn of
    cfg = replay_config(load_run(folder), gpu="h200")
    out = tmp_path / "out"
    assert main(["simulate", "--trace", str(folder / "result.json"), "--model", cfg.model, "--gpu", "h200",
                 "--out", str(out), "--no-progress", "--scheduler", "vllm-chunked"]) == 0
    assert in_flight(out / "requests.csv") == 6
    # a cap with a rate: the drawn open loop, with the closed-loop warning
    log = read_server_log(old_bench(tmp_path / "b", max_concurrency=6).joinpath("result.json"))
    assert log.in_flight is None and any("warning" in n and "max_concurrency 6" in n for n in log.notes)


def test_a_trace_replays_in_order_as_a_closed_loop(tmp_path):
    bench = old_bench(tmp_path) / "result.json"
    out = tmp_path / "out"
    assert main(["simulate", "--trace", str(bench), "--concurrency", "3", "--num-requests", "40", "--out", str(out),
                 "--no-progress", "--scheduler", "vllm-chunked"]) == 0
    with open(out / "requests.csv") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: int(r["id"]))
    data = json.loads(bench.read_text())
    assert [int(r["prompt_len"]) for r in rows] == data["input_lens"][:40]
    assert [int(r["output_len"]) for r in rows] == data["output_lens"][:40]
    assert in_flight(out / "requests.csv") == 3


@pytest.mark.parametrize("settings, args, wanted", [
    ({"request_rate": None}, [], "no start_times (vLLM's result has them since vllm-project/vllm#32667"),
    ({"ramp_up_strategy": "steps", "ramp_up_start_rps": 1, "ramp_up_end_rps": 4}, [], "ramp_up_strategy is 'steps'"),
    ({"ramp_up_strategy": "linear", "ramp_up_start_rps": 0, "ramp_up_end_rps": 4}, [], "ramp_up_start_rps is 0"),
    ({"max_concurrency": 4, "request_rate": "inf"}, ["--rate", "3"], "(a closed loop), so it is replayed as one"),
])
def test_what_an_old_bench_result_cannot_say_is_a_one_line_error(tmp_path, capsys, settings, args, wanted):
    bench = old_bench(tmp_path, **settings) / "result.json"
    err = one_line_error(["simulate", "--trace", str(bench), "--out", str(tmp_path / "o")] + args, capsys)
    assert wanted in err, err


def recorded_bench(tmp_path: Path, **settings) -> Path:
    data = json.loads((RUN / "bench.json").read_text())
    data.update(settings)
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    return path


def test_a_capped_bench_result_is_replayed_as_its_closed_loop_even_with_its_sends(tmp_path):
    path = recorded_bench(tmp_path, max_concurrency=5, request_rate="inf")
    log = read_server_log(path, measured=True)
    assert log.in_flight == 5 and any("5 in flight" in n and "not at the recorded sends" in n for n in log.notes)
    out = tmp_path / "out"
    assert main(["simulate", "--trace", str(path), "--out", str(out), "--no-progress", "--scheduler",
                 "vllm-chunked", "--num-requests", "30"]) == 0
    assert in_flight(out / "requests.csv") == 5
    # a cap on sends that followed a schedule: replayed at its sends, with the warning
    log = read_server_log(recorded_bench(tmp_path / "r", max_concurrency=5), measured=True)
    assert log.in_flight is None and any(n.startswith("max_concurrency 5 with sends on a schedule") and "warning" in n
                                         for n in log.notes)


def guidellm_with(strategy: dict) -> dict:
    data = json.loads((RUN / "bench.json").read_text())
    rows = [{"request_id": str(i), "request_start_time": 1.8e9 + s, "prompt_tokens": p, "output_tokens": o,
             "time_to_first_token_ms": t * 1e3, "request_latency": t + sum(itl)}
            for i, (s, p, o, t, itl) in enumerate(zip(data["start_times"], data["input_lens"], data["output_lens"],
                                                      data["ttfts"], data["itls"]))]
    return {"benchmarks": [{"requests": {"successful": rows, "incomplete": [], "errored": []},
                            "config": {"strategy": strategy}}]}


@pytest.mark.parametrize("strategy, cap", [
    ({"type_": "synchronous"}, 1),
    ({"type_": "concurrent", "streams": 8}, 8),
    ({"type_": "throughput", "max_concurrency": 16}, 16),
    ({"type_": "throughput"}, None),
    ({"type_": "poisson", "rate": 8.0}, None),
])
def test_guidellms_closed_loop_strategies_are_replayed_as_closed_loops(tmp_path, strategy, cap):
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps(guidellm_with(strategy)))
    log = read_server_log(path, measured=True)
    assert log.in_flight == cap
    if cap == 8:
        out = tmp_path / "out"
        assert main(["simulate", "--trace", str(path), "--out", str(out), "--no-progress", "--model", "llama-3.1-8b",
                     "--gpu", "h200", "--num-requests", "40"]) == 0
        assert in_flight(out / "requests.csv") == 8

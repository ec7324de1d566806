"""Rate schedules in runs: shared-prefix and tenants under a schedule, a trace tiled and bent in time, and the
offered-load timeline of summary.json and timeline.csv."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_source, run
from llmsched.metrics.summary import summarize
from llmsched.metrics.timeline import Timeline, window_sums, window_width
from llmsched.metrics.writers import write_run
from llmsched.workload.traces.readers import read_trace, resolve_data_file

CONV = "AzureLLMInferenceTrace_conv.csv"


def arrivals(source):
    return np.array([r.arrival for r in source.initial()])


def within(count, expected, sigmas=5.0):
    return abs(count - expected) <= sigmas * math.sqrt(expected) + 1


@pytest.mark.parametrize("multi_turn", [False, True])
def test_shared_prefix_runs_inference_perf_stages(multi_turn):
    params = {"enable_multi_turn_chat": True} if multi_turn else {}
    cfg = RunConfig(workload="shared-prefix", rate=None, rate_schedule="stages:2@60,10@60", workload_params=params,
                    seed=4)
    source = build_source(cfg)
    reqs = list(source.initial())
    times = np.array([r.arrival for r in reqs])
    assert all(r.content is not None for r in reqs)
    if not multi_turn:  # a multi-turn round may wait for its user's previous one: its time is not the schedule's
        assert times.max() < 120.0
    first, second = int(np.sum(times < 60)), int(np.sum(times >= 60))
    assert within(first, 120) and within(second + (len(source) - len(reqs)), 600)
    assert len(source) == first + second or multi_turn


def test_tenants_split_the_schedules_rate_by_their_rates():
    cfg = RunConfig(tenants="heavy:rate=3,light:rate=1", rate=None, rate_schedule="0:4,100:40", duration=200.0, seed=2)
    reqs = list(build_source(cfg).initial())
    times = np.array([r.arrival for r in reqs])
    assert within(int(np.sum(times < 100)), 400) and within(int(np.sum(times >= 100)), 4000)
    heavy = sum(r.tenant.name == "heavy" for r in reqs)
    assert abs(heavy / len(reqs) - 0.75) < 5 * math.sqrt(0.75 * 0.25 / len(reqs))
    assert [r.id for r in reqs] == list(range(len(reqs)))


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_a_trace_tiled_over_a_longer_run_repeats_its_rows_under_new_ids_and_shifted_times():
    trace = read_trace(resolve_data_file(CONV))
    n = len(trace)
    base = trace.arrivals - trace.arrivals[0]
    period = float(base[-1]) * n / (n - 1)
    source = build_source(RunConfig(trace=CONV, rate=None, duration=2.5 * period))
    reqs = list(source.initial())
    assert len(reqs) == len(source) and abs(len(reqs) - 2.5 * n) < 200
    assert [r.id for r in reqs] == list(range(len(reqs)))
    times = np.array([r.arrival for r in reqs])
    assert np.all(np.diff(times) >= 0) and times[-1] < 2.5 * period
    for k in (1, 2):
        rows = slice(k * n, min((k + 1) * n, len(reqs)))
        m = rows.stop - rows.start
        assert np.allclose(times[rows], base[:m] + k * period)
        assert [r.prompt_len for r in reqs[rows]] == trace.prompt_lens[:m].tolist()
        assert [r.output_len for r in reqs[rows]] == trace.output_lens[:m].tolist()
    gap = times[n] - times[n - 1]
    assert math.isclose(gap, period - float(base[-1]))  # one mean gap across the tile boundary


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_a_time_scale_compresses_the_trace():
    base = arrivals(build_source(RunConfig(trace=CONV, rate=None, num_requests=500)))
    fast = arrivals(build_source(RunConfig(trace=CONV, rate=None, time_scale=0.25, num_requests=500)))
    assert np.allclose(fast, base * 0.25)


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_a_schedule_bends_a_traces_time_to_its_rate():
    """Each copy of the trace takes as many expected arrivals of the schedule as it has requests: the count up to
    any time follows the schedule's integral, less the trace's own wander, which a copy's end brings back."""
    cfg = RunConfig(trace=CONV, rate=None, rate_schedule="diurnal:peak=12,trough=3,period=7200", duration=7200.0)
    shape = cfg.rate_schedule.value.shape
    times = arrivals(build_source(cfg))
    trace = read_trace(resolve_data_file(CONV))
    n = len(trace)
    base = trace.arrivals - trace.arrivals[0]
    wander = float(np.max(np.abs(base * (n - 1) / base[-1] - np.arange(n))))  # the trace against a uniform pace
    assert abs(len(times) - float(shape.cumulative(7200.0))) <= wander + 1
    end_of_copy = times[n - 1]
    assert float(shape.cumulative(end_of_copy)) == pytest.approx(n - 1, abs=1.5)
    edges = np.linspace(0, 7200.0, 13)
    got = np.histogram(times, edges)[0]
    assert np.corrcoef(got, np.diff(shape.cumulative(edges)))[0, 1] > 0.9  # the diurnal swing shows


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_a_schedule_that_ends_before_the_trace_is_refused():
    cfg = RunConfig(trace=CONV, rate=None, rate_schedule="stages:5@600")
    with pytest.raises(ValueError, match="never reaches the trace's end: it offers 3000 expected arrivals"):
        build_source(cfg)
    assert len(build_source(cfg.with_values(num_requests=2000))) == 2000


def test_window_sums_and_widths():
    assert window_sums([0.0, 0.5, 1.0, 2.9, np.nan], 1.0).tolist() == [2.0, 1.0, 1.0]
    assert window_sums([0.5, 2.5], 1.0, weights=[3, 4], windows=5).tolist() == [3.0, 0.0, 4.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="before t = 0"):
        window_sums([-1.0], 1.0)
    assert window_width(120) == 1.0 and window_width(86400) == 300.0 and window_width(1e7) == 3600.0
    t = Timeline(10.0)
    t.add("x", [1.0, 25.0])
    t.add("x", [31.0])
    assert t.rows({"x": ("x", False), "rate": ("x", True)}, end=50.0) == [
        {"start": 0.0, "end": 10.0, "x": 1, "rate": 0.1}, {"start": 10.0, "end": 20.0, "x": 0, "rate": 0.0},
        {"start": 20.0, "end": 30.0, "x": 1, "rate": 0.1}, {"start": 30.0, "end": 40.0, "x": 1, "rate": 0.1},
        {"start": 40.0, "end": 50.0, "x": 0, "rate": 0.0}]


def test_a_scheduled_run_reports_its_offered_load_per_window(tmp_path):
    cfg = RunConfig(workload="azure-conv", rate=None, rate_schedule="0:2;burst:at=20,x=5,for=10", duration=60.0,
                    replicas=2, seed=1, latency_boundary="engine")  # a streamed run measures at the engine
    memory = run(cfg)
    summary = summarize(memory)
    timeline = summary["timeline"]
    # the windows of the arrivals' 60 s, and on until the last request left (what was served after)
    assert timeline["window"] == 1.0 and len(timeline["rows"]) >= 60
    assert sum(row["arrivals"] for row in timeline["rows"]) == len(memory.requests)
    assert not any(row["arrivals"] for row in timeline["rows"][60:])
    assert sum(row["finished"] for row in timeline["rows"]) == summary["counts"]["finished"]
    assert [row["scheduled_rate"] for row in timeline["rows"][18:32]] == [2.0] * 2 + [10.0] * 10 + [2.0] * 2
    burst = sum(row["arrivals"] for row in timeline["rows"][20:30])
    assert within(burst, 100)
    write_run(memory, summary, tmp_path / "memory")
    with open(tmp_path / "memory" / "timeline.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:5] == ["start", "end", "arrivals", "offered_rate", "scheduled_rate"]
    assert len(rows) == len(timeline["rows"])
    streamed = run(cfg.with_values(keep_gaps=False), stream=True, out=tmp_path / "stream")
    # the same windows; counts exact, the mean queue's float sums chunk by chunk (their last bits may differ)
    assert summarize(streamed)["timeline"]["rows"] == [pytest.approx(row, nan_ok=True) for row in timeline["rows"]]


def test_a_run_without_a_schedule_keeps_its_summary():
    result = run(RunConfig(workload="azure-conv", rate=4.0, num_requests=50))
    assert "timeline" not in summarize(result)
    windowed = run(RunConfig(workload="azure-conv", rate=4.0, num_requests=50, timeline_window=5.0))
    rows = summarize(windowed)["timeline"]["rows"]
    assert sum(r["arrivals"] for r in rows) == 50 and "scheduled_rate" not in rows[0]


def doc_commands() -> list[list[str]]:
    """The ``llmsched simulate`` commands of docs/workloads.md's "Time-varying traffic", as argument lists."""
    import re
    import shlex
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[1] / "docs" / "workloads.md").read_text()
    section = doc.split("## Time-varying traffic", 1)[1].split("\n## ", 1)[0]
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", section, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith("llmsched simulate"):
                commands.append(shlex.split(line)[1:])
    return commands


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_the_docs_examples_build_their_workloads(tmp_path, monkeypatch):
    """Each command of the section parses and builds its requests (the runs themselves are the other tests')."""
    from llmsched.cli.commands import build_parser
    from llmsched.cli.run_options import run_configs
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config-shared-prefix.yml").write_text(  # the load of inference-perf's example config
        "load:\n  type: constant\n  interval: 15\n  stages:\n  - rate: 1\n    duration: 30\n"
        "  - rate: 2\n    duration: 30\n")
    commands = doc_commands()
    assert len(commands) >= 8
    for argv in commands:
        args = build_parser("simulate").parse_args(argv)
        cfg = run_configs(args, [args.scheduler or "sarathi"])[0]
        assert len(build_source(cfg)) > 0, argv


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_a_schedule_over_a_trace_of_prompts_keeps_their_contents_and_reports_its_timeline():
    """A trace naming its prompts (Mooncake) bent by stages: the prefix cache's log carries the timeline too."""
    cfg = RunConfig(trace="conversation_trace.jsonl", rate=None, num_requests=60, rate_schedule="stages:3@100",
                    model="llama-3.1-8b", gpu="h100", replicas=2)
    source = build_source(cfg)
    reqs = list(source.initial())
    assert all(r.content is not None for r in reqs) and max(r.arrival for r in reqs) < 100.0
    result = run(cfg)
    rows = summarize(result)["timeline"]["rows"]
    assert sum(r["arrivals"] for r in rows) == 60
    assert "cached_tokens" in result.requests.cols

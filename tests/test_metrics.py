import csv
import json
import math
from array import array

import numpy as np
import pytest
from conftest import make_requests, run_sim

from llmsched.metrics import (RequestLog, StepLog, format_table, summarize, summary_row, to_jsonable, write_run,
                              write_table)
from llmsched.report.run_figures import metric_value, plot_kv_usage, plot_latency_cdfs, plot_sweep
from llmsched.request import SLO, Request, Status, Tier
from llmsched.sim.simulator import RunResult

PAID = Tier("paid", SLO(ttft=0.5, tbt=0.1))
FREE = Tier("free", SLO(tbt=0.5))


def finished(rid, arrival, times, tier=PAID, prompt=10):
    r = Request(rid, arrival, prompt, len(times), tier)
    r.replica = 0
    r.first_scheduled = arrival
    r.token_times = array("d", times)
    r.num_generated = len(times)
    r.first_token = times[0]
    r.last_token = r.finish = times[-1]
    r.status = Status.FINISHED
    return r


def left(rid, arrival, reason, tier=FREE, status=Status.REJECTED, times=()):
    r = Request(rid, arrival, 10, 5, tier)
    r.token_times = array("d", times)
    r.num_generated = len(times)
    if times:
        r.first_token = times[0]
    r.status = status
    r.reject_reason = reason
    r.finish = arrival
    return r


def result_of(reqs, keep_gaps=True, steps=None):
    log = RequestLog(keep_gaps)
    for r in reqs:
        log.record(r)
    end = max([r.finish for r in reqs], default=0.0)
    return RunResult(log, steps or StepLog(), end, 0.0, {"scheduler": "hand"}, [{"replica": 0}])


@pytest.fixture
def hand():
    return result_of([
        finished(0, 0.0, [0.2, 0.25, 0.3, 0.35]),  # paid, meets everything
        finished(1, 1.0, [1.8, 1.9, 2.2]),  # paid: TTFT 0.8 > 0.5, one gap of two above 0.1
        finished(2, 2.0, [2.1, 2.2], FREE),  # free, meets
        left(3, 3.0, "prompt 9000 + output 5 tokens exceed max_model_len 4096"),  # free, rejected
    ])


def test_latencies_on_hand_built_requests(hand):
    s = summarize(hand)
    assert s["counts"] == {"offered": 4, "finished": 3, "rejected": 1, "unfinished": 0,
                           "reasons": [{"reason": "prompt N + output N tokens exceed max_model_len N", "count": 1,
                                        "example": "prompt 9000 + output 5 tokens exceed max_model_len 4096"}]}
    ttft = [0.2, 0.8, 0.1]
    assert s["latency"]["ttft"]["mean"] == pytest.approx(np.mean(ttft))
    assert s["latency"]["ttft"]["p50"] == pytest.approx(0.2)
    assert s["latency"]["ttft"]["p99"] == pytest.approx(np.percentile(ttft, 99))
    assert s["latency"]["ttft"]["max"] == pytest.approx(0.8)
    assert s["latency"]["e2e"]["mean"] == pytest.approx(np.mean([0.35, 1.2, 0.2]))
    assert s["latency"]["tpot"]["mean"] == pytest.approx(np.mean([0.15 / 3, 0.4 / 2, 0.1]))
    gaps = [0.05, 0.05, 0.05, 0.1, 0.3, 0.1]
    assert s["latency"]["tbt"]["count"] == 6 and s["latency"]["tbt"]["source"] == "gaps"
    assert s["latency"]["tbt"]["mean"] == pytest.approx(np.mean(gaps))
    assert s["latency"]["tbt"]["p90"] == pytest.approx(np.percentile(gaps, 90))
    assert s["latency"]["tbt"]["max"] == pytest.approx(0.3)


def test_goodput_counts_rejections_as_violations(hand):
    s = summarize(hand)
    assert s["window"]["span"] == pytest.approx(3.0)  # first arrival 0 to the rejection at 3
    assert s["throughput"]["requests_per_s"] == pytest.approx(1.0)
    assert s["throughput"]["output_tokens_per_s"] == pytest.approx(9 / 3)
    assert s["throughput"]["input_tokens_per_s"] == pytest.approx(30 / 3)
    assert s["goodput"]["good_requests"] == 2
    assert s["goodput"]["requests_per_s"] == pytest.approx(2 / 3)
    assert s["goodput"]["fraction"] == pytest.approx(0.5)


def test_tier_attainment_and_tbt_p99(hand):
    t = summarize(hand)["tiers"]
    paid, free = t["paid"], t["free"]
    assert paid["targets"] == {"ttft": 0.5, "tbt": 0.1, "tpot": None}
    assert paid["attainment"]["ttft"] == 0.5 and paid["attainment"]["tbt"] == 0.5
    assert math.isnan(paid["attainment"]["tpot"]) and paid["attainment"]["all"] == 0.5
    assert paid["tbt_p99"] == pytest.approx(np.percentile([0.05, 0.05, 0.05, 0.1, 0.3], 99))
    assert paid["tbt_p99_ok"] is False
    assert free["offered"] == 2 and free["finished"] == 1
    assert free["attainment"]["tbt"] == 0.5 and free["attainment"]["all"] == 0.5  # the rejection violates
    assert math.isnan(free["attainment"]["ttft"])
    assert free["tbt_p99"] == pytest.approx(0.1) and free["tbt_p99_ok"] is True


def test_tbt_target_tolerates_one_percent_of_gaps():
    def req(rid, misses):
        gaps = np.full(200, 0.05)
        gaps[:misses] = 0.2
        return finished(rid, 0.0, list(0.1 + np.r_[0, np.cumsum(gaps)]), Tier("t", SLO(tbt=0.1)))

    s = summarize(result_of([req(0, 2), req(1, 3)]))  # 2 of 200 gaps late = 1% -> met; 3 -> violated
    assert s["tiers"]["t"]["attainment"]["tbt"] == 0.5
    assert s["goodput"]["good_requests"] == 1


def test_warmup_and_cooldown_trim_by_arrival():
    reqs = [finished(i, float(i), [i + 0.1 * (i + 1), i + 0.1 * (i + 1) + 0.05]) for i in range(10)]
    s = summarize(result_of(reqs), warmup=2.5, cooldown=2.0)  # keeps arrivals 3..7
    assert s["counts"]["offered"] == 5 and s["window"]["requests_trimmed"] == 5
    assert s["latency"]["ttft"]["mean"] == pytest.approx(np.mean([0.4, 0.5, 0.6, 0.7, 0.8]))
    assert s["window"]["start"] == 3.0 and s["window"]["end"] == pytest.approx(7.85)
    assert s["throughput"]["requests_per_s"] == pytest.approx(5 / 4.85)
    with pytest.warns(UserWarning, match="trim every request"):  # after the run: written, not raised
        empty = summarize(result_of(reqs), warmup=6, cooldown=5)
    assert empty["window"]["available"] is False and "trim every request" in empty["window"]["reason"]
    assert empty["counts"]["offered"] == 0 and math.isnan(empty["latency"]["ttft"]["mean"])
    with pytest.raises(ValueError, match="warmup"):
        summarize(result_of(reqs), warmup=-1)


def test_no_finished_requests_gives_nans():
    s = summarize(result_of([left(0, 0.0, "no"), left(1, 1.0, "no", status=Status.UNFINISHED, times=[1.5, 1.6])]))
    assert s["counts"]["finished"] == 0 and s["counts"]["unfinished"] == 1
    for m in ("ttft", "tpot", "e2e"):
        assert math.isnan(s["latency"][m]["mean"]) and math.isnan(s["latency"][m]["p99"])
    assert s["latency"]["tbt"]["count"] == 1  # the unfinished request's gap is still a gap its user saw
    assert s["throughput"]["requests_per_s"] == 0 and s["goodput"]["requests_per_s"] == 0
    assert math.isnan(s["preemptions"]["per_finished_request"])
    empty = summarize(result_of([]))
    assert empty["counts"]["offered"] == 0 and math.isnan(empty["latency"]["ttft"]["mean"])
    assert math.isnan(empty["goodput"]["requests_per_s"]) and math.isnan(empty["steps"]["mean_duration"])
    json.dumps(to_jsonable(empty), allow_nan=False)


def lognormal_requests(n=1000, gaps_each=100, seed=1):
    rng = np.random.default_rng(seed)
    reqs = []
    for i in range(n):
        gaps = rng.lognormal(np.log(0.03), 0.6, gaps_each)
        reqs.append(finished(i, float(i), list(i + 0.2 + np.r_[0, np.cumsum(gaps)]), PAID if i % 4 else FREE))
    return reqs


def test_sketch_mode_quantiles_match_exact_ones():
    exact = summarize(result_of(lognormal_requests()))  # 100k lognormal gaps
    approx = summarize(result_of(lognormal_requests(), keep_gaps=False))
    a, e = approx["latency"]["tbt"], exact["latency"]["tbt"]
    assert a["source"] == "sketch" and a["count"] == e["count"] == 100_000
    for k in ("p50", "p90", "p99"):
        assert a[k] == pytest.approx(e[k], rel=0.02)
    assert a["mean"] == pytest.approx(e["mean"], rel=1e-9)
    assert a["max"] == pytest.approx(e["max"])
    for tier in ("paid", "free"):
        assert approx["tiers"][tier]["tbt_p99"] == pytest.approx(exact["tiers"][tier]["tbt_p99"], rel=0.02)
        assert approx["tiers"][tier]["attainment"] == exact["tiers"][tier]["attainment"]


@pytest.fixture(scope="module")
def real_runs():
    runs = {}
    for name in ("sarathi", "vllm"):
        reqs = make_requests(300, rate=4.0, seed=3, tier=PAID)
        runs[name] = run_sim(name, reqs)[0]
    return runs


def test_real_run_summary_is_consistent(real_runs):
    res = real_runs["sarathi"]
    s = summarize(res)
    status = res.requests.column("status")
    assert s["counts"]["offered"] == 300 == len(res.requests)
    assert s["counts"]["finished"] == int((status == Status.FINISHED).sum())
    assert s["steps"]["count"] == len(res.steps)
    assert 0 < s["steps"]["kv_util_mean"] <= s["steps"]["kv_util_max"] <= 1
    assert 0 < s["steps"]["busy_fraction"] <= 1
    ll = s["littles_law"]
    assert ll["mean_in_system"] == pytest.approx(ll["lambda_w"], rel=1e-9)  # no trimming: exact identity
    assert ll["mean_in_system_steps"] == pytest.approx(ll["lambda_w"], rel=0.1)
    assert s["preemptions"]["total"] == int(res.requests.column("preemptions").sum())
    json.dumps(to_jsonable(s), allow_nan=False)
    trimmed = summarize(res, warmup=10, cooldown=10)
    assert trimmed["counts"]["offered"] < 300
    assert trimmed["littles_law"]["mean_in_system"] == pytest.approx(trimmed["littles_law"]["lambda_w"], rel=0.25)


def test_write_run_files(real_runs, tmp_path):
    res = real_runs["vllm"]
    s = summarize(res)
    out = write_run(res, s, tmp_path / "run")
    summary = json.loads((out / "summary.json").read_text(),
                         parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert summary["counts"]["offered"] == 300
    json.loads((out / "meta.json").read_text())
    with open(out / "requests.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 300
    for col in ("id", "tier_name", "status_name", "reason", "arrival", "ttft", "tpot", "e2e", "prompt_len",
                "output_len", "preemptions", "tbt_misses"):
        assert col in rows[0]
    assert rows[0]["tier_name"] == "paid"
    assert float(rows[0]["ttft"]) == pytest.approx(res.requests.column("ttft")[0])
    with open(out / "steps.csv") as f:
        header = f.readline().strip().split(",")
    for col in ("duration", "prefill_tokens", "num_prefills", "num_decodes", "context_sum"):
        assert col in header
    data = np.genfromtxt(out / "steps.csv", delimiter=",", names=True)
    assert len(data) == len(res.steps)
    assert np.allclose(data["duration"], np.frombuffer(res.steps.duration))


def test_csv_rows_are_the_bytes_csv_writer_writes():
    """The fast writer formats each distinct number once and joins rows in bulk: the text must be csv's own."""
    import io

    from llmsched.metrics.writers import csv_line, csv_rows
    rng = np.random.default_rng(5)
    floats = np.r_[rng.exponential(size=50), [0.0, -0.0, math.nan, -math.nan, math.inf, -math.inf, 1e-05, 1e16,
                                              123456789.125, 5e-324, 0.1, 0.1]]
    ints = np.r_[rng.integers(-10**12, 10**12, size=50), [0, -1, 2**63 - 1, -2**63, 7, 7, 7, 7, 7, 7, 7, 7]]
    fixed = ["", "plain", "a,b", 'say "hi"', "two\nlines", "cr\rx", " lead", "x"] * 4
    texts = fixed + ["".join(rng.choice(list(',"\r\n\t é;\'\\x'), size=5)) for _ in range(len(ints) - len(fixed))]
    small = rng.integers(-3, 40, size=len(ints))  # a narrow span: formatted from a table of the span
    cols = [ints, floats, texts, floats[::-1].copy(), small]
    want = io.StringIO()
    w = csv.writer(want)
    w.writerow(["id", "a,b", "c"])
    w.writerows(zip(*(c.tolist() if isinstance(c, np.ndarray) else c for c in cols)))
    assert csv_line(["id", "a,b", "c"]) + csv_rows(cols) == want.getvalue()
    assert csv_rows([np.empty(0), []]) == ""


def test_tables(real_runs, tmp_path):
    rows = [summary_row(summarize(r), scheduler=k, rate=4.0) for k, r in real_runs.items()]
    rows.append({"scheduler": "none", "rate": 5.0, "ttft_p99": math.nan, "throughput_rps": None,
                 "tbt_p99_ms": 12.5})
    write_table(rows, tmp_path / "t.csv", tmp_path / "t.json")
    back = json.loads((tmp_path / "t.json").read_text())
    assert back[2]["ttft_p99"] is None and back[0]["scheduler"] == "sarathi"
    with open(tmp_path / "t.csv") as f:
        assert len(list(csv.DictReader(f))) == 3
    text = format_table(rows, ["scheduler", "rate", "ttft_p99", "tbt_p99", "throughput_rps", "attain_paid",
                               "tbt_p99_ms"])
    lines = text.splitlines()
    assert "ttft_p99 (ms)" in lines[0] and "tbt_p99 (ms)" in lines[0]
    for col in ("throughput_rps", "attain_paid", "tbt_p99_ms"):
        assert f"{col} (ms)" not in lines[0]
    assert len({len(line) for line in lines[:2]}) == 1 and len(lines) == 5
    assert f"{rows[0]['ttft_p99'] * 1000:.1f}" in lines[2]
    assert lines[4].split()[2] == "-" and lines[4].split()[-1] == "12.5"  # *_ms columns are already in ms


def _is_png(path):
    return path.stat().st_size > 5000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_write_pngs(real_runs, tmp_path):
    sketch = result_of(lognormal_requests(50, 20), keep_gaps=False)
    assert _is_png(plot_latency_cdfs(real_runs, tmp_path / "cdf.png"))
    assert _is_png(plot_latency_cdfs({"sketch": sketch}, tmp_path / "cdf2.png"))
    assert _is_png(plot_kv_usage(real_runs, tmp_path / "kv.png"))
    rows = [summary_row(summarize(r), scheduler=k, rate=rate) for k, r in real_runs.items() for rate in (2, 4)]
    assert _is_png(plot_sweep(rows, path=tmp_path / "sweep.png"))
    nested = [{"scheduler": k, "rate": 4, **summarize(r)} for k, r in real_runs.items()]
    assert _is_png(plot_sweep(nested, x="rate", metrics=["latency.ttft.p99", "goodput.requests_per_s"],
                              path=tmp_path / "s2.png"))


def test_sweep_rows_may_hold_latencies_in_ms():
    assert metric_value({"ttft_p99": 0.25}, "ttft_p99") == 250
    assert metric_value({"ttft_p99_ms": 250.0}, "ttft_p99") == 250
    assert metric_value({"latency": {"tbt": {"p99": 0.05}}}, "latency.tbt.p99") == pytest.approx(50)
    assert metric_value({"throughput_rps": 3.0}, "throughput_rps") == 3.0
    assert metric_value({}, "goodput_rps") is None

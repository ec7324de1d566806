"""Tenants in workloads and records: the --tenants spec, one seeded arrival stream per tenant merged in time order, a
trace's tenant column, the tenant column of requests.csv and the per-tenant summary with its fairness figures."""
import csv
import json
import math

import numpy as np
import pytest

from llmsched.cli import main
from llmsched.experiment import RunConfig, build_source, run
from llmsched.metrics.fairness import INPUT_WEIGHT, OUTPUT_WEIGHT, intersect, inside, jain, union
from llmsched.metrics.summary import summarize, summary_row
from llmsched.request import DEFAULT_TIER, Request, Tenant, Tier, priority_of
from llmsched.workload.tenants.streams import parse_tenants, tenant_seed
from llmsched.workload.tenants.tiers import parse_tiers


def test_spec_gives_each_tenant_its_rate_weight_workload_and_priority():
    heavy, light = parse_tenants("heavy:rate=8, light:rate=0.5:weight=2:workload=azure-conv:priority=-1")
    assert (heavy.name, heavy.rate, heavy.tenant.weight, heavy.workload, heavy.tenant.priority) == \
        ("heavy", 8.0, 1.0, None, None)
    assert (light.rate, light.tenant.weight, light.workload, light.tenant.priority) == (0.5, 2.0, "azure-conv", -1)


@pytest.mark.parametrize("spec, message", [
    ("a:rate=1,a:rate=2", "tenant 'a' appears twice"),
    ("a:rate=1:weight=0", "weight must be a positive"),
    ("a:rate=1:weight=-2", "weight must be a positive"),
    ("a:rate=1:priority=high", "priority='high' is not an integer"),
    ("a:rate=1:priority=1.5", "priority='1.5' is not an integer"),
    ("a:rate=x", "rate='x' is not a number"),
    ("a:speed=1", "'speed=1' is not key=value"),
    (":rate=1", "needs a name"),
    ("a:rate=1:rate=2", "rate is given twice"),
])
def test_bad_specs_are_refused_naming_the_tenant(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_tenants(spec)


def test_a_request_takes_its_tenants_priority_else_its_tiers_else_zero():
    high = Tier("high", priority=0)
    assert priority_of(DEFAULT_TIER, None) == 0
    assert priority_of(Tier("low", priority=3), None) == 3
    assert priority_of(Tier("low", priority=3), Tenant("t", priority=1)) == 1
    assert Request(0, 0.0, 5, 5, high, Tenant("t")).priority == 0
    assert [t.priority for t in parse_tiers("high:priority=0:share=0.1,low:priority=1")] == [0, 1]
    with pytest.raises(ValueError, match="priority must be an integer"):
        Tenant("t", priority=True)
    with pytest.raises(ValueError, match="weight must be a positive"):
        Tenant("t", weight=float("inf"))


def test_streams_merge_in_time_order_and_each_tenant_draws_the_same_requests_alone():
    both = list(build_source(RunConfig(tenants="heavy:rate=8,light:rate=0.5:workload=azure-conv",
                                       num_requests=300, seed=3)).initial())
    alone = list(build_source(RunConfig(tenants="light:rate=0.5:workload=azure-conv", num_requests=300,
                                        seed=3)).initial())
    assert [r.id for r in both] == list(range(300))
    times = [r.arrival for r in both]
    assert times == sorted(times)
    light = [(r.arrival, r.prompt_len, r.output_len) for r in both if r.tenant.name == "light"]
    assert 5 < len(light) < 60  # about 300 / 17 of them
    assert light == [(r.arrival, r.prompt_len, r.output_len) for r in alone][:len(light)]
    assert tenant_seed(3, "light") != tenant_seed(3, "heavy") and tenant_seed(3, "light") != tenant_seed(4, "light")


def test_duration_takes_every_tenants_arrivals_before_it():
    source = build_source(RunConfig(tenants="a:rate=2,b:rate=5", duration=40, seed=1))
    reqs = list(source.initial())
    assert len(source) == len(reqs)
    counts = {n: sum(r.tenant.name == n for r in reqs) for n in "ab"}
    assert 40 < counts["a"] < 130 and 130 < counts["b"] < 280
    assert max(r.arrival for r in reqs) < 40


def write_trace(path, tenants):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arrived_at", "num_prefill_tokens", "num_decode_tokens", "tenant"])
        for i, t in enumerate(tenants):
            w.writerow([0.25 * i, 50 + i, 10 + i, t])


def test_a_traces_tenant_column_names_each_requests_tenant(tmp_path):
    path = tmp_path / "t.csv"
    write_trace(path, ["a", "b", "a", "c"])
    reqs = list(build_source(RunConfig(trace=str(path), rate=None)).initial())
    assert [(r.tenant.name, r.tenant.weight, r.prompt_len) for r in reqs] == \
        [("a", 1.0, 50), ("b", 1.0, 51), ("a", 1.0, 52), ("c", 1.0, 53)]
    reqs = list(build_source(RunConfig(trace=str(path), rate=None,
                                       tenants="a:weight=3:priority=0,b,c:priority=2")).initial())
    assert [(r.tenant.weight, r.priority) for r in reqs] == [(3.0, 0), (1.0, 0), (3.0, 0), (1.0, 2)]
    with pytest.raises(ValueError, match=r"request 3 names tenant 'c', which --tenants does not give"):
        build_source(RunConfig(trace=str(path), rate=None, tenants="a,b"))
    with pytest.raises(ValueError, match="rate= does not apply with --trace"):
        RunConfig(trace=str(path), rate=None, tenants="a:rate=2")
    write_trace(path, ["a", " ", "a"])
    with pytest.raises(ValueError, match=r"t.csv:3: tenant is empty"):
        build_source(RunConfig(trace=str(path), rate=None))


def test_tenants_do_not_go_with_a_closed_loop_or_a_global_rate():
    with pytest.raises(ValueError, match="does not apply together with tenants"):
        RunConfig(tenants="a:rate=1", concurrency=4, num_requests=10)
    with pytest.raises(ValueError, match="needs rate=R"):
        RunConfig(tenants="a:rate=1,b:weight=2")
    with pytest.raises(ValueError, match="give priority= in one of them"):
        RunConfig(tenants="a:rate=1:priority=0", tiers="x:priority=1")


def test_jain_union_intersect_inside():
    assert jain([3, 3, 3]) == pytest.approx(1.0)
    assert jain([1, 0]) == pytest.approx(0.5)
    assert np.isnan(jain([])) and np.isnan(jain([0, 0]))
    u = union(np.array([0.0, 1.0, 5.0, 6.0, 9.0]), np.array([2.0, 3.0, 7.0, 6.5, 9.0]))
    assert u.tolist() == [[0.0, 3.0], [5.0, 7.0]]  # the empty [9, 9) is no period
    both = intersect(u, np.array([[2.5, 5.5], [6.0, 8.0]]))
    assert both.tolist() == [[2.5, 3.0], [5.0, 5.5], [6.0, 7.0]]
    assert inside(np.array([0.0, 2.9, 3.0, 4.0, 5.0, 6.99]), u).tolist() == [True, True, False, False, True, True]


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_records_and_summary_carry_each_tenants_service(tmp_path):
    out = tmp_path / "run"
    assert main(["simulate", "--scheduler", "vllm-chunked", "--tenants", "heavy:rate=8,med:rate=2:weight=2",
                 "--num-requests", "150", "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    table = rows(out / "requests.csv")
    assert {r["tenant"] for r in table} == {"heavy", "med"}
    for name, weight in (("heavy", 1.0), ("med", 2.0)):
        mine = [r for r in table if r["tenant"] == name]
        t = summary["tenants"][name]
        served = [r for r in mine if r["first_token"] != "nan"]
        assert t["offered"] == len(mine) and t["weight"] == weight
        assert t["input_tokens"] == sum(int(r["prompt_len"]) for r in served)
        assert t["output_tokens"] == sum(int(r["generated"]) for r in mine)
        assert t["service"] == INPUT_WEIGHT * t["input_tokens"] + OUTPUT_WEIGHT * t["output_tokens"]
        assert sum(summary["fairness"]["service_over_time"]["service"][name]) == pytest.approx(t["service"])
        ttfts = sorted(float(r["ttft"]) for r in mine if r["status_name"] == "FINISHED")
        assert t["latency"]["ttft"]["p50"] == pytest.approx(float(np.percentile(ttfts, 50)))
    weighted = [summary["tenants"][n]["service"] / w for n, w in (("heavy", 1), ("med", 2))]
    assert summary["fairness"]["jain"] == pytest.approx(jain(weighted))
    assert 0 < summary["fairness"]["all_backlogged_s"] <= summary["window"]["span"]
    during = summary["fairness"]["service_while_all_backlogged"]
    assert all(0 < during[n] <= summary["tenants"][n]["service"] for n in during)
    assert "jain" in summary_row(summary) and "ttft_p50_med" in summary_row(summary)


def test_a_run_without_tenants_has_no_tenant_column_or_section(tmp_path):
    out = tmp_path / "run"
    assert main(["simulate", "--scheduler", "sarathi", "--num-requests", "40", "--no-progress",
                 "--out", str(out)]) == 0
    assert "tenant" not in (out / "requests.csv").read_text().splitlines()[0].split(",")
    summary = json.loads((out / "summary.json").read_text())
    assert "tenants" not in summary and "fairness" not in summary and "policy" not in summary


def test_a_streamed_run_writes_the_same_tenant_column(tmp_path):
    base = ["simulate", "--scheduler", "vllm-chunked", "--tenants", "a:rate=3,b:rate=1", "--num-requests", "120",
            "--no-progress", "--sketch", "--latency-boundary", "engine"]
    assert main(base + ["--out", str(tmp_path / "mem")]) == 0
    assert main(base + ["--stream", "--out", str(tmp_path / "stream")]) == 0
    assert (tmp_path / "mem" / "requests.csv").read_text() == (tmp_path / "stream" / "requests.csv").read_text()


def test_summary_of_a_sketch_run_still_counts_service(tmp_path):
    cfg = RunConfig(scheduler="vllm-chunked", tenants="a:rate=3,b:rate=1", num_requests=80, keep_gaps=False)
    summary = summarize(run(cfg))
    t = summary["tenants"]["a"]
    assert t["service"] == t["input_tokens"] + 2 * t["output_tokens"]
    assert summary["fairness"]["service_over_time"]["exact_times"] is False


def test_a_tenant_spec_reads_back_to_the_same_streams_and_scales_as_one_mix():
    from llmsched.workload.tenants.streams import parse_tenants, scaled_tenants, tenant_spec, total_rate
    streams = parse_tenants("a:rate=0.3:weight=2.5:workload=azure-code:priority=-1,b:rate=1.7,c:rate=1e-3:priority=2")
    assert parse_tenants(tenant_spec(streams)) == streams
    scaled = parse_tenants(scaled_tenants(streams, 4.002))
    assert math.isclose(total_rate(scaled), 4.002)
    assert [s.rate / t.rate for s, t in zip(scaled, streams)] == pytest.approx([4.002 / 2.001] * 3)
    assert [(s.tenant, s.workload) for s in scaled] == [(s.tenant, s.workload) for s in streams]
    with pytest.raises(ValueError, match="tenant 'x' needs rate=R"):
        total_rate(parse_tenants("x:weight=2"))

"""An autoscaled run over time: summary.json's timeline (replicas per state, offered and served rate, the waiting
queue, latency quantiles and SLO attainment per window), its totals (GPU-hours, cost, requests that met their SLOs
per dollar), and the figure; each figure checked against the run's own records."""
from __future__ import annotations

import math

import numpy as np
import pytest

from llmsched.experiment import RunConfig, run
from llmsched.hardware.prices import load_prices
from llmsched.metrics.summary import summarize
from llmsched.metrics.timeline import Timeline, span_sums
from llmsched.request import Status

CFG = dict(workload="azure-conv", rate_schedule="0:4,150:40,450:6", duration=600.0, gpu="h100",
           autoscaler="predictive", max_replicas=6, cold_start=40.0, tiers="std:ttft=1:tpot=0.05",
           latency_boundary="engine", batch_time="roofline", timeline_window=10.0)


@pytest.fixture(scope="module")
def day():
    result = run(RunConfig(**CFG))
    return result, summarize(result)


def test_span_sums_integrate_the_intervals_per_window():
    rng = np.random.default_rng(3)
    a = rng.uniform(0, 50, 200)
    b = a + rng.exponential(7, 200)
    w = rng.integers(1, 4, 200).astype(float)
    sums = span_sums(a, b, 5.0, w)
    edges = np.arange(len(sums) + 1) * 5.0
    brute = [sum(wi * max(0.0, min(bi, hi) - max(ai, lo)) for ai, bi, wi in zip(a, b, w))
             for lo, hi in zip(edges, edges[1:])]
    assert sums == pytest.approx(brute)
    assert span_sums([1.0, np.nan, 3.0], [2.0, 4.0, 2.0], 1.0).tolist()[:2] == [0.0, 1.0]  # NaN, reversed: nothing


def test_quantiles_per_window_come_from_each_window_alone():
    t = Timeline(10.0)
    t.add_values("x", [1, 2, 3, 15, 16], [1.0, 2.0, 3.0, 100.0, 200.0])
    t.add_values("x", [25], [7.0])  # a later chunk
    med = t.quantile("x", 0.5)
    assert med[0] == pytest.approx(2.0, rel=0.02) and med[1] == pytest.approx(100.0, rel=0.02)
    assert med[2] == pytest.approx(7.0, rel=0.02)
    assert math.isnan(t.quantile("y", 0.5, end=10.0)[0])


def test_the_timeline_accounts_for_every_request_and_replica_second(day):
    result, summary = day
    rows = summary["timeline"]["rows"]
    log = result.requests
    status, arrival = log.column("status"), log.column("arrival")
    assert sum(r["arrivals"] for r in rows) == len(log)
    assert sum(r["finished"] for r in rows) == int((status == int(Status.FINISHED)).sum())
    width = summary["timeline"]["window"]
    pool = summary["fleet"]["pools"]["default"]
    serving = sum((r["replicas_serving"] + r["replicas_draining"]) * width for r in rows)
    assert serving == pytest.approx(pool["serving_replica_s"])
    billed = sum(r["billed_gpus"] * width for r in rows)
    assert billed == pytest.approx(pool["billed_gpu_s"])
    starting = sum((r["replicas_provisioning"] + r["replicas_loading"] + r["replicas_warm"]) * width for r in rows)
    assert starting == pytest.approx(pool["billed_replica_s"] - pool["serving_replica_s"])
    waited = np.where(np.isfinite(log.column("first_scheduled")), log.column("first_scheduled"),
                      log.column("finish")) - arrival
    assert sum(r["waiting"] * width for r in rows) == pytest.approx(float(np.nansum(waited)))


def test_latency_and_attainment_per_window_are_those_of_the_window_s_arrivals(day):
    result, summary = day
    rows = summary["timeline"]["rows"]
    log = result.requests
    arrival, ttft = log.column("arrival"), log.column("ttft")
    finished = log.column("status") == int(Status.FINISHED)
    k = 20  # 200-210 s: in the step, the pool sized ahead of it
    sel = finished & (arrival >= 200) & (arrival < 210)
    assert rows[k]["ttft_p90"] == pytest.approx(float(np.percentile(ttft[sel], 90)), rel=0.03)
    met = sel & (ttft <= 1.0) & ~(log.column("tpot") > 0.05)
    assert rows[k]["slo_attainment"] == pytest.approx(met.sum() / ((arrival >= 200) & (arrival < 210)).sum())
    assert rows[k]["replicas_serving"] >= 3  # predictive had them serving before 150 s


def test_the_totals_price_the_billed_gpu_hours(day):
    _, summary = day
    cost = summary["fleet"]["cost"]
    assert cost["gpu_hours"] == pytest.approx(summary["fleet"]["billed_gpu_s"] / 3600)
    assert cost["usd"] == pytest.approx(cost["gpu_hours"] * load_prices().price("h100"))
    assert cost["slo_attainment"] == summary["goodput"]["fraction"] > 0.9
    assert cost["good_per_usd"] == pytest.approx(summary["goodput"]["good_requests"] / cost["usd"])


def test_the_figure_draws_from_the_summary(day, tmp_path, monkeypatch):
    from llmsched.report.timeline_figure import plot_timeline
    monkeypatch.setenv("LLMSCHED_CHECK_FIGURES", "1")  # an unreadable figure is an error
    plot_timeline(day[1]["timeline"], tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").stat().st_size > 10_000

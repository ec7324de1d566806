"""plan-day: the fixed fleet's search, the oracle's and the bound's arithmetic, and a small day planned end to end
(the lower bound under the oracle under the fixed fleet; the cheapest setting meets the target)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from llmsched.cli import main
from llmsched.executors import make_executor
from llmsched.experiment import RunConfig
from llmsched.hardware.prices import load_prices
from llmsched.plan.candidates import Candidate
from llmsched.plan.day import ORACLE_WINDOW, arrivals_per_window, burst_attainment, day_configs, fixed_search, plan_day

DAY = dict(workload="azure-conv", rate_schedule="diurnal:peak=24,trough=6,period=900;burst:at=420,x=2,for=120",
           duration=900.0, tiers="std:ttft=2:tpot=0.1", latency_boundary="engine", batch_time="roofline")


def drive(search, meets):
    asked, r = [], next(search)
    try:
        while True:
            asked.append(r)
            r = search.send(meets(r))
    except StopIteration as stop:
        return stop.value, asked


def test_the_fixed_search_finds_the_fewest_that_meet():
    assert drive(fixed_search(5, 32), lambda r: r >= 4) == (4, [5, 4, 3])
    assert drive(fixed_search(2, 32), lambda r: r >= 7) == (7, [2, 3, 4, 5, 7, 6])
    assert drive(fixed_search(3, 4), lambda r: r >= 9) == (None, [3, 4])
    assert drive(fixed_search(1, 8), lambda r: True) == (1, [1])


@pytest.fixture(scope="module")
def planned():
    base = RunConfig(scheduler="vllm-chunked", **DAY)
    cand = Candidate("h100", 1, "vllm-chunked")
    with make_executor("local", jobs=1) as ex:
        plans = plan_day([cand], {"vllm-chunked": base}, 0.95, ["predictive", "kpa"], load_prices().price, 12, ex,
                         cold_starts=(30.0,))
    return base, cand, plans[0]


def test_a_small_day_is_planned(planned):
    base, cand, p = planned
    fixed, auto = p.best_fixed, p.best_autoscaled
    assert fixed is not None and auto is not None
    assert all(d.meets == (d.record["attainment"] >= 0.95) for d in p.fixed + p.autoscaled)
    below = [d for d in p.fixed if d.setting["replicas"] == fixed.setting["replicas"] - 1]
    assert fixed.setting["replicas"] == 1 or (below and not below[0].meets)  # the fewest that met
    assert auto.usd <= fixed.usd
    assert all(d.setting["max_replicas"] == fixed.setting["replicas"] for d in p.autoscaled)
    assert p.bound_gpu_hours < p.oracle_gpu_hours < fixed.gpu_hours
    assert fixed.gpu_hours == pytest.approx(fixed.setting["replicas"] * fixed.record["end_s"] / 3600)
    assert fixed.usd == pytest.approx(fixed.gpu_hours * load_prices().price("h100"))
    assert {d.setting["cold_start"] for d in p.cold_starts} == {30.0}


def test_the_oracle_covers_each_minute_at_the_capacity(planned):
    base, cand, p = planned
    windows = arrivals_per_window(day_configs(base, cand))
    need = np.maximum(np.ceil(windows / ORACLE_WINDOW / p.capacity_rps - 1e-9), 1)
    assert p.oracle_gpu_hours == pytest.approx(need.sum() * ORACLE_WINDOW / 3600)
    assert p.peak_rps == pytest.approx(windows.max() / ORACLE_WINDOW)


def test_burst_attainment_reads_the_burst_s_windows(planned):
    base, _, p = planned
    record = {"timeline": [{"start": 360.0, "end": 420.0, "arrivals": 10, "slo_attainment": 1.0},
                           {"start": 420.0, "end": 480.0, "arrivals": 30, "slo_attainment": 0.5},
                           {"start": 480.0, "end": 540.0, "arrivals": 10, "slo_attainment": 0.0}]}
    assert burst_attainment(record, base) == pytest.approx((15 + 0) / 40)
    assert math.isnan(burst_attainment(record, base.with_values(rate_schedule="0:2")))


@pytest.mark.parametrize("args, message", [
    ("--attainment 1.5", "--attainment 1.5: give a fraction in (0, 1]"),
    ("--attainment 0.9 --autoscalers hpa,knative", "--autoscalers: unknown autoscaler 'knative'"),
    ("--attainment 0.9 --cold-starts 30,x", "--cold-starts '30,x'"),
])
def test_plan_day_refuses_bad_input_in_one_line(args, message, capsys):
    code = main(["plan-day", *args.split(), "--workload", "azure-conv", "--rate-schedule", "0:2", "--duration", "60",
                 "--tiers", "std:ttft=2", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_plan_day_needs_tiers_and_a_day(capsys):
    assert main(["plan-day", "--attainment", "0.9", "--workload", "azure-conv", "--rate-schedule", "0:2",
                 "--duration", "60", "--no-progress"]) == 2
    assert "give --tiers" in capsys.readouterr().err
    assert main(["plan-day", "--attainment", "0.9", "--workload", "azure-conv", "--num-requests", "60",
                 "--tiers", "std:ttft=2", "--no-progress"]) == 2
    assert "give --rate-schedule" in capsys.readouterr().err


def test_plan_day_draws_the_cheapest_days_timelines(planned, tmp_path):
    from llmsched.cli.plan_day import draw_days
    _, _, p = planned
    drawn = draw_days([p], tmp_path / "plots", 0.95)
    names = sorted(path.name for path in drawn)
    assert names == sorted(["h100_tp1_vllm-chunked_round-robin_fixed.png",
                            "h100_tp1_vllm-chunked_round-robin_autoscaled.png",
                            *(f"h100_tp1_vllm-chunked_round-robin_{d.setting['policy']}_cold30s.png"
                              for d in p.cold_starts)])
    assert all(path.stat().st_size > 10_000 for path in drawn)


def test_each_days_json_carries_its_bursts_attainment(planned):
    """plan-day --json writes every day with its burst attainment (the timelines it reads are left out), the figure
    the printed table shows beside each plan."""
    from llmsched.cli.plan_day import day_json
    base, _, p = planned
    record = day_json(p, base)
    for key, days in (("fixed", p.fixed), ("autoscaled", p.autoscaled), ("cold_starts", p.cold_starts)):
        assert [d["burst_attainment"] for d in record[key]] == [burst_attainment(d.record, base) for d in days]
        assert all("timeline" not in d and 0.0 <= d["burst_attainment"] <= 1.0 for d in record[key])

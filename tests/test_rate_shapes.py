"""Time-varying arrival rates: the counts a schedule draws follow its integral, its variants (gamma, constant) keep
their meaning, drawing in chunks changes nothing, and a day is drawn without holding it."""
from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from llmsched.workload.arrivals.processes import Piecewise
from llmsched.workload.arrivals.modulated import Modulated, scheduled_arrivals
from llmsched.workload.arrivals.rate_schedule import STAGE_LEAD, parse_rate_schedule
from llmsched.workload.arrivals.rate_shape import RateShape, Sinusoid

DIURNAL = "diurnal:peak=40,trough=10,period=600,peak_at=150;burst:at=400,x=3,for=60"


def counts(times, edges):
    return np.histogram(times, bins=edges)[0]


def chi_square_bound(expected):
    """Counts of a Poisson process in disjoint windows are independent Poisson: sum (N - mu)^2 / mu has mean W and
    variance 2W + sum(1/mu); five standard deviations above the mean is the bound."""
    w = len(expected)
    return w + 5 * math.sqrt(2 * w + float(np.sum(1 / expected)))


@pytest.mark.parametrize("text, duration", [
    (DIURNAL, 1200.0),
    ("0:5,200:30,500:0,600:12;burst:at=650,x=4,for=50", 900.0),
    ("stages:8@100,2@100,20@100", 300.0),
    ("diurnal:peak=20,trough=0,period=300", 900.0),
])
def test_counts_per_window_match_the_schedules_integral(text, duration):
    shape = parse_rate_schedule(text).shape
    times = scheduled_arrivals(shape).until(duration, np.random.default_rng(7))
    edges = np.linspace(0, duration, 61)
    expected = np.diff(shape.cumulative(edges))
    got = counts(times, edges)
    live = expected > 0
    assert np.all(got[~live] == 0)  # nothing where the rate is 0
    statistic = float(np.sum((got[live] - expected[live]) ** 2 / expected[live]))
    assert statistic < chi_square_bound(expected[live]), (statistic, len(expected))
    total = float(shape.cumulative(duration))
    assert abs(len(times) - total) < 5 * math.sqrt(total)


def test_a_missing_burst_would_fail_the_count_test():
    """The bound is tight enough to see a burst that is not drawn."""
    with_burst = parse_rate_schedule(DIURNAL).shape
    without = parse_rate_schedule(DIURNAL.split(";")[0]).shape
    times = scheduled_arrivals(without).until(1200.0, np.random.default_rng(7))
    edges = np.linspace(0, 1200.0, 61)
    expected = np.diff(with_burst.cumulative(edges))
    statistic = float(np.sum((counts(times, edges) - expected) ** 2 / expected))
    assert statistic > chi_square_bound(expected)


def test_the_inverse_undoes_the_cumulative_rate():
    for text in (DIURNAL, "diurnal:peak=5,trough=0,period=97,peak_at=3;burst:at=10,x=0,for=20", "0:2,10:0,30:7"):
        shape = parse_rate_schedule(text).shape
        u = np.sort(np.random.default_rng(1).uniform(0, min(shape.total, 5e4), 20_000))
        t = shape.inverse(u)
        assert np.all(np.diff(t) >= 0)
        assert np.max(np.abs(shape.cumulative(t) - u)) < 1e-6


def test_a_steps_schedule_is_the_piecewise_process_it_always_was():
    shape = parse_rate_schedule("0:2,300:4,600:0,700:1").shape
    process = scheduled_arrivals(shape)
    assert type(process) is Piecewise
    direct = Piecewise([(0, 2), (300, 4), (600, 0), (700, 1)])
    assert np.array_equal(process.times(500, np.random.default_rng(3)), direct.times(500, np.random.default_rng(3)))
    assert np.array_equal(process.until(900.0, np.random.default_rng(3)), direct.until(900.0, np.random.default_rng(3)))


@pytest.mark.parametrize("unit, cv", [("poisson", None), ("gamma", 2.5), ("constant", None)])
def test_chunks_give_the_same_times_as_one_draw(unit, cv):
    process = Modulated(parse_rate_schedule(DIURNAL).shape, unit, cv)
    for n, sizes in ((100, (1, 3)), (3000, (7, 4096))):
        whole = process.times(n, np.random.default_rng(5))
        assert np.all(np.diff(whole) >= 0)
        for size in sizes:
            assert np.array_equal(np.concatenate(list(process.chunks(n, np.random.default_rng(5), size))), whole)
    for size in (61, 4096):
        n, again = process.until_chunks(100.0, np.random.default_rng(5), size)
        drawn = np.concatenate(list(again()))
        assert len(drawn) == n
        assert np.array_equal(drawn, process.until(100.0, np.random.default_rng(5)))


def test_gamma_gaps_keep_the_schedules_mean_and_are_burstier():
    """Gerhardt and Nelson's transformed renewal process: the expected count is the schedule's integral (the first
    gap is the stationary one: an ordinary start would add (cv^2 - 1) / 2 = 4 arrivals at cv = 3), and counts over
    windows spread cv^2 times as much as Poisson counts do."""
    shape = parse_rate_schedule("diurnal:peak=8,trough=2,period=100").shape
    first = float(shape.cumulative(2.0))
    means = [len(Modulated(shape, "gamma", 3.0).until(2.0, np.random.default_rng(s))) for s in range(400)]
    assert abs(np.mean(means) - first) < 1.5, (np.mean(means), first)
    edges = np.linspace(0, 4000, 201)
    expected = np.diff(shape.cumulative(edges))
    for unit, cv, low, high in (("poisson", None, 0.6, 1.5), ("gamma", 2.0, 2.5, 6.0)):
        times = Modulated(shape, unit, cv).until(4000.0, np.random.default_rng(11))
        dispersion = float(np.mean((counts(times, edges) - expected) ** 2 / expected))
        assert low < dispersion < high, (unit, dispersion)


def test_constant_gaps_put_the_ith_arrival_where_the_expected_count_reaches_i():
    shape = parse_rate_schedule("diurnal:peak=12,trough=3,period=60;burst:at=20,x=2,for=5").shape
    times = Modulated(shape, "constant").until(120.0, np.random.default_rng(0))
    assert len(times) == math.ceil(float(shape.cumulative(120.0)))
    assert np.allclose(shape.cumulative(times), np.arange(len(times)), atol=1e-6)


def test_stages_run_back_to_back_and_an_inference_perf_file_adds_its_pauses(tmp_path):
    text = parse_rate_schedule("stages:1@30,2@30").shape
    assert text.starts == (0.0, 30.0, 60.0) and text.levels == (1.0, 2.0, 0.0) and text.end == 60.0
    config = tmp_path / "config.yml"
    config.write_text("load:\n  type: poisson\n  interval: 4\n  stages:\n  - rate: 1\n    duration: 30\n"
                      "  - rate: 2\n    duration: 30\n")
    schedule = parse_rate_schedule(str(config))
    pause = 4 + STAGE_LEAD
    assert schedule.shape.starts == (0.0, 30.0, 30.0 + pause, 60.0 + pause)
    assert schedule.shape.levels == (1.0, 0.0, 2.0, 0.0)
    assert schedule.base.startswith("inference-perf")
    times = scheduled_arrivals(schedule.shape).until(schedule.shape.end, np.random.default_rng(2))
    assert not np.any((times >= 30.0) & (times < 30.0 + pause))


def test_a_burst_multiplies_only_its_own_interval():
    shape = parse_rate_schedule("0:10;burst:at=5,x=3,for=2").shape
    assert shape.rate(np.array([4.99, 5.0, 6.99, 7.0])).tolist() == [10.0, 30.0, 30.0, 10.0]
    wave = parse_rate_schedule("diurnal:peak=4,trough=2,period=10,peak_at=0;burst:at=1,x=2,for=1").shape
    assert math.isclose(float(wave.rate(1.5)), 2 * float(Sinusoid(4, 2, 10, 0).value(1.5)))
    assert math.isclose(float(wave.rate(3.0)), float(Sinusoid(4, 2, 10, 0).value(3.0)))


def test_scaling_a_shape_scales_its_rate():
    shape = parse_rate_schedule(DIURNAL).shape
    assert np.allclose(shape.scaled(0.25).cumulative([100.0, 700.0]), 0.25 * shape.cumulative([100.0, 700.0]))
    assert isinstance(shape.scaled(2.0), RateShape)


def test_a_day_is_drawn_in_chunks_without_holding_it():
    """A day at 30 requests/s on average (2.6 million arrivals): counted in one pass, then drawn 4,096 at a time;
    holding every time would take 21 MB."""
    process = scheduled_arrivals(parse_rate_schedule("diurnal:peak=48,trough=12;burst:at=43200,x=3,for=600").shape)
    tracemalloc.start()
    try:
        n, pieces = process.until_chunks(86400.0, np.random.default_rng(0))
        seen, last = 0, -1.0
        for times in pieces():
            assert times[0] >= last
            seen, last = seen + len(times), float(times[-1])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen == n and abs(n - 2_649_593) < 5 * math.sqrt(2_649_593)
    assert last < 86400.0
    assert peak < 4 * 2**20, peak

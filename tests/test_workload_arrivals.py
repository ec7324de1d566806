"""Arrival processes, tiers, and the workload / request sources built on them."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsched.request import Status
from llmsched.workload import (ClosedLoop, Constant, Fixed, Gamma, OpenLoop, Piecewise, Poisson, RequestSource,
                               TraceReplay, TruncatedPoisson, Uniform, Workload, assign_tiers, parse_tiers)


def rng(seed=0):
    return np.random.default_rng(seed)


def empirical_rate(t):
    return (len(t) - 1) / (t[-1] - t[0])


@pytest.mark.parametrize("rate", [0.2, 1.6, 50.0])
def test_poisson_rate_and_exponential_gaps(rate):
    t = Poisson(rate).times(100_000, rng())
    assert t[0] == 0 and np.all(np.diff(t) >= 0)
    assert empirical_rate(t) == pytest.approx(rate, rel=0.02)
    gaps = np.diff(t)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.02)


def test_truncated_poisson_runs_faster_than_nominal():
    p = TruncatedPoisson(1.0, max_gap=3.0)
    t = p.times(200_000, rng())
    assert p.effective_rate == pytest.approx(1 / (1 - math.exp(-3)))
    assert empirical_rate(t) == pytest.approx(p.effective_rate, rel=0.01)
    assert np.diff(t).max() <= 3.0 + 1e-12


@pytest.mark.parametrize("cv", [0.5, 1.0, 3.0])
def test_gamma_rate_and_cv(cv):
    t = Gamma(2.0, cv).times(200_000, rng(1))
    gaps = np.diff(t)
    assert empirical_rate(t) == pytest.approx(2.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.05)


def test_constant_is_evenly_spaced_and_ignores_rng():
    t = Constant(4.0).times(9, rng())
    np.testing.assert_allclose(t, np.arange(9) / 4.0)
    np.testing.assert_array_equal(t, Constant(4.0).times(9, rng(99)))


def test_piecewise_rates_per_segment():
    proc = Piecewise([(0, 10.0), (100, 0.0), (200, 2.0)])
    t = proc.until(700.0, rng(3))
    assert np.all(np.diff(t) >= 0)
    assert np.sum(t < 100) == pytest.approx(1000, rel=0.1)
    assert np.sum((t >= 100) & (t < 200)) == 0
    assert np.sum(t >= 200) == pytest.approx(1000, rel=0.1)
    assert proc.expected_count(700) == pytest.approx(2000)
    t2 = proc.times(1500, rng(3))
    assert len(t2) == 1500 and t2[-1] > 200


def test_piecewise_with_quiet_tail_refuses_too_many():
    proc = Piecewise([(0, 1.0), (10, 0.0)])
    with pytest.raises(ValueError, match="last stage has rate 0"):
        proc.times(1000, rng())


@pytest.mark.parametrize("make, match", [
    (lambda: Poisson(0), "Poisson rate"),
    (lambda: Poisson(-1), "Poisson rate"),
    (lambda: Poisson(float("nan")), "Poisson rate"),
    (lambda: Poisson(float("inf")), "Poisson rate"),
    (lambda: Poisson("fast"), "Poisson rate"),
    (lambda: Gamma(1.0, 0), "cv"),
    (lambda: Gamma(1.0, -2), "cv"),
    (lambda: Gamma(0, 1.0), "Gamma rate"),
    (lambda: Constant(0), "Constant rate"),
    (lambda: Piecewise([]), "at least one"),
    (lambda: Piecewise([(0, 0.0), (5, 0.0)]), "every segment has rate 0"),
    (lambda: Piecewise([(1, 1.0)]), "start at t=0"),
    (lambda: Piecewise([(0, 1.0), (0, 2.0)]), "strictly increasing"),
    (lambda: Piecewise([(0, -1.0)]), "segment 0"),
    (lambda: Piecewise([1, 2]), "pairs"),
    (lambda: TraceReplay([0, 2, 1]), "sorted"),
    (lambda: TraceReplay([]), "at least one"),
    (lambda: TraceReplay([0, 1], target_rate=1, time_scale=2), "not both"),
    (lambda: TraceReplay([0, 1], target_rate=0), "target_rate"),
    (lambda: TraceReplay([0, 1], time_scale=-1), "time_scale"),
])
def test_bad_parameters_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_counts():
    with pytest.raises(ValueError, match="n must be"):
        Poisson(1).times(-1, rng())
    assert len(Poisson(1).times(0, rng())) == 0


def test_trace_replay_shift_and_rescale():
    raw = np.array([100.0, 101.0, 103.0, 104.0, 110.0])  # 4 gaps in 10 s: 0.4 req/s
    assert TraceReplay(raw).times(5).tolist() == [0, 1, 3, 4, 10]
    fast = TraceReplay(raw, target_rate=2.0)
    t = fast.times(5, rng())
    assert empirical_rate(t) == pytest.approx(2.0) and fast.rate == pytest.approx(2.0)
    np.testing.assert_allclose(t, np.array([0, 1, 3, 4, 10]) / 5)
    np.testing.assert_allclose(TraceReplay(raw, time_scale=2).times(3), [0, 2, 6])
    with pytest.raises(ValueError, match="only 5"):
        fast.times(6)
    assert TraceReplay(raw).until(3.5).tolist() == [0, 1, 3]
    assert len(TraceReplay(raw).until(1e6)) == 5


@settings(max_examples=30, deadline=None)
@given(st.floats(0.01, 100), st.floats(1, 1000), st.integers(0, 2**32))
def test_until_stays_inside_duration(rate, duration, seed):
    t = Poisson(rate).until(duration, rng(seed))
    assert len(t) >= 1 and t[0] == 0 and t[-1] < duration and np.all(np.diff(t) >= 0)


# tiers

def test_parse_tiers_slai_setting():
    paid, free = parse_tiers("paid:tbt=0.1:share=0.05,free:tbt=0.5")
    assert (paid.name, paid.slo.tbt, paid.share) == ("paid", 0.1, 0.05)
    assert (free.name, free.slo.tbt, free.slo.ttft) == ("free", 0.5, None)
    assert free.share == pytest.approx(0.95)


def test_parse_tiers_splits_remainder_equally():
    tiers = parse_tiers("a:ttft=1:tpot=0.05:share=0.4, b:tbt=0.2, c")
    assert [t.share for t in tiers] == pytest.approx([0.4, 0.3, 0.3])
    assert tiers[0].slo.tpot == 0.05 and tiers[0].slo.ttft == 1
    assert parse_tiers("solo")[0].share == 1.0


@pytest.mark.parametrize("spec, match", [
    ("", "non-empty"),
    ("a:share=0.5,b:share=0.4", "sum to 0.9"),
    ("a:share=0.6,b:share=0.6", "sum to 1.2"),
    ("a:share=1,b", "leaving nothing"),
    ("a:tbt=fast", "not a number"),
    ("a:tbt=-1", "positive"),
    ("a:latency=1", "key one of"),
    ("a:tbt", "key=value"),
    ("a,a", "twice"),
    ("a:tbt=1:tbt=2", "given twice"),
    (":tbt=1", "needs a name"),
])
def test_parse_tiers_bad_input(spec, match):
    with pytest.raises(ValueError, match=match):
        parse_tiers(spec)


def test_assign_tiers_shares():
    tiers = parse_tiers("paid:tbt=0.1:share=0.05,free:tbt=0.5")
    got = assign_tiers(100_000, tiers, rng())
    assert sum(t.name == "paid" for t in got) / len(got) == pytest.approx(0.05, abs=0.003)
    assert assign_tiers(50, tiers, rng(7)) == assign_tiers(50, tiers, rng(7))


# workloads and sources

def spec(r):
    return (r.id, r.arrival, r.prompt_len, r.output_len, r.tier.name)


def test_same_seed_same_requests_other_seed_different():
    w = Workload(Gamma(2.0, 2.0), Uniform(1, 500, 1, 300), num_requests=300, tiers="p:tbt=0.1:share=0.2,f", seed=5)
    a, b = w.requests(), w.requests()
    assert [spec(r) for r in a] == [spec(r) for r in b] and a[0] is not b[0]
    other = Workload(Gamma(2.0, 2.0), Uniform(1, 500, 1, 300), num_requests=300, tiers="p:tbt=0.1:share=0.2,f", seed=6)
    assert [spec(r) for r in a] != [spec(r) for r in other.requests()]
    assert [r.id for r in a] == list(range(300))
    assert all(x.arrival <= y.arrival for x, y in zip(a, a[1:]))


def test_changing_lengths_keeps_arrivals():
    a = Workload(Poisson(1.0), Fixed(10, 10), num_requests=50, seed=1).requests()
    b = Workload(Poisson(1.0), Uniform(1, 9, 1, 9), num_requests=50, seed=1).requests()
    assert [r.arrival for r in a] == [r.arrival for r in b]


def test_duration_and_cap():
    w = Workload(Poisson(5.0), Fixed(9000, 500), duration=60.0, max_total_tokens=8192)
    reqs = w.requests()
    assert len(reqs) == pytest.approx(300, rel=0.25) and reqs[-1].arrival < 60
    assert all(r.prompt_len == 8191 and r.output_len == 1 for r in reqs)
    d = w.describe()
    assert d["arrivals"]["kind"] == "poisson" and d["max_total_tokens"] == 8192 and d["duration"] == 60.0


@pytest.mark.parametrize("kwargs, match", [
    (dict(), "num_requests or duration"),
    (dict(num_requests=5, duration=1.0), "not both"),
    (dict(num_requests=0), "num_requests"),
    (dict(duration=-1.0), "duration"),
    (dict(num_requests=5, seed=-1), "seed"),
    (dict(num_requests=5, tiers="a:share=0.5"), "sum to"),
])
def test_workload_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Workload(Poisson(1.0), Fixed(1, 1), **kwargs)


def test_open_loop_refuses_reuse():
    reqs = Workload(Constant(1.0), Fixed(4, 4), num_requests=3).requests()
    src = OpenLoop(reqs)
    assert isinstance(src, RequestSource)
    assert src.initial() == reqs and src.on_done(reqs[0], 1.0) == []
    reqs[0].status = Status.FINISHED
    with pytest.raises(ValueError, match="already run"):
        src.initial()


def test_closed_loop_keeps_concurrency():
    """Drive the source with random service times; in flight stays at `concurrency` until the supply ends."""
    src = ClosedLoop(8, Uniform(1, 100, 1, 100), num_requests=200, think_time=0.5, seed=3)
    assert isinstance(src, RequestSource)
    r = rng(11)
    in_flight = {q.id: (q.arrival + r.exponential(1.0), q) for q in src.initial()}
    assert len(in_flight) == 8 and all(q.arrival == 0 for _, q in in_flight.values())
    issued, now = 8, 0.0
    while in_flight:
        rid = min(in_flight, key=lambda k: in_flight[k][0])
        now, done = in_flight.pop(rid)
        for q in src.on_done(done, now):
            assert q.arrival == pytest.approx(now + 0.5) and q.id == issued
            issued += 1
            in_flight[q.id] = (q.arrival + r.exponential(1.0), q)
        assert len(in_flight) == (8 if issued < 200 else len(in_flight))
        assert len(in_flight) <= 8
    assert issued == 200
    with pytest.raises(ValueError, match="already told"):
        src.on_done(done, now)


def test_closed_loop_lengths_do_not_depend_on_completion_order():
    a = ClosedLoop(2, Uniform(1, 1000, 1, 1000), num_requests=4, seed=9)
    b = ClosedLoop(2, Uniform(1, 1000, 1, 1000), num_requests=4, seed=9)
    ra, rb = a.initial(), b.initial()
    na = a.on_done(ra[0], 1.0) + a.on_done(ra[1], 2.0)
    nb = b.on_done(rb[1], 1.0) + b.on_done(rb[0], 2.0)
    assert [(q.id, q.prompt_len, q.output_len) for q in na] == [(q.id, q.prompt_len, q.output_len) for q in nb]
    assert a.on_done(na[0], 3.0) == []
    assert len(a.initial()) == 2  # restart


def test_closed_loop_bad_input():
    with pytest.raises(ValueError, match="concurrency"):
        ClosedLoop(0, Fixed(1, 1), 5)
    with pytest.raises(ValueError, match="think_time"):
        ClosedLoop(1, Fixed(1, 1), 5, think_time=-1)

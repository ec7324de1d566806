"""Length distributions: targets, joint structure, capping, bad input."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsched.workload import (Capped, Empirical, Fixed, Geometric, LengthDist, Lognormal, QuantileTable, Uniform,
                               Zipf)


def rng(seed=0):
    return np.random.default_rng(seed)


def check_shape(dist: LengthDist, n=1000):
    p, o = dist.sample(n, rng())
    assert p.dtype == np.int64 and o.dtype == np.int64 and len(p) == len(o) == n
    assert p.min() >= 1 and o.min() >= 1
    assert isinstance(dist.describe(), dict) and "kind" in dist.describe()
    return p, o


def test_fixed():
    p, o = check_shape(Fixed(285, 201))
    assert set(p) == {285} and set(o) == {201}


def test_uniform_inclusive_bounds():
    p, o = check_shape(Uniform(8, 16, 512, 1024), 20_000)
    assert (p.min(), p.max(), o.min(), o.max()) == (8, 16, 512, 1024)
    assert np.mean(p) == pytest.approx(12, rel=0.01)


def test_lognormal_medians_and_spread():
    p, o = check_shape(Lognormal(1000, 0.8, 200, 1.2), 100_000)
    assert np.median(p) == pytest.approx(1000, rel=0.02)
    assert np.median(o) == pytest.approx(200, rel=0.02)
    assert np.log(p).std() == pytest.approx(0.8, rel=0.03)
    assert np.percentile(o, 90) == pytest.approx(200 * np.exp(1.2 * 1.2816), rel=0.04)


def test_zipf_follows_power_law_and_max():
    p, o = check_shape(Zipf(1.5, 4096, 1.2, 100), 200_000)
    assert p.max() <= 4096 and o.max() <= 100
    weights = np.arange(1, 4097) ** -1.5
    expected = weights[:2] / weights.sum()
    assert np.mean(p == 1) == pytest.approx(expected[0], rel=0.02)
    assert np.mean(p == 2) == pytest.approx(expected[1], rel=0.04)


def test_geometric_deferred_prefill_workload():
    p, o = check_shape(Geometric(285, 201), 200_000)
    assert set(p) == {285}
    assert o.mean() == pytest.approx(201, rel=0.015)
    assert np.median(o) == pytest.approx(np.ceil(np.log(0.5) / np.log(1 - 1 / 201)), abs=3)
    assert set(Geometric(10, 1).sample(50, rng())[1]) == {1}


def test_empirical_keeps_rows_jointly():
    prompts = np.array([10, 20, 30, 40])
    outputs = prompts * 7
    for draw in ("resample", "shuffle"):
        p, o = Empirical(prompts, outputs, draw=draw).sample(1000, rng())
        assert np.all(o == p * 7)
    p, _ = Empirical(prompts, outputs, draw="shuffle").sample(4, rng())
    assert sorted(p) == [10, 20, 30, 40]  # one pass of a permutation: each row once
    p, _ = Empirical(prompts, outputs, draw="sequential").sample(3, rng())
    assert p.tolist() == [10, 20, 30]
    with pytest.raises(ValueError, match="has 4 rows"):
        Empirical(prompts, outputs, draw="sequential").sample(5, rng())


def test_quantile_table_reproduces_marginals_and_dependence():
    r = rng(4)
    prompts = np.rint(r.lognormal(np.log(1500), 0.9, 40_000)).astype(int) + 1
    outputs = np.maximum(1, np.rint(3e5 / prompts * r.lognormal(0, 0.3, 40_000))).astype(int)
    table = QuantileTable.fit(prompts, outputs)
    table = QuantileTable.from_dict(table.to_dict())  # round trip through the JSON form
    p, o = check_shape(table, 400_000)
    for a, b in ((p, prompts), (o, outputs)):
        for q in (50, 90):
            assert np.percentile(a, q) == pytest.approx(np.percentile(b, q), rel=0.02)
    assert np.corrcoef(np.log(p), np.log(o))[0, 1] == pytest.approx(np.corrcoef(np.log(prompts),
                                                                                np.log(outputs))[0, 1], abs=0.05)


def test_quantile_table_rejects_bad_tables():
    with pytest.raises(ValueError, match="non-decreasing"):
        QuantileTable([0, 1], [5, 3], [0, 1], [[1, 2]])
    with pytest.raises(ValueError, match="from 0 to 1"):
        QuantileTable([0, 0.5], [1, 2], [0, 1], [[1, 2]])
    with pytest.raises(ValueError, match="missing"):
        QuantileTable.from_dict({"prompt": {}})


def test_capped_output_mode():
    cap = Capped(Fixed(1, 1), 100)
    p, o = cap.cap(np.array([10, 99, 150, 60]), np.array([50, 5, 10, 60]))
    assert p.tolist() == [10, 99, 99, 60] and o.tolist() == [50, 1, 1, 40]


def test_capped_proportional_mode():
    cap = Capped(Fixed(1, 1), 100, how="proportional")
    p, o = cap.cap(np.array([150, 10, 199]), np.array([50, 50, 1]))
    assert p.tolist() == [75, 10, 99] and o.tolist() == [25, 50, 1]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 20_000), st.integers(1, 20_000), st.integers(2, 10_000),
       st.sampled_from(["output", "proportional"]))
def test_capped_always_fits(prompt, output, max_total, how):
    p, o = Capped(Fixed(prompt, output), max_total, how=how).sample(1, rng())
    assert p[0] >= 1 and o[0] >= 1 and p[0] + o[0] <= max_total
    if prompt + output <= max_total:
        assert (p[0], o[0]) == (prompt, output)


@settings(max_examples=50, deadline=None)
@given(st.floats(1, 1e5), st.floats(0, 3), st.floats(1, 1e5), st.floats(0, 3), st.integers(0, 2**32))
def test_lognormal_always_valid(pm, ps, om, os, seed):
    p, o = Lognormal(pm, ps, om, os).sample(64, rng(seed))
    assert p.min() >= 1 and o.min() >= 1


@pytest.mark.parametrize("make, match", [
    (lambda: Fixed(0, 5), "Fixed prompt"),
    (lambda: Fixed(5, 1.5), "Fixed output"),
    (lambda: Uniform(10, 5, 1, 1), "prompt_max"),
    (lambda: Uniform(1, 1, 0, 1), "output_min"),
    (lambda: Lognormal(0, 1, 1, 1), "prompt_median"),
    (lambda: Lognormal(1, -1, 1, 1), "prompt_sigma"),
    (lambda: Lognormal(1, 1, 1, float("nan")), "output_sigma"),
    (lambda: Zipf(0, 10, 1.5, 10), "prompt_a"),
    (lambda: Zipf(1.5, 0, 1.5, 10), "prompt_max"),
    (lambda: Geometric(285, 0.5), "output_mean"),
    (lambda: Empirical([1, 2], [1]), "equal length"),
    (lambda: Empirical([1, 0], [1, 1]), "prompts must all be >= 1"),
    (lambda: Empirical([1.5], [1]), "whole token counts"),
    (lambda: Empirical([1], [1], draw="random"), "draw must be one of"),
    (lambda: Capped(Fixed(1, 1), 1), "max_total"),
    (lambda: Capped(Fixed(1, 1), 10, how="prompt"), "how must be one of"),
    (lambda: Capped("sharegpt", 10), "wraps a LengthDist"),
])
def test_bad_parameters_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_same_seed_same_lengths():
    d = Lognormal(100, 1, 100, 1)
    a, b = d.sample(100, rng(3)), d.sample(100, rng(3))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])

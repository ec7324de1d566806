"""Ao et al.'s worked examples and the spec's test vectors (spec §1.8, §2.3, §3.2) as exact tests."""
import math

import pytest

from llmsched.cli import main
from llmsched.schedulers.wait.fluid_model import (Overloaded, PromptType, batch_cap_thresholds, check_wait_thresholds,
                                                  feasible_cycle_times, fluid, parse_types, wait_thresholds)
from llmsched.schedulers.wait.nested import (memory_requirement, nested_thresholds, segment_memory, segments,
                                             theta_star_binomial, theta_star_poisson)


def test_single_type_unit_vector():
    eq = fluid([PromptType(1, 1, 1)], d0=1, d1=0)
    assert (eq.T, eq.M, eq.n, eq.throughput) == (1, 3, (1,), 1)


def test_two_type_vector():
    eq = fluid(parse_types("20:10:10,10:10:20"), d0=0.01, d1=1e-5)
    assert eq.c == (165, 420)
    assert eq.rho == pytest.approx(0.075)
    assert eq.T == pytest.approx(0.0108108, rel=1e-5)
    assert eq.M == pytest.approx(81.081, rel=1e-4)
    assert eq.n == pytest.approx((0.21622, 0.10811), rel=1e-4)
    assert eq.throughput == 400


@pytest.mark.parametrize("d0,d1", [(1.0, 0.0), (0.01, 0.001), (0.007, 2.6e-7), (3.0, 0.5)])
def test_example_1_equilibrium_is_12_units_and_4_per_stage(d0, d1):
    lam = 4 / (d0 + 12 * d1)
    eq = fluid([PromptType(lam, 1, 1)], d0, d1)
    assert eq.M == pytest.approx(12)
    assert eq.n[0] == pytest.approx(4)
    assert eq.T == pytest.approx(d0 + 12 * d1)


def test_two_type_instance_of_props_3_and_5_needs_9_units():
    types = [PromptType(1, 1, 1), PromptType(1, 1, 2)]
    eq = fluid(types, d0=1, d1=0)
    assert eq.n == (1, 1) and eq.M == 9
    assert segment_memory(1, segments(types), [2, 1]) == 9  # nested: both types share segment 1


def test_overload_is_a_clear_error():
    with pytest.raises(Overloaded, match="Prop. 1"):
        fluid([PromptType(1000, 60, 500)], d0=0.007, d1=2.6e-7)


def test_realistic_scale_55_and_550_qps():
    shares = (23, 11, 8, 7, 6, 4, 3, 2, 1, 1)
    types = [PromptType(55 * s / 66, 60, d) for s, d in zip(shares, range(50, 501, 50))]
    eq = fluid(types, d0=0.007, d1=2.6e-7)
    assert eq.rho == pytest.approx(0.408, abs=1e-3)
    assert eq.T == pytest.approx(0.0118, abs=1e-4)
    assert eq.M == pytest.approx(18.5e3, rel=0.01)
    assert max(eq.n) < 0.24 and min(eq.n) > 0.009
    with pytest.raises(Overloaded):
        fluid([PromptType(t.rate * 10, t.prompt, t.decode) for t in types], d0=0.007, d1=2.6e-7)


def test_feasible_thresholds_empty_iff_memory_below_equilibrium():
    types = parse_types("20:10:10,10:10:20")
    eq = fluid(types, 0.01, 1e-5)
    assert feasible_cycle_times(types, 0.01, 1e-5, eq.M * 0.999) is None
    lo, hi = feasible_cycle_times(types, 0.01, 1e-5, eq.M * 2)
    assert lo == pytest.approx(eq.T) and hi == pytest.approx(2 * eq.T)


def test_integer_wait_thresholds_meet_conditions_11():
    types = parse_types("2000:10:10,1000:10:20")
    n = wait_thresholds(types, 0.01, 1e-7, memory := 50_000)
    assert check_wait_thresholds(types, 0.01, 1e-7, memory, n) == []
    assert check_wait_thresholds(types, 0.01, 1e-7, memory, [1, 1]) != []  # (11b) fails: arrivals outrun n
    with pytest.raises(ValueError, match="no integer WAIT thresholds"):
        wait_thresholds(types, 0.01, 1e-7, 100)


def test_batch_cap_rule_matches_authors_code():
    types = parse_types("20:10:10,10:10:20")  # Σλ(l'+1) = 220 + 210 = 430
    assert batch_cap_thresholds(types, 430) == [20, 10]
    assert batch_cap_thresholds(types, 5) == [1, 1]


@pytest.mark.parametrize("rho,n,theta", [(9, 10, 0.20715), (95, 100, 0.10172)])
def test_theta_star_poisson(rho, n, theta):
    th = theta_star_poisson(rho, n)
    assert th == pytest.approx(theta, abs=1e-5)
    assert rho * math.expm1(th) == pytest.approx(n * th)
    assert th == pytest.approx(2 * (n - rho) / rho, rel=0.1)  # small-drift approximation 2|EX|/VarX


@pytest.mark.parametrize("N,p,n,theta", [(10, 0.5, 6, 0.82216), (100, 0.5, 55, 0.40269)])
def test_theta_star_binomial(N, p, n, theta):
    assert theta_star_binomial(N, p, n) == pytest.approx(theta, abs=1e-5)


def test_theta_star_needs_negative_drift():
    with pytest.raises(ValueError, match="negative drift"):
        theta_star_poisson(10, 10)


def test_segments_rates_and_survival():
    segs = segments(parse_types("3:60:50,2:60:100,1:60:150"))
    assert [(s.first, s.last) for s in segs] == [(0, 50), (51, 100), (101, 150)]
    assert [s.rate for s in segs] == [6, 3, 1]
    assert [s.survive for s in segs] == [1, 0.5, pytest.approx(1 / 3)]
    n = nested_thresholds(segs, 100)  # ∝ Λ_s: B·Λ_s/Σ c̃Λ = 100·Λ_s/(51·6 + 50·3 + 50·1)
    assert n == [2, 1, 1]
    assert n == sorted(n, reverse=True)


def test_memory_requirement_adds_a_logarithmic_buffer():
    segs = segments(parse_types("3:60:50,2:60:100,1:60:150"))
    n = [20, 12, 5]
    short = memory_requirement(60, segs, n, 0.01, 1e-6, horizon=100, delta=0.1)
    long = memory_requirement(60, segs, n, 0.01, 1e-6, horizon=10_000, delta=0.1)
    assert short["peak"] == long["peak"] == segment_memory(60, segs, n)
    assert long["buffer"] > short["buffer"]
    th = theta_star_binomial(20, 0.5, 12)
    grow = (60 + 50) * math.log(100) / th + (60 + 100) * math.log(100) / short["theta"][1]
    assert long["buffer"] - short["buffer"] == pytest.approx(grow)


def test_theory_cli(capsys):
    assert main(["theory", "fluid", "--types", "20:10:10,10:10:20", "--d0", "0.01", "--d1", "1e-5",
                 "--memory", "81"]) == 0
    out = capsys.readouterr().out
    assert "M* = 81.0811" in out and "none (M < M*)" in out
    assert main(["theory", "fluid", "--types", "1000:60:500", "--d0", "0.007", "--d1", "2.6e-7"]) == 2
    assert main(["theory", "fluid", "--workload", "nested-synthetic", "--rate", "55", "--json"]) == 0

"""Mohanty et al.'s analysis against the spec's reference values (§2.5 table, Appendix A rows)."""
import numpy as np
import pytest

from llmsched.batchtime.roofline import RooflineBatchTime
from llmsched.schedulers.deferred.renewal import cycle_stats, prop1_iterations
from llmsched.schedulers.deferred.throughput import exact_throughput, optimal_K, prop1_throughput, r_interval
from llmsched.schedulers.deferred.timing_constants import Timing, timing_from_batch_time, timing_from_steps

ALPHA = 1 / 201

# spec §2.5: C, K, exact E N_1, Prop. 1 n(K), exact E[C - X_S]
TABLE = [(331, 1, 1.2374, 0.6067, 2.0378), (331, 2, 1.7243, 1.2152, 2.8371), (331, 5, 3.5473, 3.0518, 5.8118),
         (331, 10, 6.6414, 6.1508, 10.7992), (331, 26, 16.8764, 16.4022, 26.7593),
         (331, 32, 20.8534, 20.3858, 32.7444), (331, 100, 72.4889, 72.1198, 100.5751),
         (410, 1, 1.1486, 0.4896, 2.3430), (410, 10, 5.4448, 4.9509, 10.9959), (410, 58, 31.0411, 30.5814, 58.8763),
         (410, 75, 40.9516, 40.5063, 75.8340), (410, 100, 56.4778, 56.0566, 100.7718)]

# spec Appendix A: (C, form, c_p, c_d, A, argmax, {K: rho})
APPENDIX_A = [
    (331, "exact", 0.02725, 0.03733, 0.05183, 26, {1: 11.380, 5: 12.610, 10: 12.935, 26: 13.090, 32: 13.083,
                                                   58: 12.963, 75: 12.850, 100: 12.657, 200: 11.547}),
    (331, "prop1", 0.01239, 0.01797, 0.06458, 26, {1: 11.380, 5: 12.816, 10: 13.009, 26: 13.090, 32: 13.086,
                                                   58: 13.027, 75: 12.972, 100: 12.876, 200: 12.294}),
    (410, "exact", 0.01650, 0.00652, 0.04381, 58, {1: 18.502, 5: 20.094, 10: 20.602, 26: 20.957, 32: 20.995,
                                                   58: 21.040, 75: 21.031, 100: 20.996, 200: 20.720}),
    (410, "prop1", 0.00674, 0.00275, 0.04596, 58, {1: 18.503, 5: 20.550, 10: 20.835, 26: 21.005, 32: 21.021,
                                                   58: 21.041, 75: 21.037, 100: 21.022, 200: 20.904}),
]


@pytest.mark.parametrize("C,K,EN,n,ED", TABLE)
def test_cycle_means_match_the_spec_table(C, K, EN, n, ED):
    stats = cycle_stats(C, ALPHA)
    assert stats.iterations[K] == pytest.approx(EN, abs=1e-3)
    assert stats.departures[K] == pytest.approx(ED, abs=1e-3)
    assert prop1_iterations(C, K, ALPHA) == pytest.approx(n, abs=1e-3)


@pytest.mark.parametrize("C,form,c_p,c_d,A,argmax,values", APPENDIX_A)
def test_throughput_and_optimum_match_appendix_a(C, form, c_p, c_d, A, argmax, values):
    t = Timing.from_A(c_p=c_p, c_d=c_d, A=A, alpha=ALPHA)
    rho = (exact_throughput if form == "exact" else prop1_throughput)(C, ALPHA, t)
    for K, value in values.items():
        assert rho[K] == pytest.approx(value, abs=1.5e-3), K
    assert optimal_K(rho) == argmax


def test_checked_values_rho26_and_rho32():
    """Spec §2.5's flatness example: ρ(26) = 13.090 and ρ(32) = 13.083, with only A = t_d/α + s_p mattering."""
    for t_d in (0.0, 1.5e-4):
        rho = exact_throughput(331, ALPHA, Timing.from_A(0.02725, 0.03733, 0.05183, ALPHA, t_d=t_d))
        assert round(rho[26], 3) == 13.090 and round(rho[32], 3) == 13.083


def test_lemma2_wald_identity_and_general_tau():
    """E Σ X_j over a decode phase = E[C − X_S]/α (Lemma 2); a linear τ gives Theorem 1's decode time."""
    C, alpha = 60, 1 / 30
    x = np.arange(C + 1)
    stats = cycle_stats(C, alpha, tau=x.astype(float))
    np.testing.assert_allclose(stats.decode_time[1:], stats.departures[1:] / alpha, rtol=1e-9)
    c_d, t_d = 0.03, 2e-4
    lin = cycle_stats(C, alpha, tau=c_d + t_d * x)
    np.testing.assert_allclose(lin.decode_time[1:], c_d * lin.iterations[1:] + t_d / alpha * lin.departures[1:],
                               rtol=1e-9)


def test_order_statistics_cross_check():
    """E N_1 = Σ_m P(Bin(C, 1 − q^m) ≤ K − 1): the K-th smallest of C geometric residuals (spec §2.5)."""
    C, alpha, K = 40, 0.1, 7
    q = 1 - alpha
    from math import comb
    total = 0.0
    for m in range(2000):
        p = 1 - q ** m
        total += sum(comb(C, i) * p ** i * (1 - p) ** (C - i) for i in range(K))
    assert cycle_stats(C, alpha).iterations[K] == pytest.approx(total, rel=1e-9)


def test_r_intervals_of_spec_section_2_5():
    lo, hi = r_interval(331, ALPHA, 26)
    assert lo == pytest.approx(0.701, abs=2e-3) and hi == pytest.approx(0.758, abs=2e-3)
    lo, hi = r_interval(410, ALPHA, 58, prop1=True)
    assert lo == pytest.approx(2.409, abs=2e-3) and hi == pytest.approx(2.502, abs=2e-3)


def test_no_fixed_prefill_cost_means_K_star_1():
    assert optimal_K(exact_throughput(331, ALPHA, Timing(c_p=0.0, s_p=0.02, c_d=0.03, t_d=1e-4))) == 1


def test_K_equal_C_is_static_batching():
    """K = C: every prompt leaves before the refill, E D = C and E N_1 = E max of C geometrics."""
    C, alpha = 20, 0.2
    stats = cycle_stats(C, alpha)
    assert stats.departures[C] == pytest.approx(C)
    q = 1 - alpha
    emax = sum(1 - (1 - q ** m) ** C for m in range(5000))
    assert stats.iterations[C] == pytest.approx(emax, rel=1e-9)


def test_timing_fit_recovers_a_linear_model_and_fits_a_roofline():
    t = Timing(c_p=0.027, s_p=0.0217, c_d=0.0373, t_d=1.5e-4)
    fit = timing_from_batch_time(t.batch_time(), 331, 285, ALPHA)
    for name, value in t.as_dict().items():
        assert getattr(fit.timing, name) == pytest.approx(value, rel=1e-6)
    roof = timing_from_batch_time(RooflineBatchTime("llama-3-8b", "a100"), 410, 285, ALPHA,
                                  max_num_batched_tokens=8192)
    assert roof.decode.r2 > 0.95 and roof.prefill.r2 > 0.95
    assert roof.timing.s_p > 0 and roof.timing.t_d > 0


def test_timing_from_steps_recovers_the_constants():
    t = Timing(c_p=0.03, s_p=0.02, c_d=0.04, t_d=1e-3)
    rows = {"replica": [], "duration": [], "num_prefills": [], "prefill_tokens": [], "num_decodes": []}

    def add(npf, ndec):
        rows["replica"].append(0)
        rows["duration"].append(t.c_p + t.s_p * npf if npf else t.c_d + t.t_d * ndec)
        rows["num_prefills"].append(npf)
        rows["prefill_tokens"].append(100 * npf)
        rows["num_decodes"].append(ndec)

    for n in (1, 4, 9, 2, 7):
        add(n, 0)
        for x in (10, 9, 7, 12):
            add(0, x)
    fit = timing_from_steps(rows)
    assert fit.prompt_len == 100
    for name, value in t.as_dict().items():
        assert getattr(fit.timing, name) == pytest.approx(value, rel=1e-6)
    assert fit.prefill.n == 5 and fit.decode.n == 20
    rows["num_decodes"][0] = 3  # a mixed step is left out
    assert timing_from_steps(rows).prefill.n == 4
    with pytest.raises(ValueError, match="prefill-only and 2 decode-only"):
        timing_from_steps({k: v[:1] for k, v in rows.items()})


@pytest.mark.parametrize("args,match", [((0, 0.1), "batch size C"), ((10, 1.0), "alpha"), ((10, 0.0), "alpha")])
def test_bad_model_parameters(args, match):
    with pytest.raises(ValueError, match=match):
        cycle_stats(*args)


def test_bad_timing():
    with pytest.raises(ValueError, match="c_p"):
        Timing(c_p=-1, s_p=0, c_d=0.1, t_d=0)

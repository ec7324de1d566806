"""Every request source checked against a calculation made here, independently of the code under test: arrival
processes (rate, CV of the gaps, per-stage counts, first arrival, order), traces (timestamps parsed again with
Decimal, lengths read again with csv/json), length presets against their source files, sessions' prompt growth,
inference-perf's shared-prefix groups and tenants' shares, on settings the other tests do not use (rates 0.01 to
1000 req/s, several seeds, gamma shapes, long schedules)."""
import collections
import csv
import json
import math
from datetime import datetime
from decimal import Decimal

import numpy as np
import pytest
from conftest import shared_data_dir

from llmsched.run_config import RunConfig
from llmsched.sources.registry import build_source
from llmsched.workload.arrivals.modulated import Modulated
from llmsched.workload.arrivals.rate_shape import RateShape
from llmsched.workload.generators.closed_sessions import DrawnSessions
from llmsched.workload.lengths.distributions import Capped, Geometric, Lognormal, Zipf
from llmsched.workload.lengths.length_presets import LENGTH_PRESETS, length_preset
from llmsched.workload.tenants.streams import parse_tenants, scaled_tenants
from llmsched.workload.workload import streams

DATA = shared_data_dir()
needs_data = pytest.mark.skipif(DATA is None, reason="shared data folder not found (set LLMSCHED_DATA)")
TRACES = None if DATA is None else DATA / "traces"


def source(**kw):
    return build_source(RunConfig.from_dict(kw))


def arrivals(src) -> np.ndarray:
    return np.array([r.arrival for r in src.initial()])


# ---- arrival processes -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [0.01, 1.0, 1000.0])
@pytest.mark.parametrize("seed", [3, 11])
def test_poisson_rate_and_unit_cv_at_any_rate(rate, seed):
    n = 20_000
    t = arrivals(source(rate=rate, num_requests=n, seed=seed))
    gaps = np.diff(t)
    assert t[0] == 0.0 and np.all(gaps >= 0)
    # the mean gap of n-1 exponential gaps has relative standard error 1/sqrt(n-1): 4 of them
    assert gaps.mean() * rate == pytest.approx(1.0, abs=4 / math.sqrt(n - 1))
    # the sample CV of exponential gaps: about 1 with standard error ~ 1/sqrt(n) (its variance is ~ 1/n for the
    # exponential, whose kurtosis is 9: Var(s/m) ~ (kurt - 1)/(4n) = 2/n)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=4 * math.sqrt(2 / n))


@pytest.mark.parametrize("cv", [0.25, 0.5, 2.0, 4.0])
def test_gamma_gaps_have_the_declared_mean_and_cv(cv):
    n, rate = 40_000, 37.0
    gaps = np.diff(arrivals(source(rate=rate, num_requests=n, seed=5, arrival="gamma", cv=cv)))
    shape = 1 / cv**2  # gamma(k, theta): mean k theta, variance k theta^2, so CV = 1/sqrt(k)
    assert gaps.mean() * rate == pytest.approx(1.0, abs=5 * cv / math.sqrt(n))
    # the sample variance of a gamma of shape k: relative standard error sqrt((2 + 6/k) / n)
    rel = math.sqrt((2 + 6 / shape) / n)
    assert (gaps.std() / gaps.mean()) ** 2 == pytest.approx(cv**2, rel=5 * rel)


def test_constant_arrivals_are_exactly_evenly_spaced():
    t = arrivals(source(rate=0.01, num_requests=50, arrival="constant"))
    assert np.allclose(t, np.arange(50) * 100.0, rtol=1e-12, atol=0)


@pytest.mark.parametrize("rate", [0.01, 5.0, 1000.0])
def test_duration_counts_a_poisson_process_from_zero(rate):
    # the first arrival at 0, then a Poisson process: 1 + Poisson(rate * duration) arrivals in [0, duration)
    duration = 1000.0
    t = arrivals(source(rate=rate, duration=duration, seed=9))
    mean = rate * duration
    assert len(t) - 1 == pytest.approx(mean, abs=5 * math.sqrt(mean) + 1)
    assert t.max() < duration and np.all(np.diff(t) >= 0)


def test_seeds_differ_and_repeat():
    a, b = (arrivals(source(rate=3.0, num_requests=200, seed=s)) for s in (1, 2))
    assert not np.array_equal(a, b)
    assert np.array_equal(a, arrivals(source(rate=3.0, num_requests=200, seed=1)))


# ---- rate schedules ----------------------------------------------------------------------------------------------

STAGES = "stages:2@60,40@30,0.5@100"
EXPECTED_STAGES = [120, 1200, 50]  # rate x duration of each stage
EDGES = [0, 60, 90, 190]


def test_constant_arrivals_fill_each_stage_exactly():
    t = arrivals(source(rate_schedule=STAGES, arrival="constant"))
    assert np.histogram(t, bins=EDGES)[0].tolist() == EXPECTED_STAGES
    assert t[0] == 0.0 and t[-1] < 190


@pytest.mark.parametrize("seed", [0, 4])
def test_poisson_stage_counts_are_poisson_around_rate_times_duration(seed):
    t = arrivals(source(rate_schedule=STAGES, seed=seed))
    counts = np.histogram(t, bins=EDGES)[0]
    for got, want in zip(counts, EXPECTED_STAGES):
        assert abs(got - want) <= 5 * math.sqrt(want)
    assert t[-1] < 190 and np.all(np.diff(t) >= 0)


@pytest.mark.parametrize("cv", [0.3, 4.0])
def test_modulated_gamma_keeps_each_stages_expected_count(cv):
    # Gerhardt and Nelson's transformed renewal process with a stationary first gap: E[N(a, b)] = Lambda(b) -
    # Lambda(a) exactly; the count's variance is about cv^2 times its mean, so the mean of 150 draws is within
    # 5 cv sqrt(mean / 150)
    shape = RateShape((0.0, 60.0, 90.0, 190.0), (2.0, 40.0, 0.5, 0.0))
    process = Modulated(shape, "gamma", cv)
    counts = np.array([np.histogram(process.until(190.0, np.random.default_rng(s)), bins=EDGES)[0]
                       for s in range(150)])
    for got, want in zip(counts.mean(0), EXPECTED_STAGES):
        assert abs(got - want) <= 5 * max(cv, 1) * math.sqrt(want / 150) + 0.5


def test_diurnal_counts_follow_the_sinusoids_integral():
    peak, trough, period = 48.0, 12.0, 3600.0
    t = arrivals(source(rate_schedule=f"diurnal:peak={peak:g},trough={trough:g},period={period:g}",
                        duration=2 * period, seed=2))
    mean, amp, w = (peak + trough) / 2, (peak - trough) / 2, 2 * math.pi / period
    peak_at = period / 2  # documented default: the run starts at the trough

    def count(a, b):  # the integral of mean + amp cos(w (t - peak_at)) over [a, b)
        return mean * (b - a) + amp / w * (math.sin(w * (b - peak_at)) - math.sin(w * (a - peak_at)))
    for a in range(0, int(2 * period), 600):
        want = count(a, a + 600)
        got = int(((t >= a) & (t < a + 600)).sum())
        assert abs(got - want) <= 5 * math.sqrt(want), (a, got, want)


def test_a_burst_multiplies_the_rate_on_its_window_only():
    t = arrivals(source(rate_schedule="0:10;burst:at=100,x=5,for=50", duration=300.0, seed=2))
    for (a, b), want in (((0, 100), 1000), ((100, 150), 2500), ((150, 300), 1500)):
        assert abs(int(((t >= a) & (t < b)).sum()) - want) <= 5 * math.sqrt(want)


# ---- traces ------------------------------------------------------------------------------------------------------

def azure_seconds(stamp: str) -> Decimal:
    """An Azure 2023 TIMESTAMP ('2023-11-16 18:15:46.6805900') in seconds, to its last digit."""
    whole, frac = stamp.split(".")
    return Decimal(int(datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").timestamp())) + Decimal("0." + frac)


@needs_data
@pytest.mark.parametrize("name", ["AzureLLMInferenceTrace_conv.csv", "AzureLLMInferenceTrace_code.csv"])
def test_azure_trace_times_and_lengths_preserved(name):
    rows = list(csv.DictReader(open(TRACES / name)))
    start = azure_seconds(rows[0]["TIMESTAMP"])
    want = np.array([float(azure_seconds(r["TIMESTAMP"]) - start) for r in rows])
    reqs = list(source(trace=str(TRACES / name), rate=None).initial())
    assert np.array_equal([r.arrival for r in reqs], want)
    assert [r.prompt_len for r in reqs] == [int(r["ContextTokens"]) for r in rows]
    assert [r.output_len for r in reqs] == [int(r["GeneratedTokens"]) for r in rows]
    # --rate R: (n - 1) / span = R, the trace's shape kept; --time-scale: every time multiplied
    fast = arrivals(source(trace=str(TRACES / name), rate=7.0))
    assert (len(fast) - 1) / fast[-1] == pytest.approx(7.0, rel=1e-12)
    assert np.allclose(fast / fast[-1], want / want[-1], rtol=0, atol=1e-12)
    half = arrivals(source(trace=str(TRACES / name), time_scale=0.5))
    assert np.allclose(half, want * 0.5, rtol=1e-15, atol=1e-12)
    # a prefix at --rate is rescaled by its own span
    head = arrivals(source(trace=str(TRACES / name), rate=7.0, num_requests=300))
    assert (len(head) - 1) / head[-1] == pytest.approx(7.0, rel=1e-12)


@needs_data
def test_vidur_trace_times_preserved():
    rows = list(csv.DictReader(open(TRACES / "vidur_splitwise_conv.csv")))
    want = np.array([float(r["arrived_at"]) for r in rows])
    got = arrivals(source(trace=str(TRACES / "vidur_splitwise_conv.csv"), rate=None))
    assert np.allclose(got, want - want[0], rtol=0, atol=1e-9)


@needs_data
@pytest.mark.parametrize("name", ["conversation_trace.jsonl", "synthetic_trace.jsonl"])
def test_mooncake_milliseconds_become_seconds(name):
    rows = [json.loads(line) for line in open(TRACES / "mooncake" / name)]
    want = (np.array([r["timestamp"] for r in rows], float) - rows[0]["timestamp"]) / 1000.0
    reqs = list(source(trace=str(TRACES / "mooncake" / name), rate=None).initial())
    assert np.allclose([r.arrival for r in reqs], want, rtol=0, atol=1e-9)
    assert [r.prompt_len for r in reqs] == [r["input_length"] for r in rows]
    assert [r.output_len for r in reqs] == [r["output_length"] for r in rows]


@needs_data
def test_a_tiled_trace_keeps_its_rows_and_mean_rate():
    rows = list(csv.DictReader(open(TRACES / "vidur_splitwise_conv.csv")))
    t0 = np.array([float(r["arrived_at"]) for r in rows])
    n, span = len(t0), t0[-1] - t0[0]
    period = span * n / (n - 1)  # documented: copies one mean gap apart
    reqs = list(source(trace=str(TRACES / "vidur_splitwise_conv.csv"), time_scale=1.0,
                       duration=2.5 * period).initial())
    t = np.array([r.arrival for r in reqs])
    assert len(t) == 2 * n + int(((t0 - t0[0]) < 0.5 * period).sum())
    assert np.allclose(t[n:2 * n], t0 - t0[0] + period, rtol=0, atol=1e-6)
    assert [r.prompt_len for r in reqs[n:2 * n]] == [int(r["num_prefill_tokens"]) for r in rows]


# ---- lengths -----------------------------------------------------------------------------------------------------

def test_lognormal_median_and_sigma():
    p, o = Lognormal(300, 0.8, 40, 1.3).sample(200_000, np.random.default_rng(1))
    assert np.median(p) == pytest.approx(300, rel=0.02) and np.median(o) == pytest.approx(40, rel=0.03)
    assert np.log(p[p > 5]).std() == pytest.approx(0.8, rel=0.03)


def test_zipf_probabilities_match_the_truncated_power_law():
    a, top, n = 1.3, 50, 300_000
    p, _ = Zipf(a, top, 2.0, 10).sample(n, np.random.default_rng(2))
    pmf = np.arange(1, top + 1, dtype=float) ** -a
    pmf /= pmf.sum()
    freq = np.bincount(p, minlength=top + 1)[1:] / n
    assert np.all(np.abs(freq - pmf) <= 5 * np.sqrt(pmf * (1 - pmf) / n) + 1e-12)


def test_geometric_output_mean_and_support():
    _, o = Geometric(285, 201.0).sample(200_000, np.random.default_rng(3))
    assert o.min() >= 1 and o.mean() == pytest.approx(201.0, rel=0.01)
    # P(X = 1) = 1/mean for a geometric on {1, 2, ...}
    assert (o == 1).mean() == pytest.approx(1 / 201.0, abs=5 * math.sqrt(1 / 201 / 200_000))


def test_capped_keeps_the_prompt_and_clips_the_output():
    capped = Capped(Lognormal(3000, 1.0, 800, 1.0), 4096)
    raw_p, raw_o = capped.dist.sample(50_000, np.random.default_rng(4))
    p, o = capped.sample(50_000, np.random.default_rng(4))
    assert np.array_equal(p, np.minimum(raw_p, 4095))
    assert np.array_equal(o, np.minimum(raw_o, 4096 - p))
    assert ((p + o) <= 4096).all() and (o >= 1).all()


@needs_data
@pytest.mark.parametrize("name", sorted(LENGTH_PRESETS))
def test_preset_never_goes_past_its_source_files_longest_request(name):
    """A preset stands for its file: a request longer (prompt + output) than any row of a file built under a
    context cap is not in that workload. Vidur's arXiv file holds no row above 4096 (Llama-2's context); the
    quantile table used to pair long prompts with long summaries up to 4504 tokens (0.86% of draws)."""
    rows = list(csv.DictReader(open(TRACES / LENGTH_PRESETS[name]["source"])))
    keys = [k for k in rows[0] if k in ("num_prefill_tokens", "ContextTokens", "question_length")][0], \
        [k for k in rows[0] if k in ("num_decode_tokens", "GeneratedTokens", "answer_length")][0]
    totals = np.array([int(r[keys[0]]) + int(r[keys[1]]) for r in rows])
    p, o = length_preset(name).sample(200_000, np.random.default_rng(6))
    over = ((p + o) > totals.max()).mean()
    # a file built under a cap (arXiv 4096, ShareGPT 8192) is never exceeded; the others (no cap) by a rare
    # interpolated tail only
    if name in ("arxiv-summarization", "sharegpt"):
        cap = {"arxiv-summarization": 4096, "sharegpt": 8192}[name]
        assert totals.max() <= cap and (p + o).max() <= cap
    else:
        assert over < 0.001


@needs_data
@pytest.mark.parametrize("name", sorted(LENGTH_PRESETS))
def test_preset_means_match_the_source_file(name):
    rows = list(csv.DictReader(open(TRACES / LENGTH_PRESETS[name]["source"])))
    pk = [k for k in rows[0] if k in ("num_prefill_tokens", "ContextTokens", "question_length")][0]
    ok = [k for k in rows[0] if k in ("num_decode_tokens", "GeneratedTokens", "answer_length")][0]
    fp = np.array([max(1, int(r[pk])) for r in rows])
    fo = np.array([max(1, int(r[ok])) for r in rows])
    p, o = length_preset(name).sample(200_000, np.random.default_rng(7))
    assert p.mean() == pytest.approx(fp.mean(), rel=0.02) and o.mean() == pytest.approx(fo.mean(), rel=0.02)
    for q in (0.1, 0.5, 0.9):
        assert np.quantile(p, q) == pytest.approx(np.quantile(fp, q), rel=0.03, abs=1)
        assert np.quantile(o, q) == pytest.approx(np.quantile(fo, q), rel=0.03, abs=1)


def test_lengths_repeat_under_a_seed_and_differ_across_seeds():
    def lens(seed):
        return [(r.prompt_len, r.output_len) for r in source(rate=1.0, num_requests=100, seed=seed).initial()]
    assert lens(5) == lens(5) and lens(5) != lens(6)


# ---- sessions ----------------------------------------------------------------------------------------------------

def test_a_sessions_prompt_is_the_conversation_so_far_plus_the_drawn_text():
    dist = length_preset("lmsys")
    plan = DrawnSessions(dist, turns=4, num_requests=40, concurrency=3, seed=8)
    draws = dist.sample(40 + 3 * 3, streams(8, 3)[1])
    for s in range(3):
        turns = list(plan(s))
        text, out = draws[0][4 * s:4 * s + 4], draws[1][4 * s:4 * s + 4]
        assert [t.output_len for t in turns] == out.tolist()
        want = [int(text[0])]
        for k in range(1, 4):
            want.append(want[-1] + int(out[k - 1]) + int(text[k]))
        assert [t.prompt_len for t in turns] == want


# ---- shared prefix (inference-perf) ------------------------------------------------------------------------------

def shared_tokens(a, b) -> int:
    """Tokens two contents share from their start, piece by piece."""
    n = 0
    for (ia, la), (ib, lb) in zip(a.pieces(), b.pieces()):
        if ia != ib:
            break
        n += min(la, lb)
        if la != lb:
            break
    return n


PARAMS = dict(num_groups=3, num_prompts_per_group=4, system_prompt_len=37, question_len=11, output_len=5)


@pytest.mark.parametrize("seed", [0, 13])
def test_shared_prefix_groups_share_exactly_the_system_prompt(seed):
    reqs = list(source(workload="shared-prefix", workload_params=PARAMS, rate=3.0, num_requests=30,
                       seed=seed).initial())
    N = 12
    assert {r.prompt_len for r in reqs} == {48} and {r.output_len for r in reqs} == {5}
    assert all(reqs[i].content.pieces() == reqs[i + N].content.pieces() for i in range(30 - N))
    shared = collections.Counter(shared_tokens(reqs[i].content, reqs[j].content)
                                 for i in range(N) for j in range(i + 1, N))
    assert shared == {37: 3 * 6, 0: 66 - 18}  # C(4, 2) pairs in each of 3 groups share the system prompt


def test_shared_prefix_multi_turn_rounds_grow_by_reply_and_prompt():
    """inference-perf (7de5ef2): a user's context starts as its system prompt; each round sends context + ' ' +
    prompt (the prompt itself system prompt + question), and the context becomes that plus the reply."""
    S, Q, O = 37, 11, 5
    src = source(workload="shared-prefix", workload_params=dict(PARAMS, enable_multi_turn_chat=True), rate=3.0,
                 num_requests=36, seed=1)
    first = list(src.initial())
    assert len(first) == 12 and {r.prompt_len for r in first} == {S + S + Q}
    nxt = src.on_done(first[0], 100.0)[0]
    assert nxt.prompt_len == S + S + Q + O + S + Q and nxt.arrival >= 100.0


# ---- tenants -----------------------------------------------------------------------------------------------------

def test_tenants_shares_and_rates_as_declared():
    spec = {"a": 6.0, "b": 2.0, "c": 0.5}
    reqs = list(source(tenants=",".join(f"{k}:rate={v:g}" for k, v in spec.items()), num_requests=30_000,
                       seed=3).initial())
    names = collections.Counter(r.tenant.name for r in reqs)
    total = sum(spec.values())
    for k, rate in spec.items():
        share = rate / total
        assert names[k] / len(reqs) == pytest.approx(share, abs=5 * math.sqrt(share * (1 - share) / len(reqs)))
        t = np.array([r.arrival for r in reqs if r.tenant.name == k])
        assert (len(t) - 1) / (t[-1] - t[0]) == pytest.approx(rate, rel=5 / math.sqrt(len(t)))


def test_scaled_tenants_keep_the_mix_and_reach_the_total():
    spec = "a:rate=6,b:rate=2:weight=3,c:rate=0.5:priority=1"
    scaled = parse_tenants(scaled_tenants(spec, 17.0))
    before = parse_tenants(spec)
    assert math.fsum(s.rate for s in scaled) == pytest.approx(17.0, rel=1e-12)
    for s, b in zip(scaled, before):
        assert s.rate / 17.0 == pytest.approx(b.rate / 8.5, rel=1e-12) and s.tenant == b.tenant


def test_tenants_split_a_rate_schedule_in_their_ratio():
    reqs = list(source(tenants="a:rate=6,b:rate=2", rate_schedule="0:4,100:40", duration=200.0, seed=3).initial())
    got = collections.Counter((r.tenant.name, r.arrival >= 100) for r in reqs)
    for key, want in ((("a", False), 300), (("a", True), 3000), (("b", False), 100), (("b", True), 1000)):
        assert abs(got[key] - want) <= 5 * math.sqrt(want)

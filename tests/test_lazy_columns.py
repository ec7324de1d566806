"""Workload columns drawn in chunks equal the columns drawn whole, value for value, for every seed."""
from __future__ import annotations

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_source
from llmsched.request import SLO, Tier
from llmsched.workload.arrivals.processes import Constant, Gamma, Piecewise, Poisson, TraceReplay, TruncatedPoisson
from llmsched.workload.chunks import drawn_columns
from llmsched.workload.lengths.length_presets import LENGTH_PRESETS, length_preset
from llmsched.workload.lengths.distributions import Capped, Empirical, Fixed, Geometric, Lognormal, Uniform, Zipf
from llmsched.workload.tenants.tiers import assign_tiers, tier_chunks
from llmsched.workload.workload import ClosedLoop, Workload, streams

SIZES = (1, 3, 7, 64)  # chunk sizes: odd ones split the generators' 64-bit words between chunks
COUNTS = (0, 1, 6, 7, 100)  # none, fewer than a chunk, a multiple of one, not a multiple

# every numpy draw the workloads use, with parameters on both sides of the algorithms' branches
DRAWS = {
    "random": lambda g, k: g.random(k),
    "exponential": lambda g, k: g.exponential(0.2, k),
    "gamma shape < 1": lambda g, k: g.gamma(0.25, 2.0, k),
    "gamma shape 1": lambda g, k: g.gamma(1.0, 2.0, k),
    "gamma shape > 1": lambda g, k: g.gamma(4.0, 0.5, k),
    "lognormal": lambda g, k: g.lognormal(5.0, 1.2, k),
    "geometric": lambda g, k: g.geometric(1 / 201, k),
    "geometric p 0.5": lambda g, k: g.geometric(0.5, k),
    "integers 32-bit range": lambda g, k: g.integers(1, 100, k, dtype=np.int64),
    "integers 64-bit range": lambda g, k: g.integers(0, 2**40, k, dtype=np.int64),
    "permutation": lambda g, k: np.concatenate([g.permutation(5) for _ in range(k)] or [np.zeros(0, np.int64)]),
}


def rng(seed=11):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("name", list(DRAWS))
@pytest.mark.parametrize("size", SIZES)
def test_numpy_draws_continue_across_chunks(name, size):
    draw, n = DRAWS[name], 301
    g = rng()
    chunked = np.concatenate([draw(g, min(size, n - a)) for a in range(0, n, size)])
    assert np.array_equal(chunked, draw(rng(), n))


@pytest.mark.parametrize("size", SIZES)
def test_drawn_columns_start_each_column_where_the_one_before_ends(size):
    g, n = rng(), 50
    whole = (g.integers(1, 9, n), g.random(n), g.exponential(1.0, n))
    pieces = list(drawn_columns(n, rng(), size, lambda g, k: g.integers(1, 9, k), np.random.Generator.random,
                                lambda g, k: g.exponential(1.0, k)))
    for i, column in enumerate(whole):
        assert np.array_equal(np.concatenate([p[i] for p in pieces]), column)


ARRIVALS = {
    "poisson": Poisson(4.0), "truncated-poisson": TruncatedPoisson(4.0), "gamma cv 3": Gamma(4.0, 3.0),
    "gamma cv 0.5": Gamma(4.0, 0.5), "gamma cv 1": Gamma(4.0, 1.0), "constant": Constant(3.0),
    "piecewise": Piecewise([(0, 2.0), (1.5, 0.0), (3.0, 9.0)]),
    "piecewise ending at rate 0": Piecewise([(0, 2.0), (1000.0, 0.0)]),
    "trace replay": TraceReplay(np.cumsum(rng(3).exponential(0.3, 200)), target_rate=5.0),
}


@pytest.mark.parametrize("name", list(ARRIVALS))
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("n", COUNTS)
def test_arrival_chunks_are_the_arrival_times(name, size, n):
    process = ARRIVALS[name]
    pieces = list(process.chunks(n, rng(), size))
    assert all(0 < len(p) <= size for p in pieces)
    whole = process.times(n, rng())
    assert np.concatenate([np.zeros(0), *pieces]).tobytes() == whole.tobytes()  # bit for bit: the carried sums


@pytest.mark.parametrize("name", list(ARRIVALS))
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("duration", [0.01, 1.0, 13.0, 30.0])
def test_arrival_chunks_until_a_duration_are_the_arrival_times(name, size, duration):
    process = ARRIVALS[name]
    n, chunks = process.until_chunks(duration, rng(), size)
    whole = process.until(duration, rng())
    for _ in range(2):  # anew at each call
        pieces = list(chunks())
        assert n == len(whole) and all(0 < len(p) <= size for p in pieces)
        assert np.concatenate([np.zeros(0), *pieces]).tobytes() == whole.tobytes()


class ShortFirstDraw(Piecewise):
    """A rate schedule whose ``until`` must extend its first draw several times."""

    @staticmethod
    def _first_draw(total):
        return 3


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("duration", [0.01, 2.0, 13.0, 30.0])  # 0, 5, 99 and 246 arrivals: up to 7 extensions
def test_a_schedule_until_a_duration_extends_its_draw_as_until_does(size, duration):
    process = ShortFirstDraw([(0, 2.0), (1.5, 0.5), (3.0, 9.0)])
    n, chunks = process.until_chunks(duration, rng(), size)
    whole = process.until(duration, rng())
    assert n == len(whole)
    assert np.concatenate([np.zeros(0), *chunks()]).tobytes() == whole.tobytes()


def quantile_table():
    return length_preset("azure-conv")


LENGTHS = {
    "fixed": Fixed(100, 20), "uniform": Uniform(1, 4000, 1, 500), "uniform wide": Uniform(1, 2**40, 1, 3),
    "lognormal": Lognormal(500.0, 1.0, 100.0, 0.8), "zipf": Zipf(1.1, 4096, 0.9, 1024),
    "geometric": Geometric(285, 201.0), "quantile table": quantile_table(),
    "capped output": Capped(Lognormal(3000.0, 1.0, 500.0, 1.0), 4096),
    "capped proportional": Capped(Uniform(1, 8000, 1, 8000), 8192, how="proportional"),
    "empirical resample": Empirical([5, 9, 100, 7, 3], [1, 2, 3, 4, 5], draw="resample"),
    "empirical shuffle": Empirical([5, 9, 100, 7, 3], [1, 2, 3, 4, 5], draw="shuffle"),
    "empirical sequential": Empirical(np.arange(1, 101), np.arange(101, 201), draw="sequential"),
    **{f"preset {name}": length_preset(name) for name in LENGTH_PRESETS},
}


@pytest.mark.parametrize("name", list(LENGTHS))
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("n", COUNTS)
def test_length_chunks_are_the_sample(name, size, n):
    dist = LENGTHS[name]
    pieces = list(dist.chunks(n, rng(), size))
    assert all(0 < len(p) == len(o) <= size for p, o in pieces)
    prompts, outputs = dist.sample(n, rng())
    assert np.array_equal(np.concatenate([np.zeros(0, np.int64), *(p for p, _ in pieces)]), prompts)
    assert np.array_equal(np.concatenate([np.zeros(0, np.int64), *(o for _, o in pieces)]), outputs)


def test_sequential_lengths_refuse_too_many_rows_when_asked_not_when_reached():
    with pytest.raises(ValueError, match="has 100 rows but 101 were asked for"):
        LENGTHS["empirical sequential"].chunks(101, rng(), 7)


TIERS = (Tier("paid", SLO(tbt=0.1), 0.05), Tier("mid", SLO(tbt=0.3), 0.35), Tier("free", SLO(tbt=0.5), 0.6))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("n", COUNTS)
def test_tier_chunks_are_the_assignment(size, n):
    pieces = list(tier_chunks(n, TIERS, rng(), size))
    assert [t for p in pieces for t in p] == assign_tiers(n, TIERS, rng())


def columns_of(source):
    reqs = source.requests
    return ([r.arrival for r in reqs], [r.prompt_len for r in reqs], [r.output_len for r in reqs],
            [r.tier for r in reqs])


@pytest.mark.parametrize("workload", [
    dict(arrivals=Poisson(5.0), lengths=quantile_table(), num_requests=100, tiers=TIERS),
    dict(arrivals=Gamma(5.0, 2.0), lengths=Lognormal(500.0, 1.0, 100.0, 0.8), num_requests=33,
         max_total_tokens=700),
    dict(arrivals=Piecewise([(0, 2.0), (5.0, 8.0)]), lengths=Uniform(1, 99, 1, 9), num_requests=50),
    dict(arrivals=Poisson(5.0), lengths=quantile_table(), duration=9.0, tiers=TIERS),
    dict(arrivals=TraceReplay(np.arange(40.0)), lengths=Empirical(np.arange(1, 41), np.arange(1, 41),
                                                                   draw="sequential")),
], ids=["poisson tiers", "gamma capped", "piecewise", "duration", "trace replay"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_workload_source_gives_its_columns(workload, seed):
    wl = Workload(**workload, seed=seed)
    times, prompts, outputs, tiers = wl.columns()
    for chunk in (1, 7, 64):
        source = wl.source(chunk)
        assert len(source) == len(times)
        assert columns_of(source) == (times.tolist(), prompts.tolist(), outputs.tolist(), tiers)
        assert np.array_equal(source.arrival_times, times)
        assert all(np.array_equal(a, b) for a, b in zip(source.lengths, (prompts, outputs)))


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_a_closed_loop_issues_the_drawn_lengths_and_tiers_in_order(chunk):
    dist = quantile_table()
    loop = ClosedLoop(3, dist, 50, tiers=TIERS, seed=5, max_total_tokens=900, chunk=chunk)
    _, length_rng, tier_rng = streams(5, 3)
    prompts, outputs = Capped(dist, 900).sample(50, length_rng)
    expected = list(zip(prompts.tolist(), outputs.tolist(), assign_tiers(50, TIERS, tier_rng)))
    for _ in range(2):  # initial() restarts it
        issued = loop.initial()
        while loop.outstanding:
            issued += loop.on_done(next(r for r in issued if r.id in loop.outstanding), 1.0)
        assert [(r.prompt_len, r.output_len, r.tier) for r in issued] == expected
    assert np.array_equal(loop.prompts, prompts) and np.array_equal(loop.outputs, outputs)


def test_a_closed_loop_refuses_lengths_it_cannot_draw_when_built():
    with pytest.raises(ValueError, match="has 100 rows but 101 were asked for"):
        ClosedLoop(2, LENGTHS["empirical sequential"], 101)


def test_a_source_draws_again_from_the_start_at_each_run():
    source = build_source(RunConfig(workload="sharegpt", rate=3.0, num_requests=20, seed=4))
    assert columns_of(source) == columns_of(source)


def test_a_source_is_not_drawn_until_the_run_reaches_it():
    # one-column lengths: a two-column distribution's first pass runs through the whole first column
    wl = Workload(Gamma(5.0, 2.0), Geometric(100, 20.0), num_requests=10**12, tiers=TIERS)  # no memory holds it
    source = wl.source(16)
    first = [r for _, r in zip(range(40), source.initial())]
    assert len(source) == 10**12 and [r.id for r in first] == list(range(40))
    few = Workload(Gamma(5.0, 2.0), Geometric(100, 20.0), num_requests=40, tiers=TIERS)
    assert [(r.arrival, r.prompt_len, r.output_len, r.tier) for r in first] == \
        [(r.arrival, r.prompt_len, r.output_len, r.tier) for r in few.requests()]

"""The request log keeps the gap columns by batches: they must equal one request at a time, whatever is read when.

``RequestLog(keep_gaps=True)`` fills num_gaps, tbt_misses, gap_offset and max_gap for a batch of requests at
once; the reference below is the per-request computation ``record`` made before (and still makes in sketch mode).
"""
import math
from array import array

import numpy as np
import pytest

from llmsched.metrics.requests import FLOAT_FIELDS, INT_FIELDS, SETTLE_BATCH, RequestLog
from llmsched.request import SLO, Request, Status, Tier

TIERS = (Tier("any"), Tier("paid", SLO(tbt=0.05)), Tier("free", SLO(ttft=2.0, tbt=0.5, tpot=0.2)))


def reference(r: Request) -> tuple[int, int, float, np.ndarray]:
    """(num_gaps, tbt_misses, max_gap, gaps) of one request, as record computes them alone."""
    if len(r.token_times) < 2:
        return 0, 0, math.nan, np.empty(0)
    t = np.frombuffer(r.token_times, dtype=np.float64)
    gaps = t[1:] - t[:-1]
    misses = int(np.count_nonzero(gaps > r.slo.tbt)) if r.slo.tbt is not None else 0
    return len(gaps), misses, float(gaps.max()), gaps


def requests(n: int, seed: int) -> list[Request]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        r = Request(i, float(i), 10, int(rng.integers(1, 40)), TIERS[int(rng.integers(len(TIERS)))])
        tokens = int(rng.choice([0, 1, 2, int(rng.integers(3, 40))]))  # none, one, two, many
        times = np.cumsum(rng.choice([0.0, 0.01, 0.05, 0.3, 1.0], size=tokens)) + r.arrival
        r.token_times = array("d", times)
        r.num_generated = tokens
        r.status = Status.FINISHED if tokens == r.output_len else Status.REJECTED
        r.first_token = times[0] if tokens else math.nan
        r.finish = times[-1] if tokens else r.arrival
        r.reject_reason = "" if r.status is Status.FINISHED else "test"
        out.append(r)
    return out


@pytest.mark.parametrize("n,seed", [(1, 0), (7, 1), (SETTLE_BATCH - 1, 2), (SETTLE_BATCH, 3), (2 * SETTLE_BATCH + 5, 4)])
def test_batched_gap_columns_equal_one_request_at_a_time(n, seed):
    reqs = requests(n, seed)
    log = RequestLog(keep_gaps=True)
    peeks = set(np.random.default_rng(seed).integers(0, n, 5).tolist())
    for i, r in enumerate(reqs):
        log.record(r)
        if i in peeks:  # a reader mid-run sees complete rows
            assert len(log.column("num_gaps")) == len(log) == i + 1
    expected_offset = 0
    for i, r in enumerate(reqs):
        num, misses, peak, gaps = reference(r)
        assert log.column("num_gaps")[i] == num and log.column("tbt_misses")[i] == misses
        assert log.column("gap_offset")[i] == expected_offset
        got_peak = log.column("max_gap")[i]
        assert (math.isnan(peak) and math.isnan(got_peak)) or got_peak == peak
        assert np.frombuffer(log.gaps, dtype=np.float64)[expected_offset:expected_offset + num].tobytes() == gaps.tobytes()
        expected_offset += num
    assert len(log.gaps) == expected_offset
    mask = np.zeros(n, dtype=bool)
    mask[::3] = True
    assert log.gaps_of(mask).tobytes() == np.concatenate([reference(r)[3] for r in reqs[::3]] + [np.empty(0)]).tobytes()
    assert all(len(col) == n for col in log.cols.values())
    assert set(log.cols) == set(INT_FIELDS + FLOAT_FIELDS)


def test_sketch_mode_still_takes_each_request_as_it_comes():
    reqs = requests(50, 9)
    log = RequestLog(keep_gaps=False)
    for r in reqs:
        log.record(r)
    for i, r in enumerate(requests(50, 9)):
        num, misses, peak, _ = reference(r)
        assert log.column("num_gaps")[i] == num and log.column("tbt_misses")[i] == misses

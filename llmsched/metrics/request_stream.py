"""A request log that keeps no rows: each chunk of records is written to requests.csv and folded into running
totals, so a run of millions of requests holds only the requests in flight (``simulate --stream``).

The rows written are byte for byte those ``write_run`` writes from an in-memory ``RequestLog``. The totals are
what ``stream_summary`` needs: exact counts, integer sums, minima and maxima; float sums added chunk by chunk
(the last few bits may differ from numpy's one pairwise sum); TTFT, TPOT and E2E quantiles from a
``QuantileSketch`` (1% relative error) as TBT's already are in sketch mode.
"""
from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

from ..request import Status
from .pools import add_counts, pool_counts
from .requests import CACHED_FIELD, FLOAT_FIELDS, RequestLog, tier_columns
from .slo_met import meets
from .timeline import fold_requests
from .sketch import QuantileSketch
from .writers import CHUNK_ROWS, csv_line, request_columns, write_request_rows

LATENCIES = ("ttft", "tpot", "e2e")
TARGETS = ("ttft", "tbt", "tpot")
FINISHED, REJECTED, UNFINISHED = int(Status.FINISHED), int(Status.REJECTED), int(Status.UNFINISHED)
ABORTED = int(Status.ABORTED)


class Latency:
    """Count, sum, max and a quantile sketch of one latency over finished requests."""

    def __init__(self):
        self.count = 0
        self.total = 0.0
        self.max = -math.inf
        self.sketch = QuantileSketch()

    def add(self, values: np.ndarray) -> None:
        v = values[np.isfinite(values)]
        if len(v):
            self.count += len(v)
            self.total += float(v.sum())
            self.max = max(self.max, float(v.max()))
            self.sketch.add_many(v)


class TierTotals:
    def __init__(self):
        self.offered = self.finished = self.good = 0
        self.target_max = dict.fromkeys(TARGETS, -math.inf)
        self.with_target = dict.fromkeys(TARGETS, 0)
        self.meets = dict.fromkeys(TARGETS, 0)


class RequestStream(RequestLog):
    """Records like ``RequestLog`` in sketch mode; every ``CHUNK_ROWS`` records go to ``path`` (None: nowhere)
    and into the totals. ``close`` writes the rest."""

    streamed = True

    def __init__(self, path=None, cached: bool = False, tiers: tuple = ()):
        super().__init__(keep_gaps=False, cached=cached, tiers=tiers)
        self.path = path
        self._file = open(path, "w", newline="") if path is not None else None
        self._header: tuple[str, ...] | None = None  # written with the first rows: it has a tenant column when
        # the run has tenants, which its first request tells
        self.recorded = 0
        self.arrival_min, self.arrival_max = math.inf, -math.inf
        self.end_max = -math.inf  # latest finish recorded so far: no later request leaves before it
        self.unended_arrivals: list[float] = []  # requests without a finish time (their end is the run's end)
        self.sojourn_known = 0.0  # Σ (finish - arrival) over requests with a finish time
        self.status = Counter()
        self.reason_counts: Counter = Counter()
        self.reason_example: dict[str, str] = {}
        self.latency = {m: Latency() for m in LATENCIES}
        self.generated = self.prompt = 0  # tokens of finished requests
        self.cached = 0  # of them, prompt tokens a prefix cache held (runs with one)
        self.cached_by_tier = dict.fromkeys(tier_columns(tiers), 0)  # its split by tier (runs with KV tiers)
        self.good = 0
        self.preemptions = self.preemptions_finished = self.preempted = 0
        self.tier_totals: list[TierTotals] = []
        self.timeline = None  # a metrics.timeline.Timeline to fold the arrivals into, when the run keeps one
        self.pool_counts: dict = {}  # a fleet run's requests by pool (metrics/pools.py)
        self.closed = False

    def __len__(self) -> int:
        return self.recorded + len(self.cols["id"])

    def record(self, r) -> None:
        super().record(r)
        if r.finish > self.end_max:
            self.end_max = r.finish
        if len(self.cols["id"]) >= CHUNK_ROWS:
            self._flush()

    def close(self) -> None:
        """Write and fold the records still held; the log takes no more."""
        if not self.closed:
            self._flush()
            if self._file is not None:
                self._file.close()
            self.closed = True

    def span_end(self, end_time: float) -> float:
        """The last time a request left (a request without a finish time leaves at the run's end)."""
        return max(self.end_max, end_time) if self.unended_arrivals else self.end_max

    def column(self, name: str):
        raise ValueError(f"column {name!r}: a streamed run (--stream) keeps no request rows in memory; read "
                         f"{self.path or 'requests.csv'} or run without --stream")

    def _write_header(self) -> None:
        if self._header is None:
            self._header = request_columns(self)
            if self._file is not None:
                self._file.write(csv_line(self._header))
        elif self._header != request_columns(self):
            raise ValueError(f"{self.path}: a request with a tenant came after {self.recorded} without one; a "
                             f"streamed run's requests either all have tenants or none does")

    def _flush(self) -> None:
        n = len(self.cols["id"])
        self._write_header()
        if not n:
            return
        if self._file is not None:
            write_request_rows(self._file, self)
        self._fold()
        self.recorded += n
        for a in self.cols.values():
            del a[:]
        self.reasons.clear()

    def _fold(self) -> None:
        def col(name):
            return np.frombuffer(self.cols[name], dtype=np.float64 if name in FLOAT_FIELDS else np.int64)

        status = col("status")
        finished = status == FINISHED
        self.status.update(status.tolist())
        if self.pools is not None:
            add_counts(self.pool_counts, pool_counts(self.pools, col("replica"), status))
        arrival, finish = col("arrival"), col("finish")
        self.arrival_min = min(self.arrival_min, float(arrival.min()))
        self.arrival_max = max(self.arrival_max, float(arrival.max()))
        ended = np.isfinite(finish)
        if ended.any():
            self.end_max = max(self.end_max, float(finish[ended].max()))
            self.sojourn_known += float((finish[ended] - arrival[ended]).sum())
        self.unended_arrivals.extend(arrival[~ended].tolist())
        for rid, st in zip(col("id").tolist(), status.tolist()):
            if st != FINISHED:
                reason = self.reasons.get(rid, "(no reason given)")
                key = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", reason)
                self.reason_counts[key] += 1
                self.reason_example.setdefault(key, reason)
        for m in LATENCIES:
            self.latency[m].add(col(m)[finished])
        self.generated += int(col("generated")[finished].sum())
        self.prompt += int(col("prompt_len")[finished].sum())
        if CACHED_FIELD in self.cols:
            self.cached += int(col(CACHED_FIELD)[finished].sum())
            for name in self.cached_by_tier:
                self.cached_by_tier[name] += int(col(name)[finished].sum())
        pre = col("preemptions")
        self.preemptions += int(pre.sum())
        self.preemptions_finished += int(pre[finished].sum())
        self.preempted += int((pre > 0).sum())
        met = meets(col, finished)
        good = met["all"]
        self.good += int(good.sum())
        if self.timeline is not None:
            fold_requests(self.timeline, col, finished, good)
        tier = col("tier")
        while len(self.tier_totals) < len(self.tiers):
            self.tier_totals.append(TierTotals())
        for i in np.unique(tier).tolist():
            sel = tier == i
            t = self.tier_totals[i]
            t.offered += int(sel.sum())
            t.finished += int((sel & finished).sum())
            t.good += int((sel & good).sum())
            for m in TARGETS:
                target = col(f"{m}_slo")[sel]
                target = target[np.isfinite(target)]
                if len(target):
                    t.with_target[m] += len(target)
                    t.target_max[m] = max(t.target_max[m], float(target.max()))
                t.meets[m] += int(met[m][sel].sum())

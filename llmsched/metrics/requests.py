"""Per-request records, taken once when a request leaves a run, kept as typed columns.

Inter-token gaps (TBT samples) go into one flat array with per-request offsets, or,
for runs of millions of requests, only into per-tier quantile sketches.
"""
from __future__ import annotations

import math
from array import array

import numpy as np

from ..request import Request, Status
from .sketch import QuantileSketch

FLOAT_FIELDS = ("arrival", "first_scheduled", "first_token", "finish", "ttft", "tpot", "e2e",
                "max_gap", "ttft_slo", "tbt_slo", "tpot_slo")
INT_FIELDS = ("id", "replica", "tier", "status", "prompt_len", "output_len", "generated",
              "preemptions", "num_gaps", "tbt_misses", "gap_offset")
RECORD_ORDER = ("id", "replica", "tier", "status", "prompt_len", "output_len", "generated", "preemptions", "num_gaps",
                "tbt_misses", "gap_offset", "arrival", "first_scheduled", "first_token", "finish", "ttft", "tpot",
                "e2e", "max_gap", "ttft_slo", "tbt_slo", "tpot_slo")
assert sorted(RECORD_ORDER) == sorted(INT_FIELDS + FLOAT_FIELDS)
TBT_MISS_TOLERANCE = 0.01  # a request meets its TBT target if at most 1% of its gaps exceed it


class RequestLog:
    """Column store of requests that left the run (finished, rejected or unfinished)."""

    def __init__(self, keep_gaps: bool = True):
        self.keep_gaps = keep_gaps
        self.cols = {name: array("d") for name in FLOAT_FIELDS}
        self.cols.update({name: array("q") for name in INT_FIELDS})
        # record() appends a row through these bound methods (the columns are emptied in place, never replaced)
        self._append = tuple(self.cols[name].append for name in RECORD_ORDER)
        self.tiers: list[str] = []
        self._tier_index: dict[str, int] = {}
        self.gaps = array("d")
        self.sketches: dict[str, QuantileSketch] = {}
        self.reasons: dict[int, str] = {}  # request id -> why it was rejected or unfinished

    def __len__(self) -> int:
        return len(self.cols["id"])

    def record(self, r: Request) -> None:
        tier = self._tier_index.get(r.tier.name)
        if tier is None:
            tier = self._tier_index[r.tier.name] = len(self.tiers)
            self.tiers.append(r.tier.name)
        times = r.token_times
        finished = r.status is Status.FINISHED
        tbt = r.slo.tbt
        if len(times) > 1:
            t = np.frombuffer(times, dtype=np.float64)
            gaps = t[1:] - t[:-1]  # np.diff's own arithmetic, without its call overhead
            num_gaps = len(gaps)
            max_gap = float(gaps.max())
            misses = int(np.count_nonzero(gaps > tbt)) if tbt is not None else 0
        else:
            gaps, num_gaps, max_gap, misses = None, 0, math.nan, 0
        slo = r.slo
        (a_id, a_replica, a_tier, a_status, a_prompt, a_output, a_generated, a_preemptions, a_gaps, a_misses,
         a_offset, a_arrival, a_scheduled, a_first, a_finish, a_ttft, a_tpot, a_e2e, a_max_gap, a_ttft_slo,
         a_tbt_slo, a_tpot_slo) = self._append
        a_id(r.id)
        a_replica(r.replica)
        a_tier(tier)
        a_status(int(r.status))
        a_prompt(r.prompt_len)
        a_output(r.output_len)
        a_generated(r.num_generated)
        a_preemptions(r.preemptions)
        a_gaps(num_gaps)
        a_misses(misses)
        a_offset(len(self.gaps))
        a_arrival(r.arrival)
        a_scheduled(r.first_scheduled)
        a_first(r.first_token)
        a_finish(r.finish)
        a_ttft(r.first_token - r.arrival)
        a_tpot((times[-1] - times[0]) / (r.output_len - 1) if finished and r.output_len > 1 else math.nan)
        a_e2e(r.finish - r.arrival if finished else math.nan)
        a_max_gap(max_gap)
        a_ttft_slo(math.nan if slo.ttft is None else float(slo.ttft))
        a_tbt_slo(math.nan if tbt is None else float(tbt))
        a_tpot_slo(math.nan if slo.tpot is None else float(slo.tpot))
        if r.status is not Status.FINISHED and r.reject_reason:
            self.reasons[r.id] = r.reject_reason
        if gaps is None:
            return
        if self.keep_gaps:
            self.gaps.frombytes(gaps.tobytes())
        else:
            sk = self.sketches.get(r.tier.name)
            if sk is None:
                sk = self.sketches[r.tier.name] = QuantileSketch()
            sk.add_many(gaps, owned=True, peak=max_gap)  # gaps is this call's own array
            r.token_times = array("d")  # the run keeps no per-token data in sketch mode

    def column(self, name: str) -> np.ndarray:
        return np.frombuffer(self.cols[name], dtype=np.float64 if name in FLOAT_FIELDS else np.int64)

    def gaps_of(self, mask: np.ndarray | None = None) -> np.ndarray:
        """All TBT gaps of the requests selected by ``mask`` (all when None); needs keep_gaps."""
        if not self.keep_gaps:
            raise ValueError("this run kept no per-token gaps (sketch mode): use its sketches")
        all_gaps = np.frombuffer(self.gaps, dtype=np.float64)
        if mask is None:
            return all_gaps
        # each request's gaps sit contiguously, in record order: expand the request mask to a gap mask (one byte
        # per gap, where an index array would take eight)
        return all_gaps[np.repeat(np.asarray(mask, dtype=bool), self.column("num_gaps"))]

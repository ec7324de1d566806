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
CACHED_FIELD = "cached_tokens"  # int, only in runs with a prefix cache (their requests carry content)
SENT_FIELD = "sent"  # float, during a client-boundary run only (metrics/client_side.py replaces it)
CLIENT_FIELDS = ("queued", "engine_ttft", "engine_tpot", "engine_e2e")  # float, a client-boundary run's engine figures
# a disaggregated run's: each request's prefill instance (-1: none) and its KV transfer (NaN, NaN, 0: none)
TRANSFER_FIELDS = ("prefill_replica", "transfer_start", "transfer_end", "transfer_bytes")
FLOAT_COLUMNS = FLOAT_FIELDS + (SENT_FIELD,) + CLIENT_FIELDS + ("transfer_start", "transfer_end")
TIER_CACHED_PREFIX = "cached_tokens_"  # + gpu and each KV tier's medium: only in runs with tiers below the GPU
TBT_MISS_TOLERANCE = 0.01  # a request meets its TBT target if at most 1% of its gaps exceed it
GAP_FIELDS = ("num_gaps", "tbt_misses", "gap_offset", "max_gap")  # filled in per batch when the gaps are kept
SETTLE_BATCH = 256  # requests whose gap columns are computed together (its temporaries raise the peak)


def tier_columns(tiers) -> tuple[str, ...]:
    """requests.csv's split of ``cached_tokens`` in a run with KV tiers ``tiers`` (their media): the GPU's part,
    then each tier's."""
    return tuple(TIER_CACHED_PREFIX + name for name in ("gpu", *tiers)) if tiers else ()


def prefix_cache_stats(cached: int, prompt: int) -> dict:
    """A run with a prefix cache: its finished requests' prompt tokens found cached at their first admission
    (vLLM's num_cached_tokens), and their share of the prompt tokens (the hit rate)."""
    return {"cached_tokens": cached, "prompt_tokens": prompt, "hit_rate": cached / prompt if prompt else math.nan}


class RequestLog:
    """Column store of requests that left the run (finished, rejected or unfinished)."""

    def __init__(self, keep_gaps: bool = True, cached: bool = False, client: bool = False, tiers: tuple = ()):
        self.keep_gaps = keep_gaps
        self._cols = {name: array("d") for name in FLOAT_FIELDS}
        self._cols.update({name: array("q") for name in INT_FIELDS})
        # ``cached``: a run with a prefix cache records each request's cached prompt tokens too (CACHED_FIELD)
        self._append_cached = None
        if cached:
            self._cols[CACHED_FIELD] = array("q")
            self._append_cached = self._cols[CACHED_FIELD].append
        # ``client``: a client-boundary run records each request's send time too (metrics/client_side.py then
        # turns the engine's figures into the client's)
        self._append_sent = None
        if client:
            self._cols[SENT_FIELD] = array("d")
            self._append_sent = self._cols[SENT_FIELD].append
        # with KV tiers below the GPU, the cached tokens split by where they were found (tier_columns)
        self.tier_names = tuple(tiers)
        self._append_tier_cached = None
        if cached and tiers:
            for name in tier_columns(tiers):
                self._cols[name] = array("q")
            self._append_tier_cached = tuple(self._cols[name].append for name in tier_columns(tiers))
        # record() appends a row through these bound methods (the columns are emptied in place, never replaced)
        self._append_now = tuple(self._cols[name].append for name in RECORD_ORDER if name not in GAP_FIELDS)
        self._append_gap = tuple(self._cols[name].append for name in GAP_FIELDS)
        self.tiers: list[str] = []
        self._tier_index: dict[str, int] = {}
        # tenants (runs that have them): each tenant's name, weight and priority, and per row its index in
        # ``tenants`` (-1: a request without one); the column joins ``cols`` with the first tenant, so a run without
        # tenants has exactly the columns it always had, each with a row per request
        self.tenants: list[str] = []
        self.tenant_info: dict[str, dict] = {}
        self._tenant_index: dict[str, int] = {}
        self._tenant_column = array("q")
        self._tenant_append = self._tenant_column.append
        self._gaps = array("d")
        self.sketches: dict[str, QuantileSketch] = {}
        self.reasons: dict[int, str] = {}  # request id -> why it was rejected or unfinished
        # a fleet run: (pool names, each replica's pool as an index into them), growing as replicas are added;
        # requests.csv then has a pool column (metrics/pools.py)
        self.pools: tuple[list[str], list[int]] | None = None
        self._transfer_of = None  # a disaggregated run's: request id -> its TRANSFER_FIELDS (enable_transfers)
        # keep_gaps: the token times of the requests recorded since the last settle, and their TBT targets; their
        # gap columns (GAP_FIELDS) are filled in by _settle, for a batch at a time
        self._pending_times: list[array] = []
        self._pending_tbt: list[float] = []

    @property
    def cols(self) -> dict[str, array]:
        """The columns, every row complete."""
        if self._pending_times:
            self._settle()
        return self._cols

    @property
    def gaps(self) -> array:
        """Every kept inter-token gap, each request's contiguous, in record order."""
        if self._pending_times:
            self._settle()
        return self._gaps

    def __len__(self) -> int:
        return len(self._cols["id"])

    def record(self, r: Request) -> None:
        tenant = r.tenant
        if tenant is not None:
            k = self._tenant_index.get(tenant.name)
            self._tenant_append(self._add_tenant(tenant) if k is None else k)
        elif self.tenants:
            self._tenant_append(-1)
        tier = self._tier_index.get(r.tier.name)
        if tier is None:
            tier = self._tier_index[r.tier.name] = len(self.tiers)
            self.tiers.append(r.tier.name)
        times = r.token_times
        finished = r.status is Status.FINISHED
        tbt = r.slo.tbt
        slo = r.slo
        (a_id, a_replica, a_tier, a_status, a_prompt, a_output, a_generated, a_preemptions, a_arrival, a_scheduled,
         a_first, a_finish, a_ttft, a_tpot, a_e2e, a_ttft_slo, a_tbt_slo, a_tpot_slo) = self._append_now
        a_id(r.id)
        a_replica(r.replica)
        a_tier(tier)
        a_status(int(r.status))
        a_prompt(r.prompt_len)
        a_output(r.output_len)
        a_generated(r.num_generated)
        a_preemptions(r.preemptions)
        a_arrival(r.arrival)
        a_scheduled(r.first_scheduled)
        a_first(r.first_token)
        a_finish(r.finish)
        a_ttft(r.first_token - r.arrival)
        a_tpot((times[-1] - times[0]) / (r.output_len - 1) if finished and r.output_len > 1 else math.nan)
        a_e2e(r.finish - r.arrival if finished else math.nan)
        a_ttft_slo(math.nan if slo.ttft is None else float(slo.ttft))
        a_tbt_slo(math.nan if tbt is None else float(tbt))
        a_tpot_slo(math.nan if slo.tpot is None else float(slo.tpot))
        if self._append_cached is not None:
            self._append_cached(r.num_cached)
            appends = self._append_tier_cached
            if appends is not None:  # (a replica of a fleet may keep fewer tiers than the log's: none found there)
                split = r.tier_cached or ()
                appends[0](r.num_cached - sum(split))
                for i in range(1, len(appends)):
                    appends[i](split[i - 1] if i <= len(split) else 0)
        if self._append_sent is not None:
            self._append_sent(r.sent)
        if self._transfer_of is not None:
            for append, value in zip(self._append_transfer, self._transfer_of(r.id)):
                append(value)
        if r.status is not Status.FINISHED and r.reject_reason:
            self.reasons[r.id] = r.reject_reason
        if self.keep_gaps:  # the gap columns for a batch of requests at once (_settle: the same values)
            self._pending_times.append(times)
            self._pending_tbt.append(math.inf if tbt is None else tbt)  # no target: no gap exceeds it
            if len(self._pending_times) >= SETTLE_BATCH:
                self._settle()
            return
        # sketch mode: each request's gaps now, into its tier's sketch (whose mean sums them request by request)
        a_gaps, a_misses, a_offset, a_max_gap = self._append_gap
        a_offset(len(self._gaps))
        if len(times) < 2:
            a_gaps(0)
            a_misses(0)
            a_max_gap(math.nan)
            return
        t = np.frombuffer(times, dtype=np.float64)
        gaps = t[1:] - t[:-1]  # np.diff's own arithmetic, without its call overhead
        max_gap = float(gaps.max())
        a_gaps(len(gaps))
        a_misses(int(np.count_nonzero(gaps > tbt)) if tbt is not None else 0)
        a_max_gap(max_gap)
        sk = self.sketches.get(r.tier.name)
        if sk is None:
            sk = self.sketches[r.tier.name] = QuantileSketch()
        sk.add_many(gaps, owned=True, peak=max_gap)  # gaps is this call's own array
        r.token_times = array("d")  # the run keeps no per-token data in sketch mode

    def enable_transfers(self, transfer_of) -> None:
        """A disaggregated run: each request recorded from now on carries ``transfer_of(id)``, its prefill instance
        and KV transfer (TRANSFER_FIELDS), in requests.csv after its pool."""
        if len(self._cols["id"]):
            raise ValueError("enable_transfers before the first request is recorded")
        for name in TRANSFER_FIELDS:
            self._cols[name] = array("d" if name in FLOAT_COLUMNS else "q")
        self._append_transfer = tuple(self._cols[name].append for name in TRANSFER_FIELDS)
        self._transfer_of = transfer_of

    def _add_tenant(self, tenant) -> int:
        """A tenant's index, from its first request; rows recorded before any tenant get -1."""
        k = self._tenant_index[tenant.name] = len(self.tenants)
        self.tenants.append(tenant.name)
        self.tenant_info[tenant.name] = {"weight": float(tenant.weight), "priority": tenant.priority}
        column = self._cols["tenant"] = self._tenant_column
        column.extend([-1] * (len(self._cols["id"]) - len(column)))
        return k

    def _settle(self) -> None:
        """The gap columns of the pending requests, in record order: each request's gaps are the differences of
        its consecutive token times (the same subtraction as one request at a time), their count, their maximum
        (NaN without gaps), how many exceed its TBT target and where they start in ``gaps``."""
        times, targets = self._pending_times, self._pending_tbt
        self._pending_times, self._pending_tbt = [], []
        lengths = np.fromiter(map(len, times), dtype=np.int64, count=len(times))
        num_gaps = np.maximum(lengths - 1, 0)
        t = np.frombuffer(b"".join(times), dtype=np.float64)
        seams = np.cumsum(lengths)[:-1] - 1  # the difference across two requests' times belongs to neither
        gaps = np.delete(t[1:] - t[:-1], seams[(seams >= 0) & (seams < len(t) - 1)])
        starts = np.cumsum(num_gaps) - num_gaps  # each request's first gap in ``gaps``
        has = num_gaps > 0
        max_gap = np.full(len(times), math.nan)
        misses = np.zeros(len(times), dtype=np.int64)
        if has.any():
            first = starts[has]
            max_gap[has] = np.maximum.reduceat(gaps, first)
            limits = np.asarray(targets, dtype=np.float64)
            if (limits[has] < math.inf).any():  # no gap exceeds an infinite target (no TBT SLO)
                misses[has] = np.add.reduceat(gaps > np.repeat(limits, num_gaps), first, dtype=np.int64)
        c = self._cols
        c["num_gaps"].frombytes(num_gaps.tobytes())
        c["tbt_misses"].frombytes(misses.tobytes())
        c["gap_offset"].frombytes((starts + len(self._gaps)).tobytes())
        c["max_gap"].frombytes(max_gap.tobytes())
        self._gaps.frombytes(memoryview(gaps).cast("B"))  # the largest: appended without a bytes copy

    def replace_gaps(self, gaps: np.ndarray) -> None:
        """Every kept gap anew (the caller has rewritten the gap columns to match)."""
        self._gaps = array("d", np.asarray(gaps, dtype=np.float64).tobytes())

    def column(self, name: str) -> np.ndarray:
        return np.frombuffer(self.cols[name], dtype=np.float64 if name in FLOAT_COLUMNS else np.int64)

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

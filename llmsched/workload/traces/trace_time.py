"""A trace replayed in time: at its own timestamps, compressed or stretched (``time_scale``, or a target rate),
tiled back to back to fill a longer run, and optionally run through a rate schedule.

**Tiles.** Copy k of a trace of n arrivals spanning S seconds (after scaling) is shifted by ``k * P``, where ``P = S
* n / (n - 1)``: the span plus one mean gap, so the gap across a tile boundary is the trace's mean gap and the tiled
trace keeps the trace's mean rate ``n / P``. Request ids run on (copy k's row i is request ``k * n + i``) and each
copy's rows keep their lengths.

**A rate schedule over a trace.** The trace (tiled) is read as the trace's own sequence of arrivals in *its* time,
and that time is bent so the expected count follows the schedule: the request at trace time u arrives at
``Lambda^-1(u * n / P)``, Lambda the schedule's cumulative rate. Each copy of the trace takes n expected arrivals of
the schedule, so a diurnal schedule of mean rate R plays a copy of an hour-long trace of n requests every n / R
seconds, and the trace's own burstiness within the hour is kept, stretched where the schedule's rate is low and
compressed where it is high (the time-rescaling theorem of ``rate_shape.py``, applied to a recorded process: the
method of Gerhardt and Nelson, cited in ``modulated.py``, with the trace as the base process). A schedule whose
rate falls to 0 for good offers only so many arrivals: a trace longer than that is an error naming both counts.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from llmsched.request import DEFAULT_TIER
from llmsched.workload.arrivals.processes import ArrivalProcess, TraceReplay, check_count, check_duration
from llmsched.workload.chunks import CHUNK, check_chunk
from llmsched.workload.lengths.distributions import Empirical
from llmsched.workload.arrivals.rate_shape import RateShape
from llmsched.workload.traces.readers import TraceError
from llmsched.workload.workload import Workload, replay


class TracePlay(ArrivalProcess):
    """``replay``'s (rescaled) times repeated back to back, optionally through ``shape`` (module docstring); the
    generator is not used."""

    def __init__(self, replay: TraceReplay, shape: RateShape | None = None, source: str = "the trace"):
        base = replay.times(len(replay))
        n = len(base)
        if n < 2 or base[-1] <= 0:
            raise ValueError(f"{source}: a trace must have two arrivals at different times to be tiled or run "
                             f"through a rate schedule (it has {n} spanning {float(base[-1]) if n else 0:g} s)")
        self.base, self.n, self.source = base, n, source
        self.period = float(base[-1]) * n / (n - 1)
        self.shape = shape
        self.replay = replay

    @property
    def rate(self) -> float:
        """Arrivals per second of the tiled trace (before any schedule)."""
        return self.n / self.period

    def _units(self, start: int, count: int) -> np.ndarray:
        """Trace time (or, with a schedule, expected-count units) of requests ``start .. start + count - 1``."""
        idx = np.arange(start, start + count)
        copy, row = np.divmod(idx, self.n)
        if self.shape is None:
            return self.base[row] + copy * self.period
        return (self.base[row] + copy * self.period) * self.rate

    def _clock(self, units: np.ndarray) -> np.ndarray:
        return units if self.shape is None else self.shape.inverse(units)

    def check_reach(self, count: int) -> None:
        """A schedule that falls to 0 for good must offer the first ``count`` requests their places."""
        if self.shape is None or count == 0:
            return
        last = float(self._units(count - 1, 1)[0])
        if last >= self.shape.total:
            raise ValueError(f"the rate schedule never reaches the trace's end: it offers {self.shape.total:.6g} "
                             f"expected arrivals in all (its rate is 0 from {self.shape.end:g} s on), and "
                             f"{source_count(count, self.n)} of {self.source} need {last:.6g}; lengthen the "
                             f"schedule, or replay less (--num-requests, --duration)")

    def times(self, n: int, rng: np.random.Generator | None = None) -> np.ndarray:
        n = check_count(n)
        self.check_reach(n)
        return self._clock(self._units(0, n))

    def chunks(self, n, rng=None, size=CHUNK):
        n, size = check_count(n), check_chunk(size)
        self.check_reach(n)
        return (self._clock(self._units(a, min(size, n - a))) for a in range(0, n, size))

    def count_until(self, duration: float) -> int:
        """How many requests arrive before ``duration``: whole copies counted, the last one searched."""
        check_duration(duration)
        limit = duration if self.shape is None else float(self.shape.cumulative(duration))
        copies = math.floor(limit / (self.period if self.shape is None else self.n))
        count = copies * self.n + int(np.searchsorted(self._units(copies * self.n, self.n), limit, side="left"))
        while count and float(self._units(count - 1, 1)[0]) >= limit:  # a rounding at a copy's edge
            count -= 1
        return count

    def until(self, duration: float, rng: np.random.Generator | None = None) -> np.ndarray:
        return self.times(self.count_until(duration))

    def until_chunks(self, duration, rng=None, size=CHUNK):
        n = self.count_until(duration)
        return n, lambda: self.chunks(n, size=size)

    def describe(self) -> dict:
        out = {"kind": "trace-play", "trace": self.replay.describe(), "rows": self.n, "tile_period": self.period}
        if self.shape is not None:
            out["shape"] = self.shape.describe()
        return out


def source_count(count: int, rows: int) -> str:
    """'19366 requests' or '40000 requests (2.07 copies)'."""
    return f"{count} requests" + (f" ({count / rows:.3g} copies)" if count > rows else "")



def play(trace, target_rate: float | None = None, time_scale: float | None = None, shape: RateShape | None = None,
         num_requests: int | None = None, duration: float | None = None, tiers=(DEFAULT_TIER,),
         max_total_tokens: int | None = None, seed: int = 0, block_size: int | None = None) -> Workload:
    """``trace`` (a Trace read with arrival times) played in time (module docstring): rescaled to ``target_rate``
    or by ``time_scale``, through ``shape`` when given, tiled as far as ``num_requests`` or ``duration`` need
    (neither: the trace once). Requests beyond the trace's rows repeat its lengths; a trace that names its prompts'
    contents or sessions is not tiled (its copies would share every prompt)."""
    where = str(trace.source)
    base = replay(trace, block_size=block_size)  # the trace's checks, its lengths and contents
    try:
        process = TracePlay(TraceReplay(trace.arrivals, target_rate=target_rate, time_scale=time_scale), shape,
                            where)
    except ValueError as e:
        raise TraceError(f"{where}: {e}") from None
    count = num_requests if num_requests is not None else (
        process.count_until(duration) if duration is not None else len(trace))
    if count > len(trace) and (base.contents is not None or base.follow_ups is not None):
        raise TraceError(f"{where}: {source_count(count, len(trace))} would repeat this trace, whose requests name "
                         f"their prompts (or sessions), so each copy would find the first copy's prompts cached; "
                         f"replay at most {len(trace)} requests (--num-requests, a shorter --duration)")
    process.check_reach(count)  # now, not when the run reaches the end of the schedule
    lengths = Empirical.from_trace(trace, draw="cycle" if count > len(trace) else "sequential")
    if duration is None:
        num_requests = count
    return dataclasses.replace(base, arrivals=process, lengths=lengths, num_requests=num_requests,
                               duration=duration, tiers=tiers, max_total_tokens=max_total_tokens, seed=seed)

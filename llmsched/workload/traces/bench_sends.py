"""When a ``vllm bench serve`` result that recorded no send times sent its requests: drawn as the benchmark draws
them, from the settings the result keeps.

vLLM added ``start_times`` to the result in January 2026 (vllm-project/vllm#32667); every result saved before it
(``benchmarks/benchmark_serving.py`` and ``vllm bench serve`` up to v0.14) lists each request's lengths and
latencies but not when it was sent. The sends are then drawn as ``get_request`` (vllm/benchmarks/serve.py, read at
vLLM 0.32) draws them: request i's gap is ``gamma(shape=burstiness, scale=1 / (rate_i × burstiness))`` (an
exponential at burstiness 1, the constant ``1 / rate_i`` at burstiness inf), the sends are the gaps' running sum,
rescaled so that the last is at ``n / rate`` when the rate is fixed (vLLM's "close the gap" normalisation), and
``rate_i`` follows the ramp-up (``linear`` or ``exponential`` from ``ramp_up_start_rps`` to ``ramp_up_end_rps``
over the requests) when the result names one. A rate of ``inf`` sends every request at once. The draw is seeded
(``SEED``): the replay's sends are a draw of the same process as the real ones, not the real ones, so only the
latencies' distributions compare, request by request they do not.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .trace_error import TraceError

SEED = 0
RAMPS = ("linear", "exponential")


def request_rates(n: int, rate: float, ramp: tuple[str, float, float] | None) -> np.ndarray:
    """Each request's rate (``_get_current_request_rate``): ``rate``, or the ramp's at the request's progress."""
    if ramp is None:
        return np.full(n, rate)
    kind, start, end = ramp
    progress = np.arange(n) / max(n - 1, 1)
    if kind == "linear":
        return start + (end - start) * progress
    return start * (end / start) ** progress


def drawn_sends(n: int, rate: float, burstiness: float = 1.0, ramp: tuple[str, float, float] | None = None,
                seed: int = SEED) -> np.ndarray:
    """``n`` send times (seconds, the first at 0) as vllm bench serve draws them (module docstring)."""
    assert n >= 1 and rate > 0 and burstiness > 0
    if ramp is None and math.isinf(rate):
        return np.zeros(n)
    rates = request_rates(n, rate, ramp)
    if math.isinf(burstiness):
        gaps = 1.0 / rates
    else:
        gaps = np.random.default_rng(seed).gamma(shape=burstiness, scale=1.0 / (rates * burstiness))
    sends = np.cumsum(gaps)
    if ramp is None and sends[-1] > 0:
        sends *= (n / rate) / sends[-1]
    return sends - sends[0]


class Sends(NamedTuple):
    """How a result without send times is replayed."""
    times: np.ndarray       # each request's send, in the result's order (zeros for a closed loop)
    in_flight: int | None   # the cap a closed-loop replay keeps (None: an open loop at ``times``)
    span: float | None      # the run's measured duration (``duration``), where the result has one
    note: str               # how the sends were made, for the run's notes


UNRECORDED = "no start_times (vLLM's result has them since vllm-project/vllm#32667, January 2026)"


def unrecorded_sends(path, data: dict, n: int) -> Sends:
    """How a bench result without ``start_times`` is replayed. A cap below the request count with every request
    sent at once (``request_rate`` inf, vLLM's default with ``--max-concurrency``) is a closed loop: the requests in
    order, each sent when one in flight ends, which the replay runs as such. ``span`` is vLLM's
    ``benchmark_duration``: from before the first send (at its first gap, since vLLM added the normalisation; at 0
    before) to the last response."""
    rate = data.get("request_rate")
    if rate in ("inf", "Infinity"):
        rate = math.inf
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        got = "no request_rate" if rate is None else f"request_rate {rate!r}"
        raise TraceError(f"{path}: {UNRECORDED} and {got} to draw them from; add \"request_rate\" (the run's "
                         f"--request-rate, or \"inf\") to the file, or save the run again with a vLLM that records "
                         f"start_times (`vllm bench serve --save-result --save-detailed`)")
    burst = data.get("burstiness", 1.0)
    burst = 1.0 if burst is None else burst
    if isinstance(burst, bool) or not isinstance(burst, (int, float)) or not burst > 0:
        raise TraceError(f"{path}: burstiness is {burst!r}; vllm bench serve writes the gamma shape, a number > 0 "
                         f"(Infinity: constant gaps)")
    ramp = ramp_of(path, data)
    cap = data.get("max_concurrency")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise TraceError(f"{path}: max_concurrency is {cap!r}; write an integer >= 1, or null for no cap")
    span = data.get("duration")
    if isinstance(span, bool) or not isinstance(span, (int, float)) or not (span > 0 and math.isfinite(span)):
        span = None
    capped = cap is not None and cap < n
    if closed_loop_cap(data, n) is not None:
        return Sends(np.zeros(n), cap, span, f"{UNRECORDED}: {CLOSED_LOOP_NOTE.format(cap=cap)}")
    how = ("every request at once" if math.isinf(rate) and ramp is None else
           f"a {ramp[0]} ramp from {ramp[1]:g} to {ramp[2]:g} req/s" if ramp is not None else f"{rate:g} req/s")
    shape = "" if math.isinf(rate) and ramp is None else f", gamma burstiness {burst:g}, seed {SEED}"
    note = (f"{UNRECORDED}: the sends drawn as vllm bench serve draws them ({how}{shape}), so latencies compare "
            f"as distributions, not request by request")
    if capped:
        note += (f"; warning: its max_concurrency {cap} made sends wait for completions, which the drawn open loop "
                 f"does not; compare with care")
    return Sends(drawn_sends(n, rate, burst, ramp), None, span, note)


CLOSED_LOOP_NOTE = ("max_concurrency {cap} with every request sent at once, so replayed as that client sent them: "
                    "the requests in order, {cap} in flight, the next sent when one ends")


def closed_loop_cap(data: dict, n: int) -> int | None:
    """The requests a bench result's client held in flight when it ran a closed loop (``max_concurrency`` below
    its ``n`` requests, every one sent at once: ``request_rate`` inf, no ramp-up), which a replay keeps; else
    None (sends on a schedule, capped or not, are replayed at their times). The fields were checked before."""
    cap, rate = data.get("max_concurrency"), data.get("request_rate")
    unscheduled = rate in ("inf", "Infinity") or (isinstance(rate, float) and math.isinf(rate))
    if cap is None or cap >= n or not unscheduled or data.get("ramp_up_strategy") is not None:
        return None
    return cap


def ramp_of(path, data: dict) -> tuple[str, float, float] | None:
    """The result's ramp-up (``ramp_up_strategy``, ``ramp_up_start_rps``, ``ramp_up_end_rps``), or None."""
    kind = data.get("ramp_up_strategy")
    if kind is None:
        return None
    if kind not in RAMPS:
        raise TraceError(f"{path}: ramp_up_strategy is {kind!r}; vllm bench serve writes one of {', '.join(RAMPS)}")
    ends = [data.get("ramp_up_start_rps"), data.get("ramp_up_end_rps")]
    for key, v in zip(("ramp_up_start_rps", "ramp_up_end_rps"), ends):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 and math.isfinite(v)):
            raise TraceError(f"{path}: {key} is {v!r}; a ramp-up needs start and end rates > 0 (req/s)")
    return kind, float(ends[0]), float(ends[1])

"""How a serving benchmark's client sent its requests, from the fields of its result that a replay does not read
for the requests themselves, checked because they change what a replay of the recorded sends means.

validate-serving replays each request at its recorded send time (an open loop) when the client sent on a schedule
(vLLM bench serve's ``request_rate`` with its gamma ``burstiness``; GuideLLM's ``constant``, ``poisson`` and
``trace`` strategies). A client that held a fixed number of requests in flight (bench serve's ``max_concurrency``
with every request sent at once; GuideLLM's ``synchronous``, ``concurrent`` and ``throughput`` strategies) sent
each request when one ended, so a simulated server faster or slower than the real one would have been sent them
earlier or later: such a run is replayed as that closed loop, its requests in their send order. A cap on sends
that also followed a schedule (bench serve's ``max_concurrency`` with a finite rate) is replayed at the recorded
sends, with a warning. A result holding only some of its
requests (GuideLLM's request sampling; a bench file whose ``num_prompts`` or ``completed`` disagree with its lists)
is refused: replaying a sample offers the simulated server a fraction of the real load.

Sources: vllm/benchmarks/serve.py (``result_json``: ``request_rate`` is "inf" or a number, ``burstiness``,
``max_concurrency``, ``num_prompts``, ``completed``); GuideLLM's benchmark schema (``request_totals``,
``request_samples``, ``args``/``config`` ``.strategy.type_`` and ``.profile.type_``).
"""
from __future__ import annotations

from pathlib import Path

from .bench_sends import closed_loop_cap
from .trace_error import TraceError

OPEN_LOOP = ("constant", "poisson", "trace")  # GuideLLM strategies that send on a schedule (a trace's timestamps)
CLOSED_LOOP = ("synchronous", "concurrent", "throughput")  # ... that wait for completions
CLOSED_LOOP_WARNING = ("warning: the replay sends each request at its recorded time (an open loop), so "
                       "simulated latencies that differ from the real ones do not move the sends as they would "
                       "have; compare with care, or rerun the benchmark {fix}")


def bench_notes(path: Path, data: dict, n: int, recorded: bool = True, failed: int = 0) -> list[str]:
    """Notes (and refusals) from a vllm bench serve result's sending fields; ``n`` requests in its lists, ``failed``
    of them with an error; ``recorded``: it has its send times (else workload/traces/bench_sends.py draws them and
    notes how)."""
    notes = []
    for key, count, what in (("num_prompts", n, "request"), ("completed", n - failed, "success"),
                             ("failed", failed, "error")):
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TraceError(f"{path}: {key} is {value!r}, not a count of requests; fix it or remove the field")
        if value != count:
            what += "" if count == 1 else "es" if what.endswith("s") else "s"
            raise TraceError(f"{path}: {key} is {value} but its per-request lists hold {count} {what}; the file is "
                             f"truncated or merged: save the run again with `vllm bench serve --save-result "
                             f"--save-detailed`")
    rate = data.get("request_rate")
    if rate is not None and rate not in ("inf", "Infinity") and (
            isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0):
        raise TraceError(f"{path}: request_rate is {rate!r}; vllm bench serve writes a rate > 0 or \"inf\"")
    burst = data.get("burstiness")
    if burst is not None and (isinstance(burst, bool) or not isinstance(burst, (int, float)) or not burst > 0):
        raise TraceError(f"{path}: burstiness is {burst!r}; vllm bench serve writes the gamma shape, a number > 0 "
                         f"(Infinity: constant gaps)")
    cap = data.get("max_concurrency")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise TraceError(f"{path}: max_concurrency is {cap!r}; write an integer >= 1, or null for no cap")
    eos = data.get("ignore_eos")
    if eos is not None and not isinstance(eos, bool):
        raise TraceError(f"{path}: ignore_eos is {eos!r}; write true or false")
    # (without recorded sends, how they are drawn is bench_sends' note)
    if recorded and isinstance(rate, (int, float)) and not isinstance(rate, bool):
        notes.append(f"sent at {rate:g} req/s" + (f" (gamma burstiness {burst:g})" if burst is not None else "")
                     + "; replayed at the recorded send times")
    if cap is not None and cap < n and recorded and closed_loop_cap(data, n) is None:  # (else replayed as one)
        notes.append(f"max_concurrency {cap} with sends on a schedule: the client held at most {cap} requests in "
                     f"flight, so its sends waited for completions; "
                     + CLOSED_LOOP_WARNING.format(fix="without --max-concurrency, or with request_rate inf"))
    if eos is False:
        notes.append("ignore_eos false: outputs ended where the model stopped; replayed at their recorded lengths")
    return notes


def guidellm_sending(where: str, bench: dict, n: int) -> tuple[list[str], int | None]:
    """Notes (and refusals) from a GuideLLM benchmark's sampling and strategy, and the requests its client held in
    flight where it ran a closed loop (``synchronous``: 1; ``concurrent``: its ``streams``; ``throughput``: its
    ``max_concurrency``), which the replay keeps (else None); ``n`` successful requests listed."""
    totals = bench.get("request_totals")
    if totals is not None:
        count = totals.get("successful") if isinstance(totals, dict) else None
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise TraceError(f"{where}.request_totals.successful: {count!r}, not a count of requests; fix or "
                             f"remove request_totals")
        if count != n:
            raise TraceError(f"{where}.requests.successful: {n} of the {count} successful requests "
                             f"(request_totals); GuideLLM sampled them, and a replay of a sample offers a fraction "
                             f"of the load: rerun with every request kept (no --output-sampling / "
                             f"sample_requests=None)")
    if bench.get("request_samples") is not None:
        raise TraceError(f"{where}.request_samples: set, so the requests listed are a random sample; rerun with "
                         f"every request kept (no --output-sampling)")
    settings = bench.get("config") if isinstance(bench.get("config"), dict) else bench.get("args")
    if not isinstance(settings, dict) or settings.get("strategy") is None:
        return [], None
    strategy = settings["strategy"]
    kind = strategy.get("type_") if isinstance(strategy, dict) else None
    section = "config" if settings is bench.get("config") else "args"
    if kind not in OPEN_LOOP + CLOSED_LOOP:
        raise TraceError(f"{where}.{section}.strategy.type_: {kind!r} is not a GuideLLM strategy llmsched knows "
                         f"({', '.join(OPEN_LOOP + CLOSED_LOOP)}); replay a benchmark of one of those")
    profile = settings.get("profile")
    named = profile.get("type_") if isinstance(profile, dict) else None
    of = f" of a {named} profile" if isinstance(named, str) else ""
    if kind in OPEN_LOOP:
        return [f"GuideLLM {kind} strategy{of}: sent on a schedule; replayed at the recorded send times"], None
    key = {"synchronous": None, "concurrent": "streams", "throughput": "max_concurrency"}[kind]
    cap = 1 if key is None else strategy.get(key)
    if (cap is None and kind == "concurrent") or (cap is not None and (isinstance(cap, bool)
                                                                         or not isinstance(cap, int) or cap < 1)):
        raise TraceError(f"{where}.{section}.strategy.{key}: {cap!r}, not a number of requests in flight; GuideLLM "
                         f"writes it for a {kind} strategy")
    if cap is None:  # throughput without a cap: every request sent at once, as recorded
        return [f"GuideLLM {kind} strategy{of} without max_concurrency: sent as fast as it could; replayed at the "
                f"recorded send times"], None
    return [f"GuideLLM {kind} strategy{of}: a closed loop of {cap} in flight, replayed as one (the requests in "
            f"their send order, the next sent when one ends), not at the recorded sends"], cap

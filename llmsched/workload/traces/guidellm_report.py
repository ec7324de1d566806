"""A GuideLLM report read as a per-request server log, measured at the client.

``guidellm run --output kind=json`` writes a ``GenerativeBenchmarksReport`` (guidellm's
``benchmark/schemas/report.py``, schema version 2): ``benchmarks``, a list of ``GenerativeBenchmark``, each with
``requests.successful`` (and ``incomplete``, ``errored``), a list of ``GenerativeRequestStats``
(``schemas/request_stats.py``) whose computed fields are serialised: ``request_start_time`` (epoch seconds, the
client's send), ``request_latency`` (seconds), ``time_to_first_token_ms``, ``inter_token_latency_ms`` ((last −
first token)/(output − 1), vLLM's TPOT), ``prompt_tokens``, ``output_tokens``. A report of several benchmarks (a
sweep) is read one benchmark at a time (``benchmark``). Requests GuideLLM counted ``incomplete`` (started, then
cancelled when the benchmark's time or count ran out: ``status == "cancelled"`` with a ``resolve_start``,
guidellm's ``benchmark/schemas/accumulator.py``) loaded the server too: they are replayed, sent when they were,
with their prompt and the output tokens they got (at least 1), but have no latencies to compare (NaN). Errored
requests are replayed the same way where GuideLLM counted output tokens for them, and otherwise left out with a
note (workload/traces/failed_requests.py). ``cached_tokens`` (the reply's ``usage.prompt_tokens_details``, which vLLM
sends under ``--enable-prompt-tokens-details``) is vLLM's count of the prompt tokens it found cached, compared with
the replay's; requests still in flight when GuideLLM stopped are counted in ``scheduler_state.processing_requests``
and listed nowhere, which the log notes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .client_settings import guidellm_sending
from .conversations import is_turn_index, take_turns
from .failed_requests import FailedRequests, error_text
from .server_log import ServerLog, seconds, token_counts
from .trace_error import TraceError

REQUEST_FIELDS = ("request_start_time", "prompt_tokens", "output_tokens")
MEASURED_FIELDS = ("time_to_first_token_ms", "request_latency")


def benchmarks_of(path: Path, data: dict) -> list:
    bench = data.get("benchmarks")
    if not isinstance(bench, list) or not bench:
        shown = "an empty list" if bench == [] else type(bench).__name__
        raise TraceError(f"{path}: benchmarks is {shown}, not a list of one or more benchmarks; a GuideLLM report "
                         f"(guidellm run --output kind=json) lists its benchmarks there")
    return bench


def read_guidellm(path: Path, data: dict, measured: bool = False, benchmark: int | None = None) -> ServerLog:
    """Benchmark ``benchmark`` (default: the only one) of the GuideLLM report ``data`` read from ``path``."""
    bench = benchmarks_of(path, data)
    if benchmark is None:
        if len(bench) > 1:
            raise TraceError(f"{path}: holds {len(bench)} benchmarks (a sweep); validate-serving replays each, "
                             f"or save one benchmark's report to replay it")
        benchmark = 0
    where = f"{path}: benchmarks[{benchmark}]"
    requests = bench[benchmark].get("requests") if isinstance(bench[benchmark], dict) else None
    if not isinstance(requests, dict) or not isinstance(requests.get("successful"), list):
        raise TraceError(f"{where}.requests.successful: missing; save the report with its requests (GuideLLM keeps "
                         f"them unless --metrics sample_size=0)")
    errored = requests.get("errored") or []
    if not isinstance(errored, list):
        raise TraceError(f"{where}.requests.errored: {type(errored).__name__}, not a list of requests")
    rows = requests["successful"]
    if not rows:
        raise TraceError(f"{where}.requests.successful: no requests")
    cut = requests.get("incomplete") or []
    if not isinstance(cut, list):
        raise TraceError(f"{where}.requests.incomplete: {type(cut).__name__}, not a list of requests")
    failures = errored_requests(errored, len(rows) + len(cut) + len(errored))
    failed = [errored[i] for i in failures.replayed] if failures else []
    wanted = REQUEST_FIELDS + (MEASURED_FIELDS if measured else ())
    for i, row in enumerate(rows):
        missing = [k for k in wanted if not isinstance(row, dict) or row.get(k) is None]
        if missing:
            raise TraceError(f"{where}.requests.successful[{i}]: no {', '.join(missing)}; GuideLLM writes them for "
                             f"every successful request (schema version 2)")
    for i, row in enumerate(cut):
        missing = [k for k in ("request_start_time", "prompt_tokens")
                   if not isinstance(row, dict) or row.get(k) is None]
        if missing:
            raise TraceError(f"{where}.requests.incomplete[{i}]: no {', '.join(missing)}; a request GuideLLM "
                             f"cancelled after it started has them (schema version 2)")
    index = list(range(len(rows)))
    field = f"benchmarks[{benchmark}].requests.successful[].{{}}".format
    start = seconds(path, field("request_start_time"),
                    [r["request_start_time"] for r in rows], index, indexed=True)
    prompts = token_counts(path, field("prompt_tokens"), [r["prompt_tokens"] for r in rows], index, indexed=True)
    outputs = token_counts(path, field("output_tokens"), [r["output_tokens"] for r in rows], index, indexed=True)
    replayed = list(failures.replayed) if failures else []
    for kind, more_rows, more in (("incomplete", cut, list(range(len(cut)))), ("errored", failed, replayed)):
        if not more_rows:  # (replayed, not compared; ``more``: their indices in the report's list)
            continue
        more_field = f"benchmarks[{benchmark}].requests.{kind}[].{{}}".format
        start = np.concatenate([start, seconds(path, more_field("request_start_time"),
                                               [r["request_start_time"] for r in more_rows], more, indexed=True)])
        prompts = np.concatenate([prompts, token_counts(path, more_field("prompt_tokens"),
                                                        [r["prompt_tokens"] for r in more_rows], more, indexed=True)])
        outputs = np.concatenate([outputs, [max(1, r.get("output_tokens") or 0) for r in more_rows]]).astype(np.int64)
    order = np.argsort(start, kind="stable")
    every = rows + cut + failed
    log = ServerLog(path, "guidellm", [str(every[i].get("request_id", i)) for i in order],
                    start[order] - start[order[0]], prompts[order], outputs[order], boundary="client")
    log.notes.append("GuideLLM timings are the client's")
    if cut:
        log.notes.append(f"{len(cut)} incomplete request(s) (GuideLLM cancelled them at the benchmark's end) "
                         f"replayed with the output tokens they got, their latencies not compared")
    log.take_failures(failures)
    take_turns(log, [guidellm_turn(f"{where}.requests[{every[i].get('request_id', i)}]", every[i]) for i in order],
               "GuideLLM")
    notes, log.in_flight = guidellm_sending(where, bench[benchmark], len(rows))
    log.notes += notes + unlisted(where, bench[benchmark])
    log.model = model_of(bench[benchmark])
    log.cached_tokens = cached_tokens(where, rows, every, prompts, order, log.notes)
    if all(r.get(k) is not None for r in rows for k in MEASURED_FIELDS):
        ttft = seconds(path, field("time_to_first_token_ms"), [r["time_to_first_token_ms"] for r in rows], index,
                       indexed=True, unit="milliseconds") / 1e3
        e2e = seconds(path, field("request_latency"), [r["request_latency"] for r in rows], index, indexed=True)
        unmeasured = np.full(len(cut) + len(failed), np.nan)
        log.ttft, log.e2e = np.concatenate([ttft, unmeasured])[order], np.concatenate([e2e, unmeasured])[order]
    return log


def cached_tokens(where: str, rows: list, every: list, prompts: np.ndarray, order: np.ndarray,
                  notes: list) -> np.ndarray | None:
    """The prompt tokens vLLM found cached, per request in ``order``: GuideLLM's ``cached_tokens`` (the reply's
    ``usage.prompt_tokens_details``, which vLLM sends under ``--enable-prompt-tokens-details``); None where the
    server sent none. ``every``: the successful ``rows``, then the incomplete and errored requests replayed."""
    have = [r.get("cached_tokens") is not None for r in rows]
    if not any(have):
        return None
    if not all(have):
        raise TraceError(f"{where}.requests.successful[{have.index(False)}].cached_tokens: null, but "
                         f"successful[{have.index(True)}] has it; one server reports it for every request or none")
    if any(r.get("cached_tokens") is None for r in every):
        notes.append("GuideLLM's cached_tokens is missing on its incomplete or errored requests: the run's prefix "
                     "cache hit rate is not compared")
        return None
    counts = []
    for i, (r, prompt) in enumerate(zip(every, prompts)):
        c = r["cached_tokens"]
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c <= prompt:
            raise TraceError(f"{where}.requests[{r.get('request_id', i)}].cached_tokens: {c!r}, not a count of "
                             f"0..prompt_tokens ({prompt}) tokens")
        counts.append(c)
    return np.array(counts, dtype=np.int64)[order]


def unlisted(where: str, bench: dict) -> list[str]:
    """A note for the requests GuideLLM 0.8 still had in flight when its benchmark stopped (its max_requests
    constraint stops sending, then the benchmark ends before the last replies): the report counts them in
    ``scheduler_state.processing_requests`` and lists them nowhere, so the replay cannot send them."""
    state = bench.get("scheduler_state")
    n = state.get("processing_requests") if isinstance(state, dict) else None
    if n is None:
        return []
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TraceError(f"{where}.scheduler_state.processing_requests: {n!r}, not a count of requests; fix or "
                         f"remove it")
    if not n:
        return []
    return [f"{n} request(s) still in flight when GuideLLM stopped the benchmark are in none of its lists "
            f"(scheduler_state.processing_requests): the replay sends the rest, so its load at the end is lighter"]


def guidellm_turn(where: str, row: dict) -> tuple[str, int] | None:
    """A request's conversation and turn (``info.conversation_id``, ``info.turn_index``: GuideLLM 0.8's multi-turn,
    whose ``/v1/completions`` prompt is the earlier turns' prompts and replies, then its own text); None where it
    names none."""
    info = row.get("info") if isinstance(row, dict) else None
    if not isinstance(info, dict) or info.get("turn_index") is None or info.get("conversation_id") is None:
        return None
    turn = info["turn_index"]
    if not is_turn_index(turn):
        raise TraceError(f"{where}.info.turn_index: {turn!r}, not a turn's index (0, 1, ...)")
    return str(info["conversation_id"]), turn


def errored_requests(errored: list, total: int) -> FailedRequests | None:
    """A benchmark's errored requests (of ``total`` sent), each with the output tokens GuideLLM's usage counted for
    it (1 where it counted none but timed a first token; 0 where neither, or where the request has no send time or
    prompt length to replay it with)."""
    if not errored:
        return None

    def got(row) -> int:
        if not isinstance(row, dict) or row.get("request_start_time") is None or not row.get("prompt_tokens"):
            return 0
        n = row.get("output_tokens")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n
        return 1 if row.get("time_to_first_token_ms") is not None else 0  # its first token came, uncounted

    first = errored[0] if isinstance(errored[0], dict) else {}
    info = first.get("info") if isinstance(first.get("info"), dict) else {}
    error = info.get("error") or first.get("error") or "no message recorded"
    return FailedRequests({i: got(row) for i, row in enumerate(errored)}, error_text(error), total,
                          "GuideLLM counted no output token for them, or no prompt")


def model_of(bench: dict) -> str | None:
    """The model a benchmark's backend served (``config.backend.model``: the backend's arguments, guidellm's
    ``BenchmarkConfig.backend``), if it names one: a report alone is then a run of that model."""
    config = bench.get("config")
    backend = config.get("backend") if isinstance(config, dict) else None
    model = backend.get("model") if isinstance(backend, dict) else None
    return model.strip() if isinstance(model, str) and model.strip() else None

"""inference-perf's per-request report read as a server log, measured at the client.

``per_request_lifecycle_metrics.json`` (kubernetes-sigs/inference-perf, ``inference_perf/reportgen/base.py``,
written with ``report.request_lifecycle.per_request: true``) is a list with one object a request: ``start_time`` and
``end_time`` (the worker's ``time.perf_counter()`` around the HTTP request: the send and the last byte, one clock for
every worker process on Linux), ``info`` and ``error`` (null when it succeeded). ``info`` is the request's
``InferenceInfo``: since the multimodal rewrite, ``request_metrics.text.input_tokens`` and ``response_metrics``
(``output_tokens``, ``output_token_times`` of a streamed response, and ``server_usage``, the server's own
``usage``); before it (as at the KubeCon 2025 demo's version), ``input_tokens``, ``output_tokens`` and
``output_token_times`` directly. The server's counts are read where the report has them (``prompt_tokens``,
``completion_tokens``), else the client's: inference-perf's own counts re-tokenise the text, which some of its
versions got wrong (issue #564). TTFT = the first token time − ``start_time``, E2E = ``end_time`` − ``start_time``.

The report keeps no stage number, so a run of several stages is replayed whole, request for request at its sends;
its stages' own reports (``stage_N_lifecycle_metrics.json``) are the per-stage comparison.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .failed_requests import FailedRequests, error_text
from .server_log import ServerLog, seconds, token_counts
from .trace_error import TraceError

FIX = "write it as inference-perf does (report.request_lifecycle.per_request: true, api.streaming: true)"


def is_per_request(data) -> bool:
    return (isinstance(data, list) and bool(data) and isinstance(data[0], dict)
            and {"start_time", "end_time", "info"} <= set(data[0]))


def read_per_request(path: Path, rows: list, measured: bool = False) -> ServerLog:
    """The per-request report ``rows`` read from ``path``; a missing field is an error naming its index, a failed
    request is replayed or left out as workload/traces/failed_requests.py says."""
    failures = failed_rows(rows)
    total = len(rows)
    pos = [i for i, r in enumerate(rows) if not errored(r) or i in failures.replayed]  # (file positions kept)
    if failures and (not pos or (measured and all(errored(rows[i]) for i in pos))):
        raise TraceError(f"{path}: {len(failures.got)} of {total} requests failed (first: "
                         f"{failures.first_error[:80]!r}) and none " + ("succeeded, so nothing can be compared"
                                                                        if pos else "can be replayed")
                         + ": rerun until some succeed, or validate the stage reports (stage_N_lifecycle_metrics."
                           "json), which replay failures through the client's timeout")
    rows = [rows[i] for i in pos]
    prompts, outputs, firsts = [], [], []
    for i, row in enumerate(rows):
        info = row.get("info") if isinstance(row, dict) else None
        if not isinstance(info, dict):
            raise TraceError(f"{path}: [{pos[i]}].info is missing; {FIX}")
        response = info.get("response_metrics") if isinstance(info.get("response_metrics"), dict) else info
        usage = response.get("server_usage") if isinstance(response.get("server_usage"), dict) else {}
        text = (info.get("request_metrics") or {}).get("text") or {}
        prompts.append(first_of(usage.get("prompt_tokens"), text.get("input_tokens"), info.get("input_tokens")))
        outputs.append(first_of(usage.get("completion_tokens"), response.get("output_tokens")))
        times = response.get("output_token_times")
        firsts.append(times[0] if isinstance(times, list) and times else None)
        if errored(row):  # a failure that got tokens: replayed with them, not compared
            outputs[-1], firsts[-1] = len(times), None
        for name, value in (("prompt tokens (info.request_metrics.text.input_tokens)", prompts[-1]),
                            ("output tokens (info.response_metrics.output_tokens)", outputs[-1])):
            if value is None:
                raise TraceError(f"{path}: [{pos[i]}] has no {name}; {FIX}")
        if measured and firsts[-1] is None and not errored(row):
            raise TraceError(f"{path}: [{pos[i]}] has no output_token_times, so no TTFT; run inference-perf with "
                             f"api.streaming: true")
    index = pos
    start = seconds(path, "start_time", [r.get("start_time") for r in rows], index, indexed=True)
    end = seconds(path, "end_time", [r.get("end_time") for r in rows], index, indexed=True)
    prompts = token_counts(path, "prompt tokens", prompts, index, indexed=True)
    outputs = token_counts(path, "output tokens", outputs, index, indexed=True)
    order = np.argsort(start, kind="stable")
    log = ServerLog(path, "inference-perf", [str(pos[i]) for i in order], start[order] - start[order[0]],
                    prompts[order], outputs[order], boundary="client")
    log.notes.append("inference-perf per-request report: the client's sends and timings; every stage in one replay "
                     "(the report keeps no stage number)")
    log.take_failures(failures)
    ok = [i for i, row in enumerate(rows) if not errored(row)]
    if all(firsts[i] is not None for i in ok):
        first, ttft, e2e = np.full(len(rows), np.nan), np.full(len(rows), np.nan), np.full(len(rows), np.nan)
        first[ok] = seconds(path, "output_token_times[0]", [firsts[i] for i in ok], [pos[i] for i in ok],
                            indexed=True)
        if ((first[ok] < start[ok]) | (end[ok] < first[ok])).any():
            i = ok[int(np.flatnonzero((first[ok] < start[ok]) | (end[ok] < first[ok]))[0])]
            raise TraceError(f"{path}: [{pos[i]}] needs start_time <= output_token_times[0] <= end_time, got "
                             f"start_time = {float(start[i])}, output_token_times[0] = {float(first[i])}, "
                             f"end_time = {float(end[i])}")
        ttft[ok], e2e[ok] = (first - start)[ok], (end - start)[ok]
        log.ttft, log.e2e = ttft[order], e2e[order]
    return log


def failed_rows(rows: list) -> FailedRequests | None:
    """The report's failed requests (an ``error`` set), each with the tokens it streamed where its ``info`` kept
    them and its prompt length (0 otherwise: inference-perf's own APIs keep neither for a failure)."""
    failed = [i for i, r in enumerate(rows) if errored(r)]
    if not failed:
        return None

    def got(row: dict) -> int:
        info = row.get("info") if isinstance(row.get("info"), dict) else {}
        response = info.get("response_metrics") if isinstance(info.get("response_metrics"), dict) else info
        text = (info.get("request_metrics") or {}).get("text") or {}
        prompt = first_of(text.get("input_tokens"), info.get("input_tokens"))
        times = response.get("output_token_times")
        return len(times) if isinstance(prompt, int) and prompt > 0 and isinstance(times, list) else 0

    return FailedRequests({i: got(rows[i]) for i in failed}, error_text(rows[failed[0]]["error"]), len(rows),
                          "inference-perf keeps neither the prompt length nor the tokens streamed of a failed "
                          "request; its stage reports replay failures through the client's timeout")


def errored(row) -> bool:
    return isinstance(row, dict) and bool(row.get("error"))


def first_of(*values):
    """The first value given (not None)."""
    return next((v for v in values if v is not None), None)

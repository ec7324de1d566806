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

from .server_log import ServerLog, seconds, token_counts
from .trace_error import TraceError

FIX = "write it as inference-perf does (report.request_lifecycle.per_request: true, api.streaming: true)"


def is_per_request(data) -> bool:
    return (isinstance(data, list) and bool(data) and isinstance(data[0], dict)
            and {"start_time", "end_time", "info"} <= set(data[0]))


def read_per_request(path: Path, rows: list, measured: bool = False) -> ServerLog:
    """The per-request report ``rows`` read from ``path``; a failed request or a missing field is an error naming
    its index."""
    failed = [i for i, r in enumerate(rows) if isinstance(r, dict) and r.get("error")]
    if failed:
        error = rows[failed[0]]["error"]
        shown = f"{error.get('error_type')}: {error.get('error_msg')}" if isinstance(error, dict) else error
        raise TraceError(f"{path}: [{failed[0]}].error is {str(shown)[:80]!r} ({len(failed)} failed request(s)); a "
                         f"failed request has no latencies, nor the output length it asked for: validate the run's "
                         f"stage reports (stage_N_lifecycle_metrics.json), which replay failures through the "
                         f"client's timeout, or rerun until none fails")
    prompts, outputs, firsts = [], [], []
    for i, row in enumerate(rows):
        info = row.get("info") if isinstance(row, dict) else None
        if not isinstance(info, dict):
            raise TraceError(f"{path}: [{i}].info is missing; {FIX}")
        response = info.get("response_metrics") if isinstance(info.get("response_metrics"), dict) else info
        usage = response.get("server_usage") if isinstance(response.get("server_usage"), dict) else {}
        text = (info.get("request_metrics") or {}).get("text") or {}
        prompts.append(first_of(usage.get("prompt_tokens"), text.get("input_tokens"), info.get("input_tokens")))
        outputs.append(first_of(usage.get("completion_tokens"), response.get("output_tokens")))
        times = response.get("output_token_times")
        firsts.append(times[0] if isinstance(times, list) and times else None)
        for name, value in (("prompt tokens (info.request_metrics.text.input_tokens)", prompts[-1]),
                            ("output tokens (info.response_metrics.output_tokens)", outputs[-1])):
            if value is None:
                raise TraceError(f"{path}: [{i}] has no {name}; {FIX}")
        if measured and firsts[-1] is None:
            raise TraceError(f"{path}: [{i}] has no output_token_times, so no TTFT; run inference-perf with "
                             f"api.streaming: true")
    index = list(range(len(rows)))
    start = seconds(path, "start_time", [r.get("start_time") for r in rows], index, indexed=True)
    end = seconds(path, "end_time", [r.get("end_time") for r in rows], index, indexed=True)
    prompts = token_counts(path, "prompt tokens", prompts, index, indexed=True)
    outputs = token_counts(path, "output tokens", outputs, index, indexed=True)
    order = np.argsort(start, kind="stable")
    log = ServerLog(path, "inference-perf", [str(i) for i in order], start[order] - start[order[0]], prompts[order],
                    outputs[order], boundary="client")
    log.notes.append("inference-perf per-request report: the client's sends and timings; every stage in one replay "
                     "(the report keeps no stage number)")
    if all(t is not None for t in firsts):
        first = seconds(path, "output_token_times[0]", firsts, index, indexed=True)
        if ((first < start) | (end < first)).any():
            i = int(np.flatnonzero((first < start) | (end < first))[0])
            raise TraceError(f"{path}: [{i}] needs start_time <= output_token_times[0] <= end_time, got "
                             f"{start[i]!r}, {first[i]!r}, {end[i]!r}")
        log.ttft, log.e2e = (first - start)[order], (end - start)[order]
    return log


def first_of(*values):
    """The first value given (not None)."""
    return next((v for v in values if v is not None), None)

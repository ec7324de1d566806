"""AIPerf's per-request export (``profile_export.jsonl``, ``aiperf profile --export-level records``; NVIDIA's client,
genai-perf's successor) read as a per-request server log, measured at the client.

One JSON object a line (aiperf 0.13, ``MetricRecordInfo`` in ``common/models/record_models.py``): ``metadata``
with the send (``request_start_ns``, wall clock, ``time.time_ns``), the phase (``benchmark_phase``: ``warmup`` or
``profiling``) and ``was_cancelled``; ``metrics``, each ``{"value", "unit"}`` in its display unit
(``time_to_first_token``, ``request_latency``: ms; ``input_sequence_length``, ``output_sequence_length``: tokens);
``error`` for a failed request. The warm-up phase's requests are in the file, sent before the run at their own
times: they loaded the server and warmed its prefix cache, so they are replayed, and compared with nothing (NaN),
as GuideLLM's cancelled requests are. A request that failed or was cancelled is replayed with the output tokens
AIPerf counted for it where it counted any, else left out with a note (workload/traces/failed_requests.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .conversations import is_turn_index, take_turns
from .failed_requests import FailedRequests, error_text
from .server_log import ServerLog
from .trace_error import TraceError

PROMPT, OUTPUT, TTFT, LATENCY = "input_sequence_length", "output_sequence_length", "time_to_first_token", \
    "request_latency"
SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


def is_aiperf(row) -> bool:
    """Whether a log's first line is an AIPerf record."""
    return isinstance(row, dict) and isinstance(row.get("metadata"), dict) and "metrics" in row \
        and "request_start_ns" in row["metadata"]


def read_aiperf(path: Path, rows: list[dict], lines: list[int], measured: bool):
    """The AIPerf records ``rows`` (from ``lines`` of ``path``) as a ``ServerLog`` at the client."""
    sends, prompts, outputs, ttfts, e2es, failed, warm = [], [], [], [], [], {}, 0
    turns = [turn_of(f"{path}:{n}", row) for n, row in zip(lines, rows)]
    first_error = None
    for n, row in zip(lines, rows):
        where = f"{path}:{n}"
        if not is_aiperf(row):
            raise TraceError(f"{where}: not an AIPerf record (metadata.request_start_ns, metrics); every line of "
                             f"an `aiperf profile --export-level records` export is one")
        meta, metrics = row["metadata"], row["metrics"]
        if not isinstance(metrics, dict):
            raise TraceError(f"{where}: metrics is {type(metrics).__name__}, not an object of {{value, unit}}")
        start = meta["request_start_ns"]
        if isinstance(start, bool) or not isinstance(start, int) or start <= 0:
            raise TraceError(f"{where}: metadata.request_start_ns is {start!r}, not a time in nanoseconds")
        bad = row.get("error") is not None or meta.get("was_cancelled") is True
        prompt = count(where, metrics, PROMPT, required=not bad)
        output = count(where, metrics, OUTPUT, required=not bad)
        if bad:
            if first_error is None:
                first_error = aiperf_error(row)
            failed[len(sends)] = output if prompt and output else 0
            if not prompt or not output:
                sends.append(start)
                prompts.append(0)
                outputs.append(0)
                ttfts.append(np.nan)
                e2es.append(np.nan)
                continue
        warmup = meta.get("benchmark_phase") == "warmup"
        warm += warmup
        compared = not (bad or warmup)
        sends.append(start)
        prompts.append(prompt)
        outputs.append(output)
        ttfts.append(duration(where, metrics, TTFT, required=measured and compared) if compared else np.nan)
        e2es.append(duration(where, metrics, LATENCY, required=measured and compared) if compared else np.nan)
    failures = FailedRequests(failed, first_error, len(rows), "AIPerf counted no tokens for them") if failed else None
    keep = [i for i in range(len(rows)) if i not in failed or (failures and i in failures.replayed)]
    if not any(i not in failed for i in keep):
        raise TraceError(f"{path}: every one of its {len(rows)} requests failed (first: {first_error!r}); rerun the "
                         f"benchmark")
    start = np.array(sends, np.int64)[keep]
    order = np.argsort(start, kind="stable")
    at = np.asarray(keep)[order]
    log = ServerLog(path, "aiperf", [str(i) for i in at], (start[order] - start[order[0]]) / 1e9,
                    np.array(prompts, np.int64)[at], np.array(outputs, np.int64)[at], boundary="client")
    log.notes.append("AIPerf timings are the client's")
    if warm:
        log.notes.append(f"{warm} warm-up request(s) (AIPerf's warmup phase) replayed before the run at their sends, "
                         f"their latencies not compared")
    log.take_failures(failures)
    take_turns(log, [turns[i] for i in at], "AIPerf")  # (its chat requests carry every earlier message)
    ttft, e2e = np.array(ttfts, float)[at], np.array(e2es, float)[at]
    if not np.isnan(e2e).all():
        log.ttft, log.e2e = ttft, e2e
    elif measured:
        raise TraceError(f"{path}: no profiling-phase request that succeeded; nothing can be compared")
    return log


def turn_of(where: str, row) -> tuple[str, int] | None:
    """A record's conversation (``metadata.x_correlation_id``: one live session, else its ``conversation_id``) and
    its ``turn_index`` there; None for a record that names neither."""
    meta = row.get("metadata") if isinstance(row, dict) else None
    if not isinstance(meta, dict) or meta.get("turn_index") is None:
        return None
    turn = meta["turn_index"]
    if not is_turn_index(turn):
        raise TraceError(f"{where}: metadata.turn_index is {turn!r}, not a turn's index (0, 1, ...)")
    session = meta.get("x_correlation_id") or meta.get("conversation_id")
    return (str(session), turn) if session is not None else None


def aiperf_error(row: dict) -> str:
    """A failed record's error in one line (AIPerf's ``ErrorDetails``: code, type, message), or why it ended."""
    error = row.get("error")
    if isinstance(error, dict):
        return error_text({"error_type": " ".join(str(x) for x in (error.get("code"), error.get("type")) if x),
                           "error_msg": error.get("message")})
    return error_text(error) if error is not None else "cancelled"


def count(where: str, metrics: dict, key: str, required: bool) -> int | None:
    """Token count ``key`` of a record (None where absent and not ``required``)."""
    value = value_of(where, metrics, key, required, "tokens")
    if value is None:
        return None
    if not float(value).is_integer() or value < (1 if required else 0):
        raise TraceError(f"{where}: metrics.{key} is {value!r}, not a count of tokens"
                         + (" >= 1" if required else ""))
    return int(value)


def duration(where: str, metrics: dict, key: str, required: bool) -> float:
    """Duration ``key`` of a record in seconds (NaN where absent and not ``required``)."""
    entry = metrics.get(key)
    if entry is None:
        if required:
            raise TraceError(f"{where}: no metrics.{key}; run aiperf with --streaming (a compared request needs its "
                             f"time to first token and its latency)")
        return np.nan
    value = value_of(where, metrics, key, True, None)
    unit = entry.get("unit")
    if unit not in SECONDS:
        raise TraceError(f"{where}: metrics.{key}.unit is {unit!r}; AIPerf writes durations in {', '.join(SECONDS)}")
    if value < 0:
        raise TraceError(f"{where}: metrics.{key} is {value!r}, a negative duration")
    return value * SECONDS[unit]


def value_of(where: str, metrics: dict, key: str, required: bool, unit: str | None):
    entry = metrics.get(key)
    if entry is None:
        if required:
            raise TraceError(f"{where}: no metrics.{key}; AIPerf records it for every request that succeeded")
        return None
    value = entry.get("value") if isinstance(entry, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise TraceError(f"{where}: metrics.{key} is {entry!r}, not {{\"value\": a number, \"unit\": ...}}")
    if unit is not None and entry.get("unit") != unit:
        raise TraceError(f"{where}: metrics.{key}.unit is {entry.get('unit')!r}, not {unit!r}")
    return value

"""Readers for published request traces, each as its authors publish it.

Rows are validated one by one only when the fast whole-column parse fails, so a clean 100k-row file reads in a
fraction of a second and a bad one still gets an error naming its file and line.

Zero token counts: the LMSYS length sample has 147 answers and 4 questions of length 0 (the Azure, Vidur,
ShareGPT and arXiv files have none). A request needs at least one prompt and one output token, so a zero is an
error by default; ``zero_lengths="drop"`` skips such rows and ``"clamp"`` raises them to 1, and the returned
``Trace`` counts what was done. Nothing is dropped without being asked for and counted.
"""
from __future__ import annotations

import csv
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llmsched.bounds import MAX_SECONDS, MAX_TOKENS
from llmsched.workload.traces.jsonl import first_keys, is_jsonl
from llmsched.workload.traces.llmservingsim import FLAT as LLMSERVINGSIM, is_llmservingsim, read_llmservingsim
from llmsched.workload.traces.run_log import run_log
from llmsched.workload.traces.mooncake import KEYS as MOONCAKE, is_mooncake, read_mooncake
from llmsched.workload.traces.session_trace import KEYS as SESSIONS, is_session_trace, read_session_trace
from llmsched.workload.traces.trace_error import TraceError

AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
VIDUR = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
LENGTHS = ("num_prefill_tokens", "num_decode_tokens")
LMSYS = ("question_length", "answer_length")
TENANT = "tenant"  # an optional column naming each row's tenant (any format with arrival times)
ZERO_POLICIES = ("error", "drop", "clamp")
# JSON-lines traces with prompt identities: kind -> (does a first line with these keys belong to it, reader)
JSONL = {"mooncake": (is_mooncake, read_mooncake), "llmservingsim": (is_llmservingsim, read_llmservingsim),
         "sessions": (is_session_trace, read_session_trace)}
JSONL_SUPPORTED = (f"Mooncake JSONL ({', '.join(MOONCAKE)}); LLMServingSim JSONL ({', '.join(LLMSERVINGSIM)}, or "
                   f"sub_requests); llmsched's session JSONL ({', '.join(SESSIONS)}; docs/workloads.md)")
SUPPORTED = (f"Azure LLM inference trace ({', '.join(AZURE)}); Vidur processed trace ({', '.join(VIDUR)}); "
             f"length-only ({', '.join(LENGTHS)}) or ({', '.join(LMSYS)}); {JSONL_SUPPORTED}")


class DataFileNotFound(FileNotFoundError):
    """A named data file that is in none of the places looked at."""


@dataclass
class Trace:
    """Token counts per request and, for traces that have them, arrival seconds from the first request."""

    arrivals: np.ndarray | None
    prompt_lens: np.ndarray
    output_lens: np.ndarray
    source: Path
    format: str = ""
    dropped: int = 0
    clamped: int = 0
    tenants: list[str] | None = None  # each row's tenant, from a ``tenant`` column


    def __len__(self) -> int:
        return len(self.prompt_lens)


def resolve_data_file(name) -> Path:
    """``name`` itself if it exists (a run's folder: its per-request log, ``run_log``), else the same name under
    $LLMSCHED_DATA, $LLMSCHED_DATA/traces, then ../shared/data/traces beside the current directory and beside the
    repository, then in those folders' subfolders (the Mooncake traces live in traces/mooncake)."""
    given = Path(name).expanduser()
    if given.is_dir():  # a real run's folder: its per-request log, as validate-serving reads it
        try:
            return run_log(given)
        except ValueError as e:
            raise DataFileNotFound(f"{str(name)!r} is a folder without one per-request log: {e}") from None
    tried = [given]
    env = os.environ.get("LLMSCHED_DATA")
    if not given.is_absolute():
        if env:
            tried += [Path(env) / given, Path(env) / "traces" / given]
        tried += [Path.cwd().parent / "shared" / "data" / "traces" / given,
                  Path(__file__).resolve().parents[3].parent / "shared" / "data" / "traces" / given]
    tried = list(dict.fromkeys(tried))
    for place in tried:
        if place.is_file():
            return place
    if not given.is_absolute() and len(given.parts) == 1:
        for folder in dict.fromkeys(place.parent for place in tried[1:]):
            found = sorted(folder.glob(f"*/{given}")) if folder.is_dir() else []
            if found and found[0].is_file():
                return found[0]
    hint = "" if env else " (LLMSCHED_DATA is not set)"
    raise DataFileNotFound(f"data file {str(name)!r} not found; looked in: " + ", ".join(map(str, tried)) +
                           f". Give a path that exists or set LLMSCHED_DATA to the data folder{hint}")


def _read_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    with _opened(path) as f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
            if header is None:
                raise empty(path)
            rows, lines = [], []
            for row in reader:
                if row:
                    rows.append(row)
                    lines.append(reader.line_num)
        except csv.Error as e:
            raise TraceError(f"{path}:{reader.line_num}: not readable as CSV ({e}). Supported: {SUPPORTED}") from None
        except UnicodeDecodeError:
            raise TraceError(f"{path}:{reader.line_num + 1}: not a UTF-8 text file; a trace is a CSV file. "
                             f"Supported: {SUPPORTED}") from None
    return [h.strip() for h in header], rows, lines


def _opened(path: Path):
    try:
        return open(path, newline="", encoding="utf-8-sig")
    except OSError as e:
        raise TraceError(f"{path}: cannot be read ({e.strerror})") from None


def _columns(path: Path, header: list[str], rows: list[list[str]], lines: list[int], names) -> list[list[str]]:
    """The named columns as lists of strings; a short row is an error naming its line."""
    try:
        idx = [header.index(n) for n in names]
    except ValueError:
        missing = [n for n in names if n not in header]
        raise TraceError(f"{path}:1: header lacks column(s) {', '.join(missing)}; it has {', '.join(header)}") from None
    width = max(idx) + 1
    for row, line in zip(rows, lines):
        if len(row) < width:
            raise TraceError(f"{path}:{line}: row has {len(row)} field(s), needs {width} ({', '.join(header)})")
    return [[row[i] for row in rows] for i in idx]


def _parse_int(text: str) -> int:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        value = float(text)  # accepts "374.0" as pandas writes integer columns that once held NaN
        if not value.is_integer():
            raise ValueError(text) from None
        return int(value)


def _tokens(path: Path, column: str, values: list[str], lines: list[int]) -> np.ndarray:
    try:
        tokens = np.array(values).astype(np.int64) if values else np.zeros(0, np.int64)
    except (ValueError, OverflowError):
        tokens = np.empty(len(values), np.int64)
        for i, (text, line) in enumerate(zip(values, lines)):
            try:
                value = _parse_int(text)
            except (ValueError, OverflowError):
                what = "is empty" if not text.strip() else f"is {text!r}, not a whole number"
                raise TraceError(f"{path}:{line}: {column} {what}") from None
            tokens[i] = min(max(value, -1), MAX_TOKENS + 1)  # out of range either way: reported below
    negative = np.flatnonzero(tokens < 0)
    if len(negative):
        i = negative[0]
        raise TraceError(f"{path}:{lines[i]}: {column} is {values[i].strip()}; token counts cannot be negative")
    beyond = np.flatnonzero(tokens > MAX_TOKENS)
    if len(beyond):
        i = beyond[0]
        raise TraceError(f"{path}:{lines[i]}: {column} is {values[i].strip()}; a length must be at most "
                         f"{MAX_TOKENS:,} tokens (the longest context served is about 10 million)")
    return tokens


def _seconds(path: Path, column: str, values: list[str], lines: list[int]) -> np.ndarray:
    try:
        t = np.array(values).astype(float) if values else np.zeros(0)
    except ValueError:
        t = np.empty(len(values))
        for i, (text, line) in enumerate(zip(values, lines)):
            try:
                t[i] = float(text)
            except ValueError:
                raise TraceError(f"{path}:{line}: {column} is {text!r}, not a number of seconds") from None
    bad = np.flatnonzero(~np.isfinite(t) | (t < 0))
    if len(bad):
        raise TraceError(f"{path}:{lines[bad[0]]}: {column} is {values[bad[0]]!r}; arrival times must be finite "
                         f"and >= 0")
    return t


EPOCH_MS = 1e11  # a number of epoch seconds this large is the year 5138: above it, epoch milliseconds
EPOCH_MAX = 1e14  # epoch milliseconds up to the year 5138; above it (microseconds, nanoseconds) is refused


def _timestamps(path: Path, column: str, values: list[str], lines: list[int]) -> np.ndarray:
    """Seconds after the first row, from timestamps like 2023-11-16 18:15:46.6805900 (100 ns digits), or from
    Unix epoch numbers (seconds, or milliseconds when above 1e11), one format per file.

    An offset such as the 2024 trace's ``+00:00`` is applied (numpy converts to UTC; its warning is silenced).
    numpy alone would read ``1700158624`` as the year 1700158624, so numbers are told apart first.
    """
    numeric = np.array([":" not in v and _is_number(v) for v in values], bool)  # a clock time is no number
    if numeric.any():
        if not numeric.all():
            i, j = int(np.argmax(numeric)), int(np.argmin(numeric))
            raise TraceError(f"{path}:{lines[max(i, j)]}: {column} is {values[max(i, j)].strip()!r}, but line "
                             f"{lines[min(i, j)]} holds {values[min(i, j)].strip()!r}: use one timestamp format "
                             f"per file (dates like 2023-11-16 18:15:46.68, or Unix epoch seconds or milliseconds)")
        return _epoch(path, column, values, lines)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "no explicit representation of timezones", UserWarning)
        try:
            stamps = np.array([v.strip() for v in values], dtype="datetime64[ns]")
        except ValueError:
            stamps = np.empty(len(values), "datetime64[ns]")
            for i, (text, line) in enumerate(zip(values, lines)):
                try:
                    stamps[i] = np.datetime64(text.strip(), "ns")
                except ValueError:
                    raise TraceError(f"{path}:{line}: {column} is {text!r}, not a timestamp like "
                                     f"2023-11-16 18:15:46.6805900") from None
    missing = np.flatnonzero(np.isnat(stamps))
    if len(missing):
        raise TraceError(f"{path}:{lines[missing[0]]}: {column} is {values[missing[0]]!r}, not a timestamp")
    if len(stamps) == 0:
        return np.zeros(0)
    return (stamps - stamps[0]).astype(np.int64) / 1e9


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _epoch(path: Path, column: str, values: list[str], lines: list[int]) -> np.ndarray:
    """Seconds after the first row from Unix epoch numbers: seconds, or milliseconds when they exceed 1e11."""
    t = np.array([float(v) for v in values])
    bad = np.flatnonzero(~np.isfinite(t) | (t < 0) | (t >= EPOCH_MAX))
    if len(bad):
        i = bad[0]
        raise TraceError(f"{path}:{lines[i]}: {column} is {values[i].strip()!r}: a number here is read as Unix epoch "
                         f"seconds, or milliseconds above {EPOCH_MS:.0e}; it must be finite, >= 0 and below "
                         f"{EPOCH_MAX:.0e} (microsecond or nanosecond stamps: divide them to milliseconds)")
    if len(t) == 0:
        return t
    if t.max() >= EPOCH_MS:
        if t.min() < EPOCH_MS:
            i = int(np.argmin(t))
            raise TraceError(f"{path}:{lines[i]}: {column} is {values[i].strip()!r} where other rows hold epoch "
                             f"milliseconds (above {EPOCH_MS:.0e}): use one unit per file")
        t = t / 1e3
    return t - t[0]


def _check_range(path: Path, column: str, t: np.ndarray, lines: list[int]) -> None:
    """Arrivals within the simulator's range (``MAX_SECONDS``): beyond it is a unit or typing error, not a run."""
    far = np.flatnonzero(t > MAX_SECONDS)
    if len(far):
        i = far[0]
        raise TraceError(f"{path}:{lines[i]}: {column} puts this arrival at {t[i]:.3g} s, more than "
                         f"{MAX_SECONDS:.0e} s (about 32 years) the simulator runs: check the column's unit")


def _check_order(path: Path, column: str, t: np.ndarray, lines: list[int]) -> None:
    back = np.flatnonzero(np.diff(t) < 0)
    if len(back):
        i = back[0] + 1
        raise TraceError(f"{path}:{lines[i]}: {column} goes back in time (row before it is later); rows must be "
                         f"in arrival order")


def _zeros(path: Path, names, prompts, outputs, lines, zero_lengths: str):
    """Applies the zero-length policy; returns the rows kept and the counts dropped and clamped."""
    if zero_lengths not in ZERO_POLICIES:
        raise ValueError(f"zero_lengths must be one of {', '.join(ZERO_POLICIES)}; got {zero_lengths!r}")
    zero = (prompts == 0) | (outputs == 0)
    count = int(zero.sum())
    if count == 0:
        return np.ones(len(prompts), bool), prompts, outputs, 0, 0
    if zero_lengths == "error":
        i = int(np.argmax(zero))
        column = names[0] if prompts[i] == 0 else names[1]
        raise TraceError(f"{path}:{lines[i]}: {column} is 0 ({count} row(s) in the file have a zero length); a "
                         f"request needs at least one token: remove or fix those rows (in Python, "
                         f"zero_lengths='drop' skips them and 'clamp' counts them as 1)")
    if zero_lengths == "drop":
        return ~zero, prompts[~zero], outputs[~zero], count, 0
    return np.ones(len(prompts), bool), np.maximum(prompts, 1), np.maximum(outputs, 1), 0, count


def _read(path, fmt: str, time_column: str | None, names, zero_lengths: str) -> Trace:
    path = resolve_data_file(path)
    header, rows, lines = _read_rows(path)
    columns = _columns(path, header, rows, lines, ((time_column,) if time_column else ()) + tuple(names))
    arrivals = None
    if time_column:
        convert = _timestamps if fmt == "azure" else _seconds
        arrivals = convert(path, time_column, columns[0], lines)
        _check_order(path, time_column, arrivals, lines)
        _check_range(path, time_column, arrivals, lines)
        columns = columns[1:]
    prompts = _tokens(path, names[0], columns[0], lines)
    outputs = _tokens(path, names[1], columns[1], lines)
    keep, prompts, outputs, dropped, clamped = _zeros(path, names, prompts, outputs, lines, zero_lengths)
    if arrivals is not None:
        arrivals = arrivals[keep]
    tenants = None
    if time_column and TENANT in header:
        column = _columns(path, header, rows, lines, (TENANT,))[0]
        tenants = _tenant_names(path, column, lines)
        tenants = [t for t, k in zip(tenants, keep.tolist()) if k] if dropped else tenants
    return Trace(arrivals, prompts, outputs, path, fmt, dropped, clamped, tenants)


def _tenant_names(path: Path, values: list[str], lines: list[int]) -> list[str]:
    names = [v.strip() for v in values]
    for name, line in zip(names, lines):
        if not name:
            raise TraceError(f"{path}:{line}: {TENANT} is empty; a trace with a {TENANT} column names every row's "
                             f"tenant: fill it in (or remove the column to replay the trace without tenants)")
    return names


def read_azure(path, zero_lengths: str = "error") -> Trace:
    """Azure LLM inference trace 2023 (TIMESTAMP, ContextTokens, GeneratedTokens); arrivals from the first row."""
    return _read(path, "azure", AZURE[0], AZURE[1:], zero_lengths)


def read_vidur(path, zero_lengths: str = "error") -> Trace:
    """Vidur's processed trace (arrived_at, num_prefill_tokens, num_decode_tokens); arrivals as written."""
    return _read(path, "vidur", VIDUR[0], VIDUR[1:], zero_lengths)


def read_lengths(path, zero_lengths: str = "error") -> Trace:
    """Length-only CSV: num_prefill_tokens/num_decode_tokens, or question_length/answer_length (LMSYS)."""
    path = resolve_data_file(path)
    header = read_header(path)
    names = LENGTHS if set(LENGTHS) <= set(header) else LMSYS if set(LMSYS) <= set(header) else None
    if names is None:
        raise TraceError(f"{path}:1: not a length-only trace; its header is {', '.join(header)}. "
                         f"Expected ({', '.join(LENGTHS)}) or ({', '.join(LMSYS)})")
    return _read(path, "lengths", None, names, zero_lengths)


def empty(path: Path) -> TraceError:
    """The error for a file with nothing in it, by what its name says it should hold: JSON lines or a CSV."""
    if Path(path).suffix.lower() in (".jsonl", ".json", ".ndjson"):
        return TraceError(f"{path}:1: the file is empty; expected JSON lines, one request a line. Supported: "
                          f"{JSONL_SUPPORTED}")
    return TraceError(f"{path}:1: the file is empty; expected a CSV header. Supported: {SUPPORTED}")


def read_header(path) -> list[str]:
    """The CSV header's column names."""
    path = Path(path)
    with _opened(path) as f:
        try:
            header = next(csv.reader(f), None)
        except csv.Error as e:
            raise TraceError(f"{path}:1: not readable as CSV ({e}). Supported: {SUPPORTED}") from None
        except UnicodeDecodeError:
            raise TraceError(f"{path}:1: not a UTF-8 text file; a trace is a CSV file. Supported: {SUPPORTED}"
                             ) from None
    if header is None:
        raise empty(path)
    return [h.strip() for h in header]


def trace_kind(path) -> str | None:
    """"azure", "vidur", "lengths" (no arrival times), a JSONL kind or None, from the header (or first line)."""
    if is_jsonl(Path(path)):
        keys = first_keys(Path(path))
        return next((kind for kind, (belongs, _) in JSONL.items() if belongs(keys)), None)
    header = set(read_header(path))
    if set(AZURE) <= header:
        return "azure"
    if set(VIDUR) <= header:
        return "vidur"
    if set(LENGTHS) <= header or set(LMSYS) <= header:
        return "lengths"
    return None


def read_trace(path, zero_lengths: str = "error", vocab_size: int | None = None) -> Trace:
    """Reads any supported trace, telling the format from the header (``vocab_size``: token ids above it are an
    error, in traces that have them)."""
    path = resolve_data_file(path)
    kind = trace_kind(path)
    if kind in JSONL:
        return JSONL[kind][1](path, zero_lengths, vocab_size)
    if kind is None and is_jsonl(path):
        raise TraceError(f"{path}:1: unknown JSONL trace format, the first line has keys "
                         f"{', '.join(sorted(first_keys(path)))}. Supported: {JSONL_SUPPORTED}")
    if kind == "azure":
        return read_azure(path, zero_lengths)
    if kind == "vidur":
        return read_vidur(path, zero_lengths)
    if kind == "lengths":
        return read_lengths(path, zero_lengths)
    header = read_header(path)
    raise TraceError(f"{path}:1: unknown trace format, header is {', '.join(header)}. Supported: {SUPPORTED}")

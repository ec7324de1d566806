"""Files of a run (summary.json, requests.csv, steps.csv, meta.json), comparison tables, terminal tables.

JSON files are strict JSON: NaN and infinities are written as ``null``. CSV files write NaN as ``nan``
(numpy, pandas and the csv module read it back as NaN). Times are seconds in files, milliseconds in
``format_table`` only.
"""
from __future__ import annotations

import csv
import dataclasses
import enum
import json
import math
import os
import re
from pathlib import Path

import numpy as np

from ..request import Status
from .pools import POOL_COLUMN, pool_names
from .requests import CACHED_FIELD, CLIENT_FIELDS, FLOAT_FIELDS, INT_FIELDS, TRANSFER_FIELDS, tier_columns
from .steps import CACHED_STEP_FIELD, STEP_FIELDS

REQUEST_COLUMNS = INT_FIELDS[:3] + ("tier_name", "status", "status_name") + INT_FIELDS[4:] + FLOAT_FIELDS + (
    "reason",)
TENANT_COLUMNS = REQUEST_COLUMNS[:4] + ("tenant",) + REQUEST_COLUMNS[4:]  # a run with tenants: each row's tenant
CHUNK_ROWS = 20_000  # rows turned into Python objects at a time: memory stays flat however long the run
TIME_METRICS = ("ttft", "tbt", "tpot", "e2e", "itl")
NEEDS_QUOTES = re.compile(r'[,"\r\n]')  # a field holding one of these is quoted by csv.writer


def to_jsonable(obj):
    """A copy of ``obj`` made of dict/list/str/int/float/bool/None only; NaN and ±inf become None."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    return str(obj)


def write_json(obj, path) -> None:
    with open(path, "w") as f:
        json.dump(to_jsonable(obj), f, indent=2, allow_nan=False)
        f.write("\n")


def write_run(result, summary: dict, out_dir) -> Path:
    """Write ``summary.json``, ``requests.csv``, ``steps.csv`` and ``meta.json`` into ``out_dir`` (created), and
    ``timeline.csv`` when the summary has a timeline (a run with a rate schedule or a timeline window).

    Returns the directory. ``meta.json`` is ``result.meta`` as given. A streamed run (``simulate --stream``)
    wrote its CSV files during the run: they must be this directory's.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(summary, out / "summary.json")
    write_json(result.meta, out / "meta.json")
    if summary.get("timeline"):
        write_table(summary["timeline"]["rows"], path_csv=out / "timeline.csv")
    if getattr(result.requests, "streamed", False):
        for log, name in ((result.requests, "requests.csv"), (result.steps, "steps.csv")):
            if log.path is None or Path(log.path).resolve() != (out / name).resolve():
                raise ValueError(f"this streamed run wrote {name} to {log.path or 'nowhere'}, not to {out}: "
                                 f"stream it to the directory you write (open_streams({str(out)!r}))")
        return out
    _write_requests(result.requests, out / "requests.csv")
    _write_steps(result.steps, out / "steps.csv")
    return out


def _write_requests(log, path: Path) -> None:
    with open(path, "w", newline="") as f:
        f.write(csv_line(request_columns(log)))
        write_request_rows(f, log)


def request_columns(log) -> tuple[str, ...]:
    """requests.csv's columns: a ``tenant`` column after ``tier_name`` only when the run has tenants, the engine's
    own figures (``queued``, ``engine_ttft``, ``engine_tpot``, ``engine_e2e``) after ``reason`` only in a run
    measured at the client, and ``cached_tokens`` last only in a run with a prefix cache, followed by its split by
    tier only in a run with KV tiers below the GPU; a fleet run's ``pool`` after ``replica``, and a disaggregated
    run's prefill instance and KV transfer (``TRANSFER_FIELDS``) after it."""
    columns = TENANT_COLUMNS if log.tenants else REQUEST_COLUMNS
    if log.pools is not None:  # a fleet run: each request's pool after its replica
        columns = columns[:2] + (POOL_COLUMN,) + columns[2:]
    if TRANSFER_FIELDS[0] in log.cols:  # a disaggregated run: its prefill instance and KV transfer after the pool
        columns = columns[:3] + TRANSFER_FIELDS + columns[3:]
    client = CLIENT_FIELDS if CLIENT_FIELDS[0] in log.cols else ()
    if CACHED_FIELD not in log.cols:
        return columns + client
    return columns + client + (CACHED_FIELD,) + tier_columns(getattr(log, "tier_names", ()))


def write_request_rows(f, log) -> None:
    """The rows of ``log`` (a RequestLog), without the header, to the text file ``f``."""
    names = {int(s): s.name for s in Status}
    columns = request_columns(log)
    tenant_names = log.tenants + [""]  # index -1: a request without a tenant
    for i in range(0, len(log.cols["id"]), CHUNK_ROWS):
        cols = {name: _array(log.cols[name][i:i + CHUNK_ROWS]) for name in log.cols}
        cols["tier_name"] = [log.tiers[t] for t in cols["tier"].tolist()]
        cols["status_name"] = [names.get(s, str(s)) for s in cols["status"].tolist()]
        reasons = log.reasons
        cols["reason"] = [reasons.get(r, "") for r in cols["id"].tolist()] if reasons else [""] * len(cols["id"])
        if log.tenants:
            cols["tenant"] = [tenant_names[t] for t in log.cols["tenant"][i:i + CHUNK_ROWS].tolist()]
        if log.pools is not None:
            cols[POOL_COLUMN] = pool_names(log.pools, cols["replica"])
        f.write(csv_rows([cols[c] for c in columns]))


def _write_steps(steps, path: Path) -> None:
    with open(path, "w", newline="") as f:
        f.write(csv_line(steps.fields))
        write_step_rows(f, steps)


def write_step_rows(f, steps) -> None:
    """The rows of ``steps`` (a StepLog), without the header, to the text file ``f``."""
    fields = steps.fields
    cols = steps.arrays()  # a StepStream's chunk in hand too
    for i in range(0, len(cols["start"]), CHUNK_ROWS):
        f.write(csv_rows([_array(cols[c][i:i + CHUNK_ROWS]) for c in fields]))


def csv_rows(columns: list) -> str:
    """Equal-length columns (numpy int or float arrays, lists of str) as the text ``csv.writer().writerows`` writes
    for their rows, several times faster: each distinct number is formatted once (``str``/``repr``, as csv does)
    and the rows are joined in one go."""
    if not len(columns[0]):
        return ""
    texts = [_number_texts(c) if isinstance(c, np.ndarray) else _string_texts(c) for c in columns]
    return "\r\n".join(map(",".join, zip(*texts))) + "\r\n"


def csv_line(fields) -> str:
    """One row of strings as csv.writer writes it."""
    return ",".join(map(_quoted, fields)) + "\r\n"


def _number_texts(col: np.ndarray) -> list[str]:
    if col.dtype.kind == "i":
        lo, hi = int(col.min()), int(col.max())
        if hi - lo <= 2 * len(col):  # counts, lengths, ids: a text per value of the span, no sort
            return np.array([str(v) for v in range(lo, hi + 1)], dtype=object)[col - lo].tolist()
    bits = col.view(np.int64)  # distinct by bit pattern: -0.0 is not 0.0
    distinct, where = np.unique(bits, return_inverse=True)
    values = distinct.view(col.dtype).tolist()
    text = np.array([repr(v) for v in values] if col.dtype.kind == "f" else [str(v) for v in values], dtype=object)
    return text[where].tolist()


def _string_texts(col: list[str]) -> list[str]:
    quoted = {s: _quoted(s) for s in set(col)}
    return [quoted[s] for s in col]


def _quoted(s: str) -> str:
    """``s`` as csv.writer (default dialect) writes a field: in quotes, its quotes doubled, when it holds a comma,
    a quote or a line break."""
    return '"' + s.replace('"', '""') + '"' if NEEDS_QUOTES.search(s) else s


def _array(a) -> np.ndarray:
    """A numpy view of a log's column (an ``array.array`` of doubles or int64)."""
    return a if isinstance(a, np.ndarray) else np.frombuffer(a, dtype=np.float64 if a.typecode == "d" else np.int64)


def write_table(rows: list[dict], path_csv=None, path_json=None) -> None:
    """Rows of a comparison or sweep to CSV (union of keys, first-seen order) and/or a JSON list."""
    rows = list(rows)
    if path_csv is not None:
        columns = _columns(rows)
        with open(path_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(columns)
            for r in rows:
                w.writerow(["" if r.get(c) is None else r.get(c) for c in columns])
    if path_json is not None:
        write_json(rows, path_json)


def _columns(rows: list[dict]) -> list[str]:
    seen: dict[str, None] = {}
    for r in rows:
        for k in r:
            seen.setdefault(k, None)
    return list(seen)


def is_time_column(name: str) -> bool:
    """Latency columns held in seconds (shown in ms): ttft_p99, latency.tbt.mean, e2e, tbt_p99_<tier>, ...

    A column whose name already carries a unit (``ttft_p99_ms``, ``wall_s``) is shown as it is."""
    parts = name.replace(".", "_").split("_")
    if parts[0] == "latency":
        parts = parts[1:]
    if not parts or parts[-1] in ("ms", "s", "us"):
        return False
    return parts[0] in TIME_METRICS and not any(p in ("ok", "count", "attain", "attainment", "slo") for p in parts)


def format_table(rows: list[dict], columns: list[str] | None = None) -> str:
    """A fixed-width table for the terminal. Latency columns are shown in ms with ``(ms)`` in the header;
    other floats with 4 significant digits, missing or NaN values as ``-``."""
    rows = list(rows)
    columns = list(columns) if columns is not None else _columns(rows)
    heads = [f"{c} (ms)" if is_time_column(c) else c for c in columns]
    cells = [[_cell(r.get(c), is_time_column(c)) for c in columns] for r in rows]
    numeric = [all(_is_number(r.get(c)) or r.get(c) is None for r in rows) for c in columns]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(heads)]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(heads), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out)


def _is_number(v) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _cell(v, is_time: bool) -> str:
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v) * 1000) if is_time else str(int(v))
    if isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isnan(f):
            return "-"
        if math.isinf(f):
            return str(f)
        if is_time:
            f *= 1000
            return f"{f:.1f}" if abs(f) >= 10 else f"{f:.2f}"
        if abs(f) >= 1000 or f == int(f):
            return f"{f:.0f}"
        return f"{f:.4g}"
    return str(v)

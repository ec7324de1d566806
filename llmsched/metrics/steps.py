"""Per-step records packed row by row into one byte buffer: a long run has millions of steps, and a step's row is
written on the hot path (one ``struct`` pack, where twelve ``array.append`` calls took a fifth of a run's CPU, each
parsing its argument)."""
from __future__ import annotations

import struct
from array import array

import numpy as np

STEP_FIELDS = ("replica", "start", "duration", "prefill_tokens", "num_prefills",
               "num_decodes", "context_sum", "kv_used_blocks", "kv_total_blocks", "num_waiting", "num_running",
               "num_preempted")
_TYPES = {"start": "d", "duration": "d"}
# int, only in runs with a prefix cache: the prompt tokens the requests admitted in the step found cached (0 in most
# steps, so kept as (row, tokens) pairs of the steps with hits and written out as a column)
CACHED_STEP_FIELD = "cached_tokens"
# one step: int64s and doubles in the machine's byte order and standard sizes, as the columns' arrays hold them
ROW = struct.Struct("=" + "".join(_TYPES.get(name, "q") for name in STEP_FIELDS))
ROW_DTYPE = np.dtype([(name, "=f8" if name in _TYPES else "=i8") for name in STEP_FIELDS])
PACK = ROW.pack


class StepLog:
    """Column store of engine steps; one row per step of any replica. ``log.start`` (any field of STEP_FIELDS) is
    that column, a copy, as an ``array.array``; ``column(name)`` a numpy copy; ``arrays()`` every column as a numpy
    view."""

    __slots__ = ("rows", "hit_rows", "hit_tokens")

    def __init__(self):
        self.rows = bytearray()
        self.hit_rows = self.hit_tokens = None  # with a prefix cache: the rows whose admissions found cached tokens

    def keep_hits(self) -> None:
        """A replica with a prefix cache logs here: the log has the cached_tokens column."""
        if self.hit_rows is None:
            self.hit_rows, self.hit_tokens = array("q"), array("q")

    def add_hits(self, tokens: int) -> None:
        """The last row's admissions found ``tokens`` prompt tokens cached."""
        self.hit_rows.append(self.held() - 1)
        self.hit_tokens.append(tokens)

    @property
    def fields(self) -> tuple:
        return STEP_FIELDS if self.hit_rows is None else STEP_FIELDS + (CACHED_STEP_FIELD,)

    def cached_column(self) -> np.ndarray:
        """The cached_tokens column (a log with ``keep_hits``)."""
        col = np.zeros(self.held(), dtype=np.int64)
        col[np.frombuffer(self.hit_rows, dtype=np.int64)] = np.frombuffer(self.hit_tokens, dtype=np.int64)
        return col

    def add(self, replica: int, start: float, duration: float, prefill_tokens: int,
            num_prefills: int, num_decodes: int, context_sum: int, kv_used_blocks: int, kv_total_blocks: int,
            num_waiting: int, num_running: int, num_preempted: int) -> None:
        self.rows += PACK(replica, start, duration, prefill_tokens, num_prefills, num_decodes, context_sum,
                          kv_used_blocks, kv_total_blocks, num_waiting, num_running, num_preempted)

    def held(self) -> int:
        """The rows in memory (a streamed log has written the others out)."""
        return len(self.rows) // ROW.size

    def __len__(self) -> int:
        return self.held()

    def __getattr__(self, name: str):
        if name in ROW_DTYPE.fields:
            return array(_TYPES.get(name, "q"), self.column(name).tobytes())
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def column(self, name: str) -> np.ndarray:
        """One field of every row in memory, a numpy array of its own (the log may grow after)."""
        return np.frombuffer(self.rows, dtype=ROW_DTYPE)[name].copy()

    def columns(self) -> dict[str, array]:
        out = {name: getattr(self, name) for name in STEP_FIELDS}
        if self.hit_rows is not None:
            out[CACHED_STEP_FIELD] = array("q", self.cached_column().tobytes())
        return out

    def arrays(self) -> dict:
        """The columns as numpy arrays over the log's memory (strided, no copy): while one is held the log cannot
        take a row (its buffer cannot move), so drop them before the run goes on."""
        rows = np.frombuffer(self.rows, dtype=ROW_DTYPE)
        out = {name: rows[name] for name in STEP_FIELDS}
        if self.hit_rows is not None:
            out[CACHED_STEP_FIELD] = self.cached_column()
        return out

    def extend(self, columns: dict) -> None:
        """Append rows given as one numpy array per field (the merge of lanes' rows)."""
        n = len(columns["start"])
        if self.hit_rows is not None:
            col = columns[CACHED_STEP_FIELD]
            rows = np.flatnonzero(col)
            self.hit_rows.frombytes((rows + self.held()).astype(np.int64).tobytes())
            self.hit_tokens.frombytes(col[rows].astype(np.int64).tobytes())
        block = np.empty(n, dtype=ROW_DTYPE)
        for name in STEP_FIELDS:
            block[name] = columns[name]
        self.rows += block.tobytes()

    def clear(self) -> None:
        del self.rows[:]
        if self.hit_rows is not None:
            del self.hit_rows[:]
            del self.hit_tokens[:]

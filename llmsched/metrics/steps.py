"""Per-step records kept in compact typed arrays: a long run has millions of steps."""
from __future__ import annotations

from array import array

import numpy as np

STEP_FIELDS = ("replica", "start", "duration", "prefill_tokens", "num_prefills",
               "num_decodes", "context_sum", "kv_used_blocks", "kv_total_blocks", "num_waiting", "num_running",
               "num_preempted")
_TYPES = {"start": "d", "duration": "d"}
# int, only in runs with a prefix cache: the prompt tokens the requests admitted in the step found cached (0 in most
# steps, so kept as (row, tokens) pairs of the steps with hits and written out as a column)
CACHED_STEP_FIELD = "cached_tokens"


class StepLog:
    """Column store of engine steps; one row per step of any replica."""

    __slots__ = STEP_FIELDS + ("hit_rows", "hit_tokens")

    def __init__(self):
        for name in STEP_FIELDS:
            setattr(self, name, array(_TYPES.get(name, "q")))
        self.hit_rows = self.hit_tokens = None  # with a prefix cache: the rows whose admissions found cached tokens

    def keep_hits(self) -> None:
        """A replica with a prefix cache logs here: the log has the cached_tokens column."""
        if self.hit_rows is None:
            self.hit_rows, self.hit_tokens = array("q"), array("q")

    def add_hits(self, tokens: int) -> None:
        """The last row's admissions found ``tokens`` prompt tokens cached."""
        self.hit_rows.append(len(self.start) - 1)
        self.hit_tokens.append(tokens)

    @property
    def fields(self) -> tuple:
        return STEP_FIELDS if self.hit_rows is None else STEP_FIELDS + (CACHED_STEP_FIELD,)

    def cached_column(self) -> np.ndarray:
        """The cached_tokens column (a log with ``keep_hits``)."""
        col = np.zeros(len(self.start), dtype=np.int64)
        col[np.frombuffer(self.hit_rows, dtype=np.int64)] = np.frombuffer(self.hit_tokens, dtype=np.int64)
        return col

    def add(self, replica: int, start: float, duration: float, prefill_tokens: int,
            num_prefills: int, num_decodes: int, context_sum: int, kv_used_blocks: int, kv_total_blocks: int,
            num_waiting: int, num_running: int, num_preempted: int) -> None:
        self.replica.append(replica)
        self.start.append(start)
        self.duration.append(duration)
        self.prefill_tokens.append(prefill_tokens)
        self.num_prefills.append(num_prefills)
        self.num_decodes.append(num_decodes)
        self.context_sum.append(context_sum)
        self.kv_used_blocks.append(kv_used_blocks)
        self.kv_total_blocks.append(kv_total_blocks)
        self.num_waiting.append(num_waiting)
        self.num_running.append(num_running)
        self.num_preempted.append(num_preempted)

    def __len__(self) -> int:
        return len(self.start)

    def columns(self) -> dict[str, array]:
        out = {name: getattr(self, name) for name in STEP_FIELDS}
        if self.hit_rows is not None:
            out[CACHED_STEP_FIELD] = array("q", self.cached_column().tobytes())
        return out

    def arrays(self) -> dict:
        """The columns as numpy arrays over the same memory (valid until the next row is added)."""
        out = {name: np.frombuffer(getattr(self, name), dtype=np.float64 if name in _TYPES else np.int64)
               for name in STEP_FIELDS}
        if self.hit_rows is not None:
            out[CACHED_STEP_FIELD] = self.cached_column()
        return out

    def extend(self, columns: dict) -> None:
        """Append rows given as one numpy array per field (the merge of lanes' rows)."""
        if self.hit_rows is not None:
            col = columns[CACHED_STEP_FIELD]
            rows = np.flatnonzero(col)
            self.hit_rows.frombytes((rows + len(self.start)).astype(np.int64).tobytes())
            self.hit_tokens.frombytes(col[rows].astype(np.int64).tobytes())
        for name in STEP_FIELDS:
            col = getattr(self, name)
            col.frombytes(columns[name].astype("d" if col.typecode == "d" else "q", copy=False).tobytes())

    def clear(self) -> None:
        for name in STEP_FIELDS:
            del getattr(self, name)[:]
        if self.hit_rows is not None:
            del self.hit_rows[:]
            del self.hit_tokens[:]

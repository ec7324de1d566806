"""A step log that keeps no rows: chunks of steps go to steps.csv and into the totals the summary's step
statistics and Little's-law check need (``simulate --stream``).

The summary counts the steps that start within the measured span and clips busy time and the engine's
in-system count at the span's end: the last time a request left, unknown until the run ends. A step is folded
once it ends by the latest finish recorded so far (``settled_until``, never past the span's end, so clipping
leaves it as it is); the few that end later wait in a small tail for ``close``, which folds them with the span.
"""
from __future__ import annotations

import math

import numpy as np

from .steps import STEP_FIELDS, StepLog
from .writers import CHUNK_ROWS, csv_line, write_step_rows

FLOAT_COLUMNS = ("start", "duration")


class StepStream(StepLog):
    """Records like ``StepLog``; ``flush`` (called by the simulator when ``full``) writes the rows to ``path``
    (None: nowhere) and folds those that have settled."""

    __slots__ = ("path", "_file", "written", "tail", "count", "total_duration", "batch_tokens",
                 "prefill_tokens_sum", "prefills", "decodes", "util_weighted", "util_sum", "util_max", "busy",
                 "in_system", "last", "start_min", "closed", "headed")
    streamed = True

    def __init__(self, path=None):
        super().__init__()
        self.path = path
        self._file = open(path, "w", newline="") if path is not None else None
        self.headed = False  # the header waits for the replicas: a prefix cache's adds a column (keep_hits)
        self.written = 0
        self.tail = {name: np.empty(0, dtype=np.float64 if name in FLOAT_COLUMNS else np.int64)
                     for name in STEP_FIELDS}
        self.count = self.batch_tokens = self.prefill_tokens_sum = self.prefills = self.decodes = 0
        self.total_duration = self.util_weighted = self.util_sum = self.busy = self.in_system = 0.0
        self.util_max = -math.inf
        self.last: dict[int, tuple[float, int]] = {}  # per replica: end and waiting + running of its last step
        self.start_min = math.inf
        self.closed = False

    def __len__(self) -> int:
        return self.written + self.held()

    def head(self) -> None:
        if not self.headed:
            self._file.write(csv_line(self.fields))
            self.headed = True

    @property
    def full(self) -> bool:
        return self.held() >= CHUNK_ROWS

    def flush(self, settled_until: float) -> None:
        """Write the rows held; fold every step ending by ``settled_until`` (no later than the span's end)."""
        n = self.held()
        if not n:
            return
        if self._file is not None:
            self.head()
            write_step_rows(self._file, self)
        held = self.arrays()
        rows = {name: np.concatenate([self.tail[name], held[name]]) for name in STEP_FIELDS}
        del held  # views pin the columns: gone before they are cleared
        self.written += n
        StepLog.clear(self)
        end = rows["start"] + rows["duration"]
        settled = end <= settled_until
        self._fold({k: v[settled] for k, v in rows.items()}, -math.inf, settled_until, final=False)
        self.tail = {k: v[~settled] for k, v in rows.items()}

    def close(self, s0: float, s1: float) -> None:
        """The run ended: the span is [s0, s1]; write and fold everything left."""
        if self.closed:
            return
        self.flush(-math.inf)
        if self._file is not None:
            self.head()
            self._file.close()
        self._fold(self.tail, s0, s1, final=True)
        self.tail = {k: v[:0] for k, v in self.tail.items()}
        self.closed = True

    def columns(self):
        raise ValueError(f"a streamed run (--stream) keeps no step rows in memory; read "
                         f"{self.path or 'steps.csv'} or run without --stream")

    def _fold(self, rows: dict, s0: float, s1: float, final: bool) -> None:
        start, dur = rows["start"], rows["duration"]
        end = start + dur
        if len(start):
            self.start_min = min(self.start_min, float(start.min()))
        sel = (start >= s0) & (start <= s1)
        if sel.any():
            d, st = dur[sel], start[sel]
            prefill, decodes = rows["prefill_tokens"][sel], rows["num_decodes"][sel]
            util = rows["kv_used_blocks"][sel] / np.maximum(rows["kv_total_blocks"][sel], 1)
            self.count += int(sel.sum())
            self.total_duration += float(d.sum())
            self.batch_tokens += int((prefill + decodes).sum())
            self.prefill_tokens_sum += int(prefill.sum())
            self.prefills += int(rows["num_prefills"][sel].sum())
            self.decodes += int(decodes.sum())
            self.util_weighted += float((util * d).sum())
            self.util_sum += float(util.sum())
            self.util_max = max(self.util_max, float(util.max()))
            self.busy += float((np.minimum(st + d, s1) - st).sum())
        # Little's law from the engine's count: each step's (waiting + running) held until that replica's next
        # step end, clipped to the span
        replica = rows["replica"]
        count = rows["num_waiting"] + rows["num_running"]
        for r in np.unique(np.r_[replica, list(self.last)] if final else replica).tolist():
            m = replica == r
            t, v = end[m], count[m]
            prev = self.last.get(r)
            if prev is not None:
                t, v = np.r_[prev[0], t], np.r_[prev[1], v]
            if final:
                nxt = np.r_[t[1:], max(s1, t[-1])]
            else:
                nxt = t[1:]
                self.last[r] = (float(t[-1]), int(v[-1]))
            if len(nxt):
                span = np.clip(np.minimum(nxt, s1) - np.maximum(t[:len(nxt)], s0), 0.0, None)
                self.in_system += float((v[:len(nxt)] * span).sum())

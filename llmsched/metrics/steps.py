"""Per-step records kept in compact typed arrays: a long run has millions of steps."""
from __future__ import annotations

from array import array

import numpy as np

STEP_FIELDS = ("replica", "start", "duration", "prefill_tokens", "num_prefills",
               "num_decodes", "context_sum", "kv_used_blocks", "kv_total_blocks", "num_waiting", "num_running",
               "num_preempted")
_TYPES = {"start": "d", "duration": "d"}


class StepLog:
    """Column store of engine steps; one row per step of any replica."""

    __slots__ = STEP_FIELDS

    def __init__(self):
        for name in STEP_FIELDS:
            setattr(self, name, array(_TYPES.get(name, "q")))

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
        return {name: getattr(self, name) for name in STEP_FIELDS}

    def arrays(self) -> dict:
        """The columns as numpy arrays over the same memory (valid until the next row is added)."""
        return {name: np.frombuffer(getattr(self, name), dtype=np.float64 if name in _TYPES else np.int64)
                for name in STEP_FIELDS}

    def extend(self, columns: dict) -> None:
        """Append rows given as one numpy array per field (the merge of lanes' rows)."""
        for name in STEP_FIELDS:
            col = getattr(self, name)
            col.frombytes(columns[name].astype("d" if col.typecode == "d" else "q", copy=False).tobytes())

    def clear(self) -> None:
        for name in STEP_FIELDS:
            del getattr(self, name)[:]

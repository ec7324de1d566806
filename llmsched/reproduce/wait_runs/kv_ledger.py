"""Where a run's KV memory went, from its step log: in the batch, resident but paused, and the queue outside.

Ao et al.'s argument is about memory: WAIT keeps memory feasible by pausing cohorts (KV held, no progress) and by
holding prompts at stage 0 (no KV). The ledger makes that visible per run, time-weighted over steps:
``batch_kv`` (KV tokens the step's requests attend over), ``resident_kv`` (KV tokens held after the step, block
granular), ``paused_kv`` (resident minus batch: requests holding KV that the step did not advance, plus block
rounding), ``waiting`` (prompts queued outside the GPU) and the preemptions the replica made.
"""
from __future__ import annotations

import numpy as np


def kv_ledger(steps, block_size: int, replica: int | None = None) -> dict:
    """Time-weighted means (and the peak resident KV) of one replica's steps (all steps when ``replica`` is None)."""
    cols = steps.columns()
    sel = np.ones(len(steps), dtype=bool) if replica is None else np.asarray(cols["replica"]) == replica
    dur = np.asarray(cols["duration"], dtype=float)[sel]
    if not len(dur) or dur.sum() <= 0:
        return {"batch_kv": 0.0, "resident_kv": 0.0, "paused_kv": 0.0, "paused_share": 0.0, "waiting": 0.0,
                "peak_resident_kv": 0, "kv_total": 0, "preempted": 0}
    w = dur / dur.sum()
    batch = np.asarray(cols["context_sum"], dtype=float)[sel]
    resident = np.asarray(cols["kv_used_blocks"], dtype=float)[sel] * block_size
    paused = np.maximum(resident - batch, 0.0)
    return {"batch_kv": float(w @ batch), "resident_kv": float(w @ resident), "paused_kv": float(w @ paused),
            "paused_share": float(w @ paused) / max(float(w @ resident), 1e-9),
            "waiting": float(w @ np.asarray(cols["num_waiting"], dtype=float)[sel]),
            "peak_resident_kv": int(resident.max()),
            "kv_total": int(np.asarray(cols["kv_total_blocks"])[sel].max()) * block_size,
            "preempted": int(np.asarray(cols["num_preempted"])[sel].sum())}

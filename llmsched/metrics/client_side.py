"""A run's latencies where the client measures them, from the engine's stamps and the front end's costs.

The run records each request's engine stamps as always (``arrival`` = when the engine queued it, after the wait
for the step in flight where the engine reads new requests between steps; first token; finish) and the client's
send time (``sent``). ``to_client`` then rewrites the request log the way ``vllm bench serve`` measures:

* ``arrival`` := the send; the engine's queued stamp moves to ``queued``;
* ``ttft`` := first token + output delay − send; ``e2e`` := finish + output delay − send, each output delay
  ``front_end.output_delay(B)`` (``first_output_delay(B)`` for the first token) with B the requests that got a
  token in that step (the step's decodes and prompt chunks in steps.csv, on the request's replica). A stream
  reaches its client in order, so the last chunk never comes before the first: where the first chunk's longer
  path outlasts the steps between (a one-token output, or decode steps shorter than that difference) the E2E is
  the TTFT;
* ``tpot`` := (E2E − TTFT)/(output − 1), as vllm bench serve computes it;
* with ``stream_interval`` k > 1 a request's tokens reach the client in chunks (vLLM's output processor sends the
  first token at once, then every k tokens, and the last): its inter-token gaps become the chunks' (one per
  chunk after the first, as vllm bench serve's ITL counts them). With k = 1 the gaps are the engine's (the output
  delay differs between consecutive tokens only by the change in their steps' batch);

and keeps the engine's figures beside them (``engine_ttft``, ``engine_tpot``, ``engine_e2e``). With a client
timeout, a request the engine finished whose last byte would reach the client after the timeout is a failure
there (an HTTP client's total timeout ends the read): it becomes ABORTED, as the requests the timeout ended in the
engine are, its TTFT kept (the first token came) and no E2E.
"""
from __future__ import annotations

from array import array

import numpy as np

from ..request import Status
from .requests import SENT_FIELD


def step_batches(steps, replicas: np.ndarray, times: np.ndarray) -> np.ndarray:
    """For each (replica, time) pair, the requests that got a token in that replica's step ending at ``time``:
    its decodes plus its prompt chunks (a chunk that does not end its prompt counts too: steps.csv does not tell
    them apart). 0 where no step ends there (a request that never got a token)."""
    cols = steps.arrays() if hasattr(steps, "arrays") else steps
    out = np.zeros(len(times), dtype=np.float64)
    if not len(cols["start"]):
        return out
    ends = cols["start"] + cols["duration"]
    emitted = (cols["num_decodes"] + cols["num_prefills"]).astype(np.float64)
    step_replica = cols["replica"]
    for rep in np.unique(replicas):
        want = (replicas == rep) & np.isfinite(times)
        if rep < 0 or not want.any():
            continue
        rows = np.flatnonzero(step_replica == rep)
        if not len(rows):
            continue
        order = rows[np.argsort(ends[rows], kind="stable")]
        e = ends[order]
        t = times[want]
        i = np.clip(np.searchsorted(e, t), 0, len(e) - 1)
        before = np.clip(i - 1, 0, len(e) - 1)
        nearest = np.where(np.abs(e[before] - t) < np.abs(e[i] - t), before, i)
        out[want] = emitted[order[nearest]]
    return out


def to_client(log, steps, front_end, stream_interval: int = 1, client_timeout: float | None = None) -> None:
    """Rewrite ``log`` (a RequestLog recorded with ``client=True``) to the client's figures (module docstring)."""
    cols = log.cols
    if SENT_FIELD not in cols:
        raise ValueError("to_client needs a request log that recorded each request's send time (client=True)")
    col = log.column
    sent = col(SENT_FIELD).copy()
    queued = col("arrival").copy()
    first, finish = col("first_token"), col("finish")
    status, output = col("status"), col("output_len")
    replicas = col("replica")
    done = status == int(Status.FINISHED)
    out_first = front_end.first_output_delay(step_batches(steps, replicas, first))
    out_last = front_end.output_delay(step_batches(steps, replicas, np.where(done, finish, np.nan)))
    ttft = first + out_first - sent
    e2e = np.where(done, np.maximum(finish + out_last, first + out_first) - sent, np.nan)  # (in order)
    if client_timeout is not None:
        late = done & (e2e > client_timeout)
        if late.any():  # the engine finished, but its last byte came after the client gave up
            ids = col("id")
            for i in np.flatnonzero(late):
                log.reasons[int(ids[i])] = (f"aborted: no answer {client_timeout:g} s after the client sent it (client "
                                            f"timeout; the engine finished, its last byte {e2e[i]:.6g} s after the "
                                            f"send)")
            status[late] = int(Status.ABORTED)
            finish[late] = sent[late] + client_timeout
            done = done & ~late
            e2e[late] = np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(done & (output > 1), (e2e - ttft) / (output - 1), np.nan)
    for name, values in (("queued", queued), ("engine_ttft", col("ttft").copy()),
                         ("engine_tpot", col("tpot").copy()), ("engine_e2e", col("e2e").copy())):
        cols[name] = array("d", values.tobytes())
    for name, values in (("arrival", sent), ("ttft", ttft), ("tpot", tpot), ("e2e", e2e)):
        col(name)[:] = values
    del cols[SENT_FIELD]
    if stream_interval > 1:
        chunk_gaps(log, stream_interval)


def chunk_gaps(log, k: int) -> None:
    """Each request's inter-token gaps as its client sees them with vLLM's ``stream_interval`` k: the first token
    alone, then a chunk every k tokens, the last chunk at the finish; one gap per chunk after the first."""
    if not log.keep_gaps:
        raise ValueError(f"stream_interval {k}: the client's gaps are built from every token's time, which a "
                         f"sketch-mode run (--sketch) does not keep; run without --sketch or with stream_interval 1")
    cols = log.cols
    gaps = np.frombuffer(log.gaps, dtype=np.float64)
    counts = np.frombuffer(cols["num_gaps"], dtype=np.int64).copy()
    offsets = np.frombuffer(cols["gap_offset"], dtype=np.int64)
    targets = np.frombuffer(cols["tbt_slo"], dtype=np.float64)
    chunks = -(-counts // k)  # ceil: each chunk sums k engine gaps, the last perhaps fewer
    starts = [offsets[i] + np.arange(0, counts[i], k) for i in range(len(counts)) if counts[i]]
    starts = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    merged = np.add.reduceat(gaps, starts) if len(starts) else np.zeros(0)
    new_offsets = np.cumsum(chunks) - chunks
    max_gap = np.full(len(counts), np.nan)
    misses = np.zeros(len(counts), dtype=np.int64)
    has = chunks > 0
    if has.any():
        max_gap[has] = np.maximum.reduceat(merged, new_offsets[has])
        limit = np.repeat(np.where(np.isnan(targets), np.inf, targets), chunks)
        misses[has] = np.add.reduceat(merged > limit, new_offsets[has], dtype=np.int64)
    cols["num_gaps"][:] = array("q", chunks.tobytes())
    cols["gap_offset"][:] = array("q", new_offsets.astype(np.int64).tobytes())
    cols["max_gap"][:] = array("d", max_gap.tobytes())
    cols["tbt_misses"][:] = array("q", misses.tobytes())
    log.replace_gaps(merged)

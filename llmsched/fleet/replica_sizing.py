"""What one replica of a pool carries within latency targets, read off its own batch-time model: the figures NVIDIA
Dynamo's SLA planner takes from its pre-deployment profiling sweeps (ai-dynamo/dynamo, components/planner/src/dynamo/
planner/utils/perf_interpolation.py: prefill throughput and TTFT against the input length, decode throughput and
ITL against concurrency and context length), computed here from the model the simulator runs the replica with.

* **prefill**: one request of ``isl`` prompt tokens alone, in chunks of the step's token budget (vLLM's chunked
  prefill): its TTFT is the chunks' summed step times, its throughput ``isl / TTFT`` tokens/s (Dynamo's profiler
  runs the prefill engine at batch 1 the same way);
* **decode**: the largest batch of decodes at context ``context`` whose step fits the ITL target (within
  ``max_num_seqs`` and the KV cache), its throughput ``batch / step`` tokens/s (Dynamo's
  ``find_best_throughput_per_gpu``); when even one decode misses the target, one decode's figures.
"""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Decode:
    tokens_per_s: float
    itl: float
    batch: int


def prefill(rep, isl: float) -> tuple[float, float]:
    """(tokens/s, TTFT seconds) of a prompt of ``isl`` tokens alone on ``rep``'s engine."""
    n = max(1, int(round(isl)))
    budget = max(1, rep.config.max_num_batched_tokens)
    done, seconds = 0, 0.0
    while done < n:
        chunk = min(budget, n - done)
        seconds += rep.batch_time.prefill_time(chunk, done)
        done += chunk
    return n / seconds, seconds


def decode(rep, context: float, itl: float) -> Decode:
    """The best decode throughput of ``rep``'s engine at ``context`` tokens a request within ``itl`` seconds a step."""
    ctx = max(1, int(round(context)))
    most = held(rep, ctx)
    step = lambda b: rep.batch_time.decode_time(b, ctx)  # noqa: E731
    if step(1) > itl:
        return Decode(1 / step(1), step(1), 1)
    lo, hi = 1, most  # step(lo) <= itl; find the largest such batch (a step grows with its batch)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if step(mid) <= itl:
            lo = mid
        else:
            hi = mid - 1
    return Decode(lo / step(lo), step(lo), lo)


def request_rate(rep, isl: float, osl: float, itl: float) -> float:
    """Requests/s one replica serving whole requests carries: its time split between their prefills and their
    decodes at the ITL target, ``1 / (isl / prefill tokens/s + osl / decode tokens/s)``."""
    p, _ = prefill(rep, isl)
    d = decode(rep, isl + osl / 2, itl)
    per_request = isl / p + max(osl, 0.0) / d.tokens_per_s
    return 1 / per_request if per_request > 0 else math.inf


def seats(rep, isl: float | None = None, osl: float | None = None) -> int:
    """The requests one replica can run at once: ``max_num_seqs``, or fewer where its KV cache holds fewer requests
    of the workload's mean context (``isl + osl / 2`` tokens, a running request half-way through its output), when
    the lengths are known."""
    if not isl:
        return rep.config.max_num_seqs
    return held(rep, max(1, int(round(isl + (osl or 0.0) / 2))))


def held(rep, context: int) -> int:
    """The requests of ``context`` tokens each that ``rep`` runs at once: its sequence cap, or what its KV cache
    holds where that is fewer (at least one)."""
    return max(1, min(rep.config.max_num_seqs, rep.config.num_blocks * rep.config.block_size // context))

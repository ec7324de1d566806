"""What ``vllm bench serve`` sends before its run: its first prompt, so a replay starts with that prompt's blocks in
vLLM's prefix cache.

vllm/benchmarks/serve.py (vLLM 0.32) sends ``input_requests[0]`` once for the ready check when
``--ready-check-timeout-sec`` is above 0 (its default since vLLM PR #30975, December 2025, is 0; before, 600: a
result of an older vLLM names it in the line or meta.json), then ``--num-warmups`` times more, all at once up to
``--max-concurrency``, and waits for each to end before the run's first send. Each copy ran to its end, so the
run's first request finds its whole prompt cached (less the last token vLLM always computes), and a dataset's
first prefix is cached before its first prompt (tests/data/cpu_prefix_bench: vLLM's ``num_cached_tokens`` says so).
Copies in flight together reach as many DP ranks: vLLM's balancer gives each the least-loaded rank, counting the
copies it already sent there, so they spread over ranks 0, 1, ...; one sent alone lands on rank 0.
"""
from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from .bench_prefixes import read_flags
from .trace_error import TraceError

KEYS = ("num_warmups", "ready_check_timeout_sec", "max_concurrency")


@dataclass(frozen=True)
class Warmups:
    """The first prompt sent ``sends`` times before the run, ``at_once`` of them in flight together."""

    sends: int
    at_once: int

    @property
    def note(self) -> str:
        times = "once" if self.sends == 1 else f"{self.sends} times"
        more = "" if self.at_once == 1 else (f", and of up to {self.at_once - 1} more where the run has them "
                                             f"({self.at_once} copies sent at once)")
        return (f"vllm bench serve sent its first prompt {times} before the run (ready check and --num-warmups): "
                f"the replay starts with its blocks in the prefix cache of the first replica{more}")


@dataclass(frozen=True)
class SentBefore:
    """The prompt a replay's client sent before the run: its length, its content (given the run's longest prompt,
    ``max_prompt``, as a trace's contents take it) and how many replicas' caches it reached."""

    prompt_len: int
    content: Callable
    at_once: int


def bench_warmups(client: dict | None, max_concurrency, where: str) -> Warmups | None:
    """The warm-ups of the vllm bench serve run ``client`` describes (meta.json's, or ``--bench-command``'s:
    ``num_warmups``, ``ready_check_timeout_sec`` and ``max_concurrency`` by name or among its ``dataset_args``
    flags); ``max_concurrency``: the result's own. None where it sent nothing before the run, or says nothing."""
    if not client:
        return None
    args = client.get("dataset_args")
    if isinstance(args, str):
        args = shlex.split(args)
    flags = where if client.get("given_by") else f"{where}.dataset_args"  # (--bench-command's words, or meta.json's)
    found = read_flags(args, flags, KEYS) if isinstance(args, list) else {}
    found.update({k: client[k] for k in KEYS if client.get(k) is not None})
    if max_concurrency is not None:
        found.setdefault("max_concurrency", max_concurrency)
    for key, value in found.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < (1 if key == "max_concurrency" else 0):
            raise TraceError(f"{where + ': ' if where else ''}{key} is {value!r}; vllm bench serve takes an integer "
                             f">= {1 if key == 'max_concurrency' else 0}")
    warmups = found.get("num_warmups", 0)
    sends = warmups + (found.get("ready_check_timeout_sec", 0) > 0)
    if not sends:
        return None
    at_once = min(warmups, found.get("max_concurrency") or warmups) or 1
    return Warmups(sends, at_once)

"""What ``vllm bench serve`` sends before its run: its first prompt, so a replay starts with that prompt's blocks in
vLLM's prefix cache.

vllm/benchmarks/serve.py (vLLM 0.32) sends ``input_requests[0]`` once for the ready check when
``--ready-check-timeout-sec`` is above 0 (its default since vLLM PR #30975, December 2025, is 0; before, 600: a
result of an older vLLM names it in the line or meta.json), then ``--num-warmups`` times more, and waits for each to
end before the run's first send. Each copy ran to its end, so the run's first request finds its whole prompt cached
(less the last token vLLM always computes), and a dataset's first prefix is cached before its first prompt
(tests/data/cpu_prefix_bench: vLLM's ``num_cached_tokens`` says so). Under data parallelism the copies reach one DP
rank each, round-robin from rank 0: vLLM 0.32's balancer (``DPLBAsyncMPClient.get_core_engine_for_request``,
vllm/v1/engine/core_client.py) scores each rank by its load and rotates the rank its scan starts from after every
request, so idle ranks are taken in turn whether the copies went at once or one by one.
"""
from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from .bench_prefixes import read_flags
from .trace_error import TraceError

KEYS = ("num_warmups", "ready_check_timeout_sec")


@dataclass(frozen=True)
class Warmups:
    """The first prompt sent ``sends`` times before the run (one DP rank each, round-robin from rank 0)."""

    sends: int

    @property
    def note(self) -> str:
        if self.sends == 1:
            return ("vllm bench serve sent its first prompt once before the run (ready check and --num-warmups): the "
                    "replay starts with its blocks in the prefix cache of the first replica")
        return (f"vllm bench serve sent its first prompt {self.sends} times before the run (ready check and "
                f"--num-warmups): the replay starts with its blocks in the prefix cache of the first replica, and of "
                f"up to {self.sends - 1} more where the run has them (vLLM's balancer gives each copy the next idle "
                f"rank)")


@dataclass(frozen=True)
class SentBefore:
    """The prompt a replay's client sent before the run: its length, its content (given the run's longest prompt,
    ``max_prompt``, as a trace's contents take it) and how many replicas' caches it reached (the first ones)."""

    prompt_len: int
    content: Callable
    replicas: int


def bench_warmups(client: dict | None, where: str) -> Warmups | None:
    """The warm-ups of the vllm bench serve run ``client`` describes (meta.json's, or ``--bench-command``'s:
    ``num_warmups`` and ``ready_check_timeout_sec`` by name or among its ``dataset_args`` flags); None where it sent
    nothing before the run, or says nothing."""
    if not client:
        return None
    args = client.get("dataset_args")
    if isinstance(args, str):
        args = shlex.split(args)
    flags = where if client.get("given_by") else f"{where}.dataset_args"  # (--bench-command's words, or meta.json's)
    found = read_flags(args, flags, KEYS) if isinstance(args, list) else {}
    found.update({k: client[k] for k in KEYS if client.get(k) is not None})
    for key, value in found.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TraceError(f"{where + ': ' if where else ''}{key} is {value!r}; vllm bench serve takes an integer "
                             f">= 0")
    sends = found.get("num_warmups", 0) + (found.get("ready_check_timeout_sec", 0) > 0)
    return Warmups(sends) if sends else None

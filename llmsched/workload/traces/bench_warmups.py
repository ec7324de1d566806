"""What ``vllm bench serve`` sends before its run: its first prompt, so a replay starts with that prompt's blocks in
vLLM's prefix cache.

vllm/benchmarks/serve.py (vLLM 0.32) sends ``input_requests[0]`` once for the ready check when
``--ready-check-timeout-sec`` is above 0, then ``--num-warmups`` times more, and waits for each to end before the
run's first send. The ready check's default depends on the release (read in the sdists on PyPI, 0.9.2-0.14.0):
vLLM 0.14.0 took PR #30975 (December 2025) and skips it by default (0); 0.11.0-0.13.x waited up to 600 s, so sent
the prompt unless told 0; 0.10.1 and 0.10.2 took the timeout but sent the prompt whatever it was, and before them
``vllm bench serve`` and the older ``benchmarks/benchmark_serving.py`` (a stub since 0.11) always sent this
"initial single prompt test run". A line or meta.json that names the flag says; otherwise the run's
``vllm_version`` (meta.json's, or ``--vllm-version``) does, and a run of unknown release is taken as today's (no
ready check) with a note saying how to tell. ``--num-warmups`` (PR #26943) is in 0.11.1 and later.

Each copy ran to its end, so the run's first request finds its whole prompt cached (less the last token vLLM
always computes), and a dataset's first prefix is cached before its first prompt
(tests/data/cpu_prefix_bench: vLLM's ``num_cached_tokens`` says so). Under data parallelism the copies reach one DP
rank each, round-robin from rank 0: vLLM 0.32's balancer (``DPLBAsyncMPClient.get_core_engine_for_request``,
vllm/v1/engine/core_client.py) scores each rank by its load and rotates the rank its scan starts from after every
request, so idle ranks are taken in turn whether the copies went at once or one by one.
"""
from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from ...hardware.vllm_memory import parse_release
from .bench_prefixes import read_flags
from .trace_error import TraceError

KEYS = ("num_warmups", "ready_check_timeout_sec")
CHECK_SKIPPED_FROM = (0, 14, 0)  # the first release whose ready check defaults to 0 (PR #30975)
CHECK_OPTIONAL_FROM = (0, 11, 0)  # the first release that sends no probe for --ready-check-timeout-sec 0
UNSTATED_NOTE = ("vllm bench serve's ready check is taken as skipped, today's default: its release is unknown and "
                 "its line names no --ready-check-timeout-sec; before vLLM 0.14 it sent the first prompt once before "
                 "the run (give --vllm-version, meta.json's vllm_version, or the flag, if so)")


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


def bench_warmups(client: dict | None, where: str, version: str | None = None) -> Warmups | None:
    """The warm-ups of the vllm bench serve run ``client`` describes (meta.json's, or ``--bench-command``'s:
    ``num_warmups`` and ``ready_check_timeout_sec`` by name or among its ``dataset_args`` flags) under vLLM release
    ``version`` (None: unknown); None where it sent nothing before the run, or says nothing."""
    client = client or {}
    found = warmup_flags(client, where)
    sends = found.get("num_warmups", 0) + ready_check_sends(client, found, version)
    return Warmups(sends) if sends else None


def ready_check_sends(client: dict, found: dict, version: str | None) -> int:
    """1 where the run's ready check sent the first prompt before it (module docstring: by script, flag, release)."""
    release = parse_release(version)
    if client.get("script") or (release is not None and release < CHECK_OPTIONAL_FROM):
        return 1
    timeout = found.get("ready_check_timeout_sec")
    if timeout is None:
        return int(release is not None and release < CHECK_SKIPPED_FROM)
    return int(timeout > 0)


def unstated_ready_check(client: dict | None, where: str, version: str | None) -> bool:
    """True where a vllm bench serve run's ready check was taken as today's default only because neither its line
    nor its release says (``UNSTATED_NOTE``)."""
    client = client or {}
    return (parse_release(version) is None and not client.get("script")
            and "ready_check_timeout_sec" not in warmup_flags(client, where))


def warmup_flags(client: dict, where: str) -> dict:
    """``num_warmups`` and ``ready_check_timeout_sec`` where ``client`` names them, each checked."""
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
    return found

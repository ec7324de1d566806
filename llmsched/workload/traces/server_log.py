"""Per-request logs of real servers, read as they are published: what arrived when, how long it was, and (where
the log has them) what the server measured.

The formats, told apart by the file's name and content:

* **requests.jsonl** (LLMServingSim's ``bench/examples/*/vllm/requests.jsonl``, and llmsched's own GPU captures,
  ``scripts/vllm_gpu_replay.py``): one JSON object a line with ``input_toks``, ``output_toks``, ``arrival_time``
  (the client's send time, Unix seconds) and the engine's monotonic-clock ``queued_ts``, ``first_token_ts``,
  ``last_token_ts``. TTFT = first_token_ts − queued_ts and E2E = last_token_ts − queued_ts, so the replay's
  arrivals are the ``queued_ts`` (the engine's own arrival; ``arrival_time`` where a log has no ``queued_ts``).
  Lines must be in ``arrival_time`` order (the client's); ``queued_ts`` of two DP engines may swap by a fraction of
  a millisecond, and the replay sorts them. Optional, on every line or on none: ``hash_ids``, the prompt's block
  ids as Mooncake gives them (one per 512 tokens, the last block partial; llmsched's captures build each block's
  tokens from its id, so equal ids are equal tokens and vLLM's prefix cache finds them), which give the replayed
  prompts the same content (workload/traces/hash_blocks.py); and ``num_cached_tokens``, vLLM's count of the prompt
  tokens its prefix cache held (RequestOutput.num_cached_tokens).
  Where the log also has the client's own stamps on one monotonic clock with the engine's (``client_sent``,
  ``client_first``, ``client_last``: llmsched's captures, ``scripts/vllm_gpu_replay.py``,
  ``scripts/client_capture.py``), it can be read at the client (``clock="client"``): arrivals are the sends and
  TTFT = client_first − client_sent, E2E = client_last − client_sent. A log without them read at the client
  replays its ``arrival_time`` (the client's send) and has no client timings to compare.
* **vllm bench serve --save-result --save-detailed** JSON (vllm/benchmarks/serve.py, ``result`` dict): lists
  ``input_lens``, ``output_lens``, ``ttfts``, ``itls`` (each request's inter-token gaps), ``latencies`` (E2E;
  vLLM 0.26 and older save none, and the E2E is then the TTFT plus the ITLs), ``start_times`` (client send times,
  ``time.perf_counter``) and ``errors``, one entry a request in send order. Its timings are the client's. A result
  saved before vLLM recorded ``start_times`` has its sends drawn from its ``request_rate`` and ``burstiness``, or,
  capped by ``max_concurrency`` with every request sent at once, is replayed as that closed loop
  (workload/traces/bench_sends.py). Its prompts share the prefixes its dataset gave them where meta.json's
  ``client`` beside it (or ``--bench-command``) names the dataset (workload/traces/bench_prefixes.py), and the
  first prompt its ready check and warm-ups sent before the run starts the replay cached
  (workload/traces/bench_warmups.py), as a requests.jsonl's do.
* **inference-perf**'s per-request report (``per_request_lifecycle_metrics.json``,
  workload/traces/inference_perf_requests.py): each request's send, last byte and token times at the client.
* **AIPerf**'s per-request export (``profile_export.jsonl``, workload/traces/aiperf_records.py): each request's
  send, TTFT and latency at the client, its warm-up phase included.
* **GuideLLM** report JSON (``guidellm run --output kind=json``; ``GenerativeBenchmarksReport``,
  workload/traces/guidellm_report.py): each benchmark's successful requests with their client timings.

A row that cannot be replayed is an error naming the file, the line (or list index) and the field, never
skipped: a missing field, arrivals out of order, a zero prompt or output. A request the client saw fail is replayed
with the tokens it got, or left out with a note where it got none (workload/traces/failed_requests.py).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .bench_prefixes import BenchPrefixes, bench_prefixes
from .bench_sends import CLOSED_LOOP_NOTE, closed_loop_cap, unrecorded_sends
from .bench_warmups import UNSTATED_NOTE, SentBefore, Warmups, bench_warmups, unstated_ready_check
from .client_settings import bench_notes
from .conversations import jsonl_turn, take_turns
from .failed_requests import FailedRequests, error_text
from .hash_blocks import block_content, check_blocks, own_content, prefixed_content
from .jsonl import capped, chunked, integers
from ..generators.sessions import first_prompt, next_prompt
from .trace_error import TraceError

JSONL_FIELDS = ("input_toks", "output_toks")
BENCH_FIELDS = ("input_lens", "output_lens")  # and start_times, where the vLLM that ran it recorded them
BENCH_MEASURED = ("ttfts", "latencies")


@dataclass
class ServerLog:
    """One run's requests in arrival order: replay inputs and, where measured, per-request latencies (seconds)."""

    path: Path
    format: str                      # "requests.jsonl" or "vllm-bench"
    ids: list[str]
    arrivals: np.ndarray             # seconds after the first arrival, non-decreasing
    prompt_lens: np.ndarray
    output_lens: np.ndarray
    boundary: str = "engine"         # where ``ttft`` and ``e2e`` were measured: "engine" or "client"
    # per request; None when the log has no timings, NaN for a request that loaded the server but has no
    # latencies to compare (GuideLLM's incomplete requests, cancelled at the benchmark's end)
    ttft: np.ndarray | None = None
    e2e: np.ndarray | None = None
    itls: list[np.ndarray] | None = None   # every inter-token gap of each request (vllm-bench only)
    hash_ids: list[list[int]] | None = None   # each prompt's 512-token block ids, where the log names them
    cached_tokens: np.ndarray | None = None  # prompt tokens the server's prefix cache held, where it counted them
    model: str | None = None         # the model the log names (a vllm bench serve result's model_id)
    # a bench result without send times: the client's cap on requests in flight, which its replay keeps (a closed
    # loop over the requests in order; None: an open loop at ``arrivals``), and the run's measured duration
    in_flight: int | None = None
    span: float | None = None
    notes: list[str] = field(default_factory=list)
    failed: FailedRequests | None = None  # the requests the client saw fail (workload/traces/failed_requests.py)
    prefixes: BenchPrefixes | None = None  # the prefixes a bench dataset's prompts began with, in the log's order
    bench_command: str | None = None  # the `vllm bench serve` line given for a log saved without meta.json
    # the prompt its client sent before the run (vllm bench serve's ready check and warm-ups: its first), by its
    # index here, and how
    warm_index: int | None = None
    warmups: Warmups | None = None
    # a client that sent conversations (AIPerf's, GuideLLM's multi-turn; a requests.jsonl's session and turn): per
    # request, the index here of its conversation's turn before it (-1: a first turn), whose prompt and reply its own
    # prompt starts with (workload/traces/conversations.py)
    turns: np.ndarray | None = None
    lines: list[int] | None = None  # each request's line in the file (a requests.jsonl's), for errors naming it

    def __len__(self) -> int:
        return len(self.prompt_lens)

    @property
    def measured(self) -> bool:
        return self.ttft is not None and self.e2e is not None

    @property
    def compared(self) -> np.ndarray:
        """Per request, whether its latencies were measured (and are compared)."""
        return ~np.isnan(self.e2e)

    @property
    def tpot(self) -> np.ndarray:
        """(E2E − TTFT) / (output − 1) per compared request with more than one output token."""
        more = (self.output_lens > 1) & self.compared
        return (self.e2e[more] - self.ttft[more]) / (self.output_lens[more] - 1)

    def contents(self, n: int, chunk: int, max_prompt: int | None = None):
        """The first ``n`` prompts' contents from their hash_ids, in lists of ``chunk`` (``JsonlTrace.contents``);
        without hash_ids each prompt is its own (``own_content``: it finds its own blocks after a preemption)."""
        if self.turns is not None:
            known: dict = {}  # index -> its uncapped content, for the turns after it
            return chunked((capped(self.turn_content(i, known), int(self.prompt_lens[i]), max_prompt)
                            for i in range(len(self))), n, chunk)
        return chunked((self.content_at(i, max_prompt) for i in range(len(self))), n, chunk)

    def content_at(self, i: int, max_prompt: int | None = None):
        """Request ``i``'s prompt content (``contents``' item ``i``)."""
        prompt = int(self.prompt_lens[i])
        if self.turns is not None:
            return capped(self.turn_content(i, {}), prompt, max_prompt)
        if self.prefixes is not None:
            return prefixed_content(i, prompt, int(self.prefixes.group[i]), int(self.prefixes.length[i]), max_prompt)
        if self.hash_ids is None:
            return own_content(i, prompt, max_prompt)
        return block_content(i, prompt, self.hash_ids[i], max_prompt)

    def turn_content(self, i: int, known: dict):
        """Request ``i``'s prompt in its conversation (``turns``): the turn before it, prompt and reply, then its own
        text (``generators.sessions.next_prompt``, as a sessions trace's later turns); a prompt shorter than that
        history starts with as much of it as it holds. ``known``: contents already built, by index (it gains
        ``i``'s)."""
        before, prompt = int(self.turns[i]), int(self.prompt_lens[i])
        if before < 0:
            content = first_prompt(i, (), prompt)
        else:
            earlier = known.get(before)
            if earlier is None:
                earlier = self.turn_content(before, known)
            reply = int(self.output_lens[before])
            content = next_prompt(earlier, reply, i, max(prompt, earlier.length + reply)).cut(prompt)
        known[i] = content
        return content

    def take_failures(self, failures: FailedRequests | None) -> None:
        """The requests its client saw fail (None: none), said in its notes."""
        if failures:
            self.failed = failures
            self.notes.append(failures.note)

    def sent_before(self) -> SentBefore | None:
        """The prompt its client sent before the run, as the replay warms the prefix cache with it."""
        if self.warm_index is None:
            return None
        i = self.warm_index
        return SentBefore(int(self.prompt_lens[i]), lambda max_prompt: self.content_at(i, max_prompt),
                          self.warmups.sends)


def read_server_log(path, measured: bool = False, clock: str = "engine", client: dict | None = None,
                    version: str | None = None) -> ServerLog:
    """The log at ``path`` (``*.jsonl``: requests.jsonl; ``*.json``: a vllm bench serve result, a GuideLLM report
    of one benchmark or inference-perf's per-request report). ``measured``: the per-request timings are required
    too (validation), not only what a replay needs. ``clock``: a requests.jsonl's arrivals and timings as the
    engine stamped them ("engine", its queued_ts) or as its client did ("client"); the other formats are the
    client's either way. ``client``: how a vllm bench serve run sent them, for a log saved without meta.json
    (``bench_command.bench_client``: ``--bench-command``); else meta.json's beside the log. ``version``: the run's
    vLLM release (``--vllm-version``), else meta.json's: what its benchmark sent before the run depends on it."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file; give a requests.jsonl or a `vllm bench serve --save-result "
                         f"--save-detailed` JSON")
    if clock not in ("engine", "client"):
        raise ValueError(f"clock {clock!r}: a log is read at the engine or at the client")
    if path.suffix == ".jsonl":
        return _read_jsonl(path, measured, clock, with_version(log_client(path, client), version))
    if path.suffix == ".json":
        data = read_json(path)
        if isinstance(data, dict) and "benchmarks" in data:
            from .guidellm_report import read_guidellm
            not_bench(path, client, "a GuideLLM report")
            return read_guidellm(path, data, measured)
        if isinstance(data, list):
            from .inference_perf_requests import is_per_request, read_per_request
            if is_per_request(data):
                not_bench(path, client, "an inference-perf per-request report")
                return read_per_request(path, data, measured)
        return _read_bench(path, measured, data, with_version(log_client(path, client), version), version)
    raise TraceError(f"{path}: a server log is a requests.jsonl (one JSON object a line) or a vllm bench serve "
                     f"result .json")


def read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TraceError(f"{path}: not a JSON file ({e})") from None


CLIENT_STAMPS = ("client_sent", "client_first", "client_last")


def log_client(path: Path, given: dict | None) -> dict | None:
    """How the benchmark behind the log at ``path`` sent its requests: ``given`` (``--bench-command``), or the
    ``client`` of the meta.json beside it; both is an error (the option is for a result saved without one)."""
    found = client_of(path)
    if given is None:
        return found
    if found is not None:
        raise TraceError(f"{path.parent / 'meta.json'}: its client says how the benchmark ran, and --bench-command "
                         f"gives another; the option is for a result saved without meta.json (drop one of them)")
    return given


def with_version(client: dict | None, version: str | None) -> dict | None:
    """``client`` with the run's vLLM release, where one is given (what it sent before the run depends on it)."""
    return {**client, "vllm_version": version} if client is not None and version is not None else client


def not_bench(path: Path, client, what: str) -> None:
    """``--bench-command`` (``client``, parsed or not) given for a log of another client is refused."""
    if client is not None:
        raise TraceError(f"{path}: {what}, not a vllm bench serve result; --bench-command applies to those (and to "
                         f"a requests.jsonl of a run they drove): drop it")


def client_where(path: Path, client: dict | None) -> str:
    """Where ``client`` came from, for errors: the option that gave it, or the meta.json beside ``path``."""
    return (client or {}).get("given_by") or f"{path.parent / 'meta.json'}: client"


def _read_jsonl(path: Path, measured: bool, clock: str = "engine", client: dict | None = None) -> ServerLog:
    rows, lines = [], []
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"{path}:1: not a UTF-8 text file; a requests.jsonl has one JSON object a line") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"{path}:{n}: not a JSON object ({e.msg}); a requests.jsonl has one a line") from None
        if not isinstance(row, dict):
            raise TraceError(f"{path}:{n}: not a JSON object; a requests.jsonl has one a line")
        rows.append(row)
        lines.append(n)
    if not rows:
        raise TraceError(f"{path}:1: no requests in the file")
    from .aiperf_records import is_aiperf, read_aiperf
    if is_aiperf(rows[0]):
        not_bench(path, client if client and client.get("given_by") else None, "an AIPerf export")
        return read_aiperf(path, rows, lines, measured)
    if clock == "client":
        return _read_jsonl_client(path, rows, lines, measured, client)
    clock = "queued_ts" if "queued_ts" in rows[0] else "arrival_time"
    wanted = JSONL_FIELDS + ("arrival_time",) + ((clock,) if clock != "arrival_time" else ())
    if measured:
        wanted += ("first_token_ts", "last_token_ts")
    for row, n in zip(rows, lines):
        missing = [k for k in wanted if row.get(k) is None]
        if missing:
            raise TraceError(f"{path}:{n}: no {', '.join(missing)}; every line needs {', '.join(wanted)}")
    prompts = token_counts(path, "input_toks", [r["input_toks"] for r in rows], lines)
    outputs = token_counts(path, "output_toks", [r["output_toks"] for r in rows], lines)
    sent = seconds(path, "arrival_time", [r["arrival_time"] for r in rows], lines)
    check_order(path, "arrival_time", sent, lines)
    queued = seconds(path, clock, [r[clock] for r in rows], lines)
    order = np.argsort(queued, kind="stable")
    ids = [str(r.get("request_id", i)) for i, r in enumerate(rows)]
    log = ServerLog(path, "requests.jsonl", [ids[i] for i in order], queued[order] - queued[order[0]],
                    prompts[order], outputs[order], lines=[lines[i] for i in order])
    if clock == "arrival_time":
        log.notes.append("no queued_ts: arrivals are the client's arrival_time")
    if all(r.get("first_token_ts") is not None and r.get("last_token_ts") is not None for r in rows):
        _read_latencies(path, rows, lines, (clock, queued), "first_token_ts", "last_token_ts", order, log)
    _read_prefix_fields(path, rows, lines, prompts, order, log, client)
    return log


def _read_latencies(path: Path, rows: list[dict], lines: list[int], start: tuple[str, np.ndarray], first_key: str,
                    last_key: str, order: np.ndarray, log: ServerLog) -> None:
    """TTFT and E2E, in ``order``, from each line's first- and last-token stamps less its ``start`` (the clock's
    name and times): the engine's and the client's stamps are read alike."""
    clock, start_times = start
    first = seconds(path, first_key, [r[first_key] for r in rows], lines)
    last = seconds(path, last_key, [r[last_key] for r in rows], lines)
    for i, n in enumerate(lines):
        if not start_times[i] <= first[i] <= last[i]:
            raise TraceError(f"{path}:{n}: needs {clock} <= {first_key} <= {last_key}, got {clock} = "
                             f"{float(start_times[i])}, {first_key} = {float(first[i])}, {last_key} = "
                             f"{float(last[i])}; fix the line's stamps or remove the line")
    log.ttft, log.e2e = (first - start_times)[order], (last - start_times)[order]


def _read_prefix_fields(path: Path, rows: list[dict], lines: list[int], prompts: np.ndarray, order: np.ndarray,
                        log: ServerLog, client: dict | None) -> None:
    """The optional hash_ids and num_cached_tokens, in ``order``; without hash_ids, the prefixes the bench dataset
    the ``client`` (``log_client``) names gave the prompts (the lines are in the client's send order, as the
    bench's are)."""
    if _on_every_line(path, rows, lines, "hash_ids"):
        ids = [integers(path, n, "hash_ids", r["hash_ids"], ID_FIX) for r, n in zip(rows, lines)]
        for row_ids, prompt, n in zip(ids, prompts, lines):
            check_blocks(path, n, int(prompt), row_ids, "input_toks", ID_FIX)
        log.hash_ids = [ids[i] for i in order]
    elif (shared := bench_prefixes(client, len(rows), prompts, client_where(path, client))):
        log.prefixes = BenchPrefixes(shared.group[order], shared.length[order], shared.note)
        log.notes.append(shared.note)
    else:
        turns = [jsonl_turn(f"{path}:{n}", r) for r, n in zip(rows, lines)]
        take_turns(log, [turns[i] for i in order], "its client")
    if client and (client.get("tool") == "vllm bench serve" or client.get("given_by")):
        take_warmups(log, path, client, order == 0)
    if _on_every_line(path, rows, lines, "num_cached_tokens"):
        cached = np.array([_cached(path, r["num_cached_tokens"], p, n) for r, p, n in zip(rows, prompts, lines)],
                          np.int64)
        log.cached_tokens = cached[order]


def take_warmups(log: ServerLog, path: Path, client: dict | None, first: np.ndarray,
                 version: str | None = None) -> None:
    """What the vllm bench serve run ``client`` (None: meta.json says nothing of it) sent before the run
    (workload/traces/bench_warmups.py, under the release meta.json or ``--vllm-version`` names): ``first`` marks its
    first prompt among the log's
    requests, in the log's order (none where it failed in the run with no token: it is not replayed)."""
    where = client_where(path, client)
    version = version or (client or {}).get("vllm_version") or meta_version(path)
    if unstated_ready_check(client, where, version):
        log.notes.append(UNSTATED_NOTE)
    warmups = bench_warmups(client, where, version)
    if warmups is None:
        return
    at = np.flatnonzero(first)
    if not len(at):
        log.notes.append("vllm bench serve sent its first prompt before the run, and the run's own copy of it failed "
                         "with no token, so it is not replayed: the replay starts with a cold prefix cache")
        return
    log.warmups, log.warm_index = warmups, int(at[0])
    log.notes.append(warmups.note)


def _read_jsonl_client(path: Path, rows: list[dict], lines: list[int], measured: bool,
                       client: dict | None = None) -> ServerLog:
    """A requests.jsonl at the client: arrivals are the sends (``client_sent``, else ``arrival_time``), timings the
    client's stamps."""
    stamped = _on_every_line(path, rows, lines, "client_sent")
    clock = "client_sent" if stamped else "arrival_time"
    wanted = JSONL_FIELDS + (clock,) + (CLIENT_STAMPS[1:] if measured else ())
    for row, n in zip(rows, lines):
        missing = [k for k in wanted if row.get(k) is None]
        if missing:
            fix = ("measure it at the engine (--latency-boundary engine) or capture the client's stamps "
                   "(scripts/client_capture.py)" if set(missing) & set(CLIENT_STAMPS) else
                   f"every line needs {', '.join(wanted)}")
            raise TraceError(f"{path}:{n}: no {', '.join(missing)} for a client-side reading; {fix}")
    prompts = token_counts(path, "input_toks", [r["input_toks"] for r in rows], lines)
    outputs = token_counts(path, "output_toks", [r["output_toks"] for r in rows], lines)
    if all(r.get("arrival_time") is not None for r in rows):  # the file's order, as the engine's reading checks it
        check_order(path, "arrival_time", seconds(path, "arrival_time", [r["arrival_time"] for r in rows], lines),
                    lines)
    sent = seconds(path, clock, [r[clock] for r in rows], lines)
    order = np.argsort(sent, kind="stable")
    ids = [str(r.get("request_id", i)) for i, r in enumerate(rows)]
    log = ServerLog(path, "requests.jsonl", [ids[i] for i in order], sent[order] - sent[order[0]], prompts[order],
                    outputs[order], boundary="client", lines=[lines[i] for i in order])
    if not stamped:
        log.notes.append("no client_sent: arrivals are the client's arrival_time")
    if all(r.get(k) is not None for r in rows for k in CLIENT_STAMPS):
        _read_latencies(path, rows, lines, (clock, sent), "client_first", "client_last", order, log)
    _read_prefix_fields(path, rows, lines, prompts, order, log, client)
    return log


ID_FIX = "hash_ids list one integer block id per 512 prompt tokens, as Mooncake's traces do"


def _on_every_line(path: Path, rows: list[dict], lines: list[int], key: str) -> bool:
    """Whether the optional ``key`` is on every line (False: on none); on some only is an error."""
    have = [row.get(key) is not None for row in rows]
    if all(have):
        return True
    if any(have):
        n, with_it = lines[have.index(False)], lines[have.index(True)]
        raise TraceError(f"{path}:{n}: no {key}, but line {with_it} has one; give {key} on every line or on none")
    return False


def _cached(path: Path, value, prompt: int, n: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        raise TraceError(f"{path}:{n}: num_cached_tokens is {value!r}, not a whole number of tokens")
    if not 0 <= value <= prompt:
        raise TraceError(f"{path}:{n}: num_cached_tokens is {value!r}, outside 0..input_toks ({prompt}); it counts "
                         f"the prompt tokens the prefix cache held")
    return int(value)


def _read_bench(path: Path, measured: bool, data, client: dict | None = None,
                version: str | None = None) -> ServerLog:
    if not isinstance(data, dict):
        raise TraceError(f"{path}: not a vllm bench serve result (a JSON object with input_lens, output_lens, ...)")
    e2e_from_itls = "latencies" not in data and isinstance(data.get("itls"), list)  # vLLM <= 0.26 saved no E2E
    wanted = BENCH_FIELDS + (BENCH_MEASURED + ("itls",) if measured else ())
    if e2e_from_itls:
        wanted = tuple(k for k in wanted if k != "latencies")
    missing = [k for k in wanted if not isinstance(data.get(k), list)]
    if missing:
        raise TraceError(f"{path}: no per-request list {', '.join(missing)}; save the run with `vllm bench serve "
                         f"--save-result --save-detailed`")
    recorded = data.get("start_times") is not None
    if recorded:
        wanted += ("start_times",)
        if not isinstance(data["start_times"], list):
            raise TraceError(f"{path}: start_times is not a list of send times; save the run again with `vllm "
                             f"bench serve --save-result --save-detailed`")
    n = len(data["input_lens"])
    for k in wanted:
        if len(data[k]) != n:
            raise TraceError(f"{path}: {k} has {len(data[k])} entries, input_lens {n}; one entry a request")
    if n == 0:
        raise TraceError(f"{path}: no requests in the file")
    errors = data.get("errors")
    if errors is None:
        errors = [""] * n
    elif not isinstance(errors, list) or len(errors) != n or not all(isinstance(e, (str, type(None))) for e in errors):
        shown = f"{len(errors)} entries" if isinstance(errors, list) else type(errors).__name__
        raise TraceError(f"{path}: errors is {shown}, not a list of {n} messages (\"\" for a request that "
                         f"succeeded); save the run again with `vllm bench serve --save-result --save-detailed`")
    failures = bench_failures(data, errors)
    keep = [i for i in range(n) if not errors[i] or (failures and i in failures.replayed)]
    if not keep or (measured and all(errors[i] for i in keep)):
        raise TraceError(f"{path}: {len(failures.got)} of {n} requests failed (first: {failures.first_error[:80]!r}) "
                         f"and none " + ("succeeded, so nothing can be compared" if keep else "got a token, so "
                                         "nothing can be replayed") + "; rerun the benchmark")
    index = list(range(n))
    every_prompt = token_counts(path, "input_lens", data["input_lens"], index, indexed=True)
    prompts = every_prompt[keep]
    ok = [i for i in keep if not errors[i]]
    counted = dict(zip(ok, token_counts(path, "output_lens", [data["output_lens"][i] for i in ok], ok,
                                        indexed=True)))
    # (a failed request's output_lens is 0: it is replayed with the tokens it got)
    outputs = np.array([counted[i] if i in counted else failures.got[i] for i in keep], np.int64)
    sends = None if recorded else unrecorded_sends(path, data, n)
    start = seconds(path, "start_times", data["start_times"], index, indexed=True) if recorded else sends.times
    order = np.argsort(start[keep], kind="stable")
    at = np.asarray(keep)[order]  # the kept requests' positions in the file, in send order
    log = ServerLog(path, "vllm-bench", [str(i) for i in at], start[at] - start[at[0]], prompts[order],
                    outputs[order], boundary="client")
    if sends is not None:
        log.in_flight, log.span = sends.in_flight, sends.span
        log.notes.append(sends.note)
    elif (cap := closed_loop_cap(data, n)) is not None:  # (its sends came as the real server freed slots)
        log.in_flight = cap
        log.notes.append(CLOSED_LOOP_NOTE.format(cap=log.in_flight) + ", not at the recorded sends")
    if isinstance(data.get("model_id"), str) and data["model_id"].strip():
        log.model = data["model_id"].strip()
    log.notes.append("vllm bench serve timings are the client's (TTFT and E2E include the network and the "
                     "frontend)")
    log.notes += bench_notes(path, data, n, recorded, failed=len(failures.got) if failures else 0)
    log.take_failures(failures)
    shared = bench_prefixes(client, n, every_prompt, client_where(path, client))
    if shared is not None:
        log.prefixes = BenchPrefixes(shared.group[at], shared.length[at], shared.note)
        log.notes.append(shared.note)
    take_warmups(log, path, client, at == 0, version)
    if all(isinstance(data.get(k), list) for k in ("ttfts", "itls")) and (e2e_from_itls or
                                                                       isinstance(data.get("latencies"), list)):
        sent_ok = [i for i in at if not errors[i]]  # the successes in send order (a failure has nothing to compare)
        ttft = seconds(path, "ttfts", [data["ttfts"][i] for i in sent_ok], sent_ok, indexed=True)
        gaps = []
        for i in sent_ok:
            itl = data["itls"][i]
            if not isinstance(itl, list):
                raise TraceError(f"{path}: itls[{i}] is not a list of seconds")
            gaps.append(seconds(path, f"itls[{i}]", itl, list(range(len(itl))), indexed=True))
        if e2e_from_itls:  # the client's last chunk is its first plus every gap after it
            e2e = ttft + np.array([g.sum() for g in gaps])
            log.notes.append("no latencies list (vLLM 0.26 and older): each E2E is the TTFT plus the request's ITLs")
        else:
            e2e = seconds(path, "latencies", [data["latencies"][i] for i in sent_ok], sent_ok, indexed=True)
        succeeded = np.array([not errors[i] for i in at])
        log.ttft, log.e2e = np.full(len(at), np.nan), np.full(len(at), np.nan)
        log.ttft[succeeded], log.e2e[succeeded] = ttft, e2e
        log.itls = gaps
    return log


def meta_version(path: Path) -> str | None:
    """The ``vllm_version`` of the meta.json beside a log, if it names one (as ``client_of`` reads it)."""
    meta = path.parent / "meta.json"
    try:
        version = json.loads(meta.read_text()).get("vllm_version") if meta.is_file() else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return str(version) if version is not None else None


def client_of(path: Path) -> dict | None:
    """The ``client`` section of the meta.json beside a log (how its benchmark sent the requests), if there is
    one; a meta.json that is not JSON is left to the run's own reader (validate/serving_run.py) to name."""
    meta = path.parent / "meta.json"
    try:
        client = json.loads(meta.read_text()).get("client") if meta.is_file() else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return client if isinstance(client, dict) else None


def bench_failures(data: dict, errors: list) -> FailedRequests | None:
    """A vllm bench serve result's failed requests (a non-empty ``errors`` entry), each with the tokens it got
    before it failed: its first chunk (a ``ttfts`` entry > 0) and one a later gap (``itls``), as the client
    counted chunks (vLLM streams one token a chunk at its default ``stream_interval`` 1)."""
    failed = [i for i, e in enumerate(errors) if e]
    if not failed:
        return None
    ttfts, itls = data.get("ttfts"), data.get("itls")

    def got(i: int) -> int:
        first = ttfts[i] if isinstance(ttfts, list) else None
        if isinstance(first, bool) or not isinstance(first, (int, float)) or not first > 0:
            return 0
        more = itls[i] if isinstance(itls, list) and isinstance(itls[i], list) else []
        return 1 + len(more)

    return FailedRequests({i: got(i) for i in failed}, error_text(errors[failed[0]]), len(errors))


def _where(path: Path, column: str, at: int, indexed: bool) -> str:
    return f"{path}: {column}[{at}]" if indexed else f"{path}:{at}: {column}"


def token_counts(path: Path, column: str, values, lines, indexed: bool = False) -> np.ndarray:
    out = np.empty(len(values), np.int64)
    for i, (v, at) in enumerate(zip(values, lines)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer():
            raise TraceError(f"{_where(path, column, at, indexed)} is {v!r}, not a whole number of tokens")
        if v < 1:
            kind = "output" if "out" in column.rsplit(".", 1)[-1] else "prompt"
            raise TraceError(f"{_where(path, column, at, indexed)} is {v!r}; a request has at least one "
                             f"{kind} token: remove or fix that request")
        out[i] = int(v)
    return out


def seconds(path: Path, column: str, values, lines, indexed: bool = False, unit: str = "seconds") -> np.ndarray:
    """``values`` as floats, each a time >= 0 (in ``unit``, as the file writes it)."""
    out = np.empty(len(values))
    for i, (v, at) in enumerate(zip(values, lines)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise TraceError(f"{_where(path, column, at, indexed)} is {v!r}, not a time in {unit} >= 0")
        out[i] = float(v)
    return out


def check_order(path: Path, column: str, t: np.ndarray, lines) -> None:
    back = np.flatnonzero(np.diff(t) < 0)
    if len(back):
        i = int(back[0]) + 1
        raise TraceError(f"{path}:{lines[i]}: {column} goes back in time (the line before it is later); lines "
                         f"must be in arrival order")

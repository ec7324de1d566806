"""A workload (arrivals + lengths + tiers + seed) and the request sources the simulator consumes.

Arrivals, lengths and tiers draw from three independent streams spawned from the one seed, so changing the length
distribution of an experiment leaves its arrival times unchanged (common random numbers across comparisons).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from llmsched.request import DEFAULT_TIER, Request, Status, Tier
from llmsched.workload.arrivals.processes import ArrivalProcess, Constant, Gamma, Poisson, TraceReplay
from llmsched.workload.chunks import CHUNK, check_chunk, pieces
from llmsched.workload.lengths.length_presets import LENGTH_PRESETS, length_preset
from llmsched.workload.lengths.distributions import Capped, Empirical, LengthDist, positive_int
from llmsched.workload.tenants.tiers import assign_tiers, check_tiers, tier_chunks
from llmsched.workload.traces.server_log import read_server_log
from llmsched.workload.traces.hash_blocks import HASH_BLOCK
from llmsched.workload.traces.jsonl import JsonlTrace, first_keys, lines
from llmsched.workload.traces.readers import (AZURE, JSONL, JSONL_SUPPORTED, VIDUR, Trace, TraceError, read_header,
                                             read_trace, resolve_data_file, trace_kind)

ARRIVAL_KINDS = ("poisson", "gamma", "constant")


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    return int(seed)


def streams(seed: int, k: int) -> list[np.random.Generator]:
    """``k`` independent generators from one seed (arrivals, lengths, tiers)."""
    return [np.random.default_rng(s) for s in np.random.SeedSequence(check_seed(seed)).spawn(k)]


@dataclass
class Workload:
    """Requests from an arrival process and a length distribution; one seed gives one list of requests.

    Give exactly one of ``num_requests`` and ``duration`` (seconds; arrivals in [0, duration)); a trace replay
    with neither replays the whole trace.
    """

    arrivals: ArrivalProcess
    lengths: LengthDist
    num_requests: int | None = None
    duration: float | None = None
    tiers: Sequence[Tier] | str = (DEFAULT_TIER,)
    max_total_tokens: int | None = None
    seed: int = 0
    # the requests' contents (llmsched.content), for traces that name them: (n, chunk, max_prompt) -> lists of
    # ``chunk`` contents of the first n requests, read as the run goes (workload/traces/jsonl.py); None: no identities
    contents: Callable | None = None
    # sessions whose later turns follow their first request's completion: an object with ``chunks(n, chunk,
    # max_prompt)`` (per first request, its later turns or None) and ``count(n)`` (requests in all); None: none
    follow_ups: object = None

    def __post_init__(self):
        if not isinstance(self.arrivals, ArrivalProcess):
            raise ValueError(f"Workload arrivals must be an ArrivalProcess, got {type(self.arrivals).__name__}")
        if not isinstance(self.lengths, LengthDist):
            raise ValueError(f"Workload lengths must be a LengthDist, got {type(self.lengths).__name__}")
        if self.num_requests is not None and self.duration is not None:
            raise ValueError("Workload: give num_requests or duration, not both")
        if self.num_requests is None and self.duration is None and not isinstance(self.arrivals, TraceReplay):
            raise ValueError("Workload: give num_requests or duration (only a trace replay can default to the "
                             "whole trace)")
        if self.num_requests is not None:
            positive_int("Workload num_requests", self.num_requests)
        if self.duration is not None and not (self.duration > 0 and math.isfinite(self.duration)):
            raise ValueError(f"Workload duration must be a finite number of seconds > 0, got {self.duration!r}")
        if self.max_total_tokens is not None:
            positive_int("Workload max_total_tokens", self.max_total_tokens)
        self.tiers = check_tiers(self.tiers)
        check_seed(self.seed)

    def arrival_times(self) -> np.ndarray:
        rng = streams(self.seed, 3)[0]
        if self.num_requests is not None:
            return self.arrivals.times(self.num_requests, rng)
        if self.duration is not None:
            return self.arrivals.until(self.duration, rng)
        return self.arrivals.times(len(self.arrivals), rng)

    @property
    def capped_lengths(self) -> LengthDist:
        return self.lengths if self.max_total_tokens is None else Capped(self.lengths, self.max_total_tokens)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Tier]]:
        """Arrival times, prompt and output lengths and tiers, in arrival order; the same seed, the same draws."""
        _, length_rng, tier_rng = streams(self.seed, 3)
        times = self.arrival_times()
        prompts, outputs = self.capped_lengths.sample(len(times), length_rng)
        return times, prompts, outputs, assign_tiers(len(times), self.tiers, tier_rng)

    def requests(self) -> list[Request]:
        """Fresh Request objects, ids 0..n-1 in arrival order; the same seed gives the same list."""
        return list(self.source().initial())

    def source(self, chunk: int = CHUNK) -> "StreamedOpenLoop":
        """The simulator's source: the columns of ``columns()`` drawn ``chunk`` requests at a time as the run
        reaches them, so memory does not grow with the number of requests. With a duration the arrivals are first
        counted in one pass; a trace's arrival times (and those of a schedule ending at rate 0, given a count) are
        held whole, 8 bytes a request, the other columns drawn in chunks."""
        chunk = check_chunk(chunk)
        if self.num_requests is not None:
            n = self.num_requests

            def times():
                return self.arrivals.chunks(n, streams(self.seed, 3)[0], chunk)
        elif self.duration is not None:
            n, times = self.arrivals.until_chunks(self.duration, streams(self.seed, 3)[0], chunk)
        else:
            known = self.arrival_times()
            n = len(known)

            def times():
                return pieces(known, chunk)
        contents = None
        max_prompt = None if self.max_total_tokens is None else self.max_total_tokens - 1
        if self.contents is not None:
            def contents():
                return self.contents(n, chunk, max_prompt)

        capped = self.capped_lengths  # one object for this source, so that it counts what it cuts

        def lengths():
            return capped.chunks(n, streams(self.seed, 3)[1], chunk)

        def tiers():
            return tier_chunks(n, self.tiers, streams(self.seed, 3)[2], chunk)
        if self.follow_ups is not None:
            follow = self.follow_ups
            source = SessionOpenLoop(n, times, lengths, tiers, contents,
                                     lambda: follow.chunks(n, chunk, max_prompt), follow.count(n))
        else:
            source = StreamedOpenLoop(n, times, lengths, tiers, contents)
        source.length_caps = caps_of(capped, self.max_total_tokens)
        return source

    def describe(self) -> dict:
        return {"arrivals": self.arrivals.describe(), "lengths": self.lengths.describe(),
                "num_requests": self.num_requests, "duration": self.duration,
                "tiers": [tier_dict(t) for t in self.tiers], "max_total_tokens": self.max_total_tokens,
                "seed": self.seed}


def tier_dict(tier: Tier) -> dict:
    out = {"name": tier.name, "share": tier.share, "ttft": tier.slo.ttft, "tbt": tier.slo.tbt, "tpot": tier.slo.tpot}
    if tier.priority is not None:
        out["priority"] = tier.priority
    return out


def caps_of(lengths: LengthDist, max_total_tokens: int | None) -> tuple:
    """A source's ``length_caps``: ``(lengths,)``, the ``Capped`` that ``max_total_tokens`` wrapped its lengths in,
    or ``()`` without one (a preset may be capped of its own: that is its distribution, not the run's cap)."""
    return (lengths,) if max_total_tokens is not None else ()


@runtime_checkable
class RequestSource(Protocol):
    """Where a run's requests come from: some up front, some in response to completions."""

    def initial(self) -> list[Request]:
        """Requests known at the start of the run (their arrival times may lie in the future)."""

    def on_done(self, req: Request, now: float) -> list[Request]:
        """Requests triggered by ``req`` finishing or being rejected at time ``now``."""


class OpenLoop:
    """Every request is known up front; completions trigger nothing."""

    def __init__(self, requests: Sequence[Request]):
        self.requests = list(requests)

    length_caps = ()  # the Capped length distributions its requests were drawn through (max_total_tokens)

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def arrival_times(self) -> np.ndarray:
        return np.array([r.arrival for r in self.requests], dtype=np.float64)

    @property
    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Prompt and output lengths, in request order."""
        return (np.array([r.prompt_len for r in self.requests], dtype=np.int64),
                np.array([r.output_len for r in self.requests], dtype=np.int64))

    def initial(self) -> list[Request]:
        used = [r.id for r in self.requests if r.status != Status.WAITING or r.num_computed or r.num_generated]
        if used:
            raise ValueError(f"OpenLoop: request {used[0]} has already run; build a new source from "
                             f"Workload.requests() for each run")
        return list(self.requests)

    done_adds_requests = False  # on_done never returns a request: a replica may fold decode runs past finishes

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "on_done" in cls.__dict__ and "done_adds_requests" not in cls.__dict__:
            cls.done_adds_requests = True  # a new on_done must declare it itself

    def on_done(self, req: Request, now: float) -> list[Request]:
        return []


Chunks = Callable[[], Iterator]  # a fresh iterator over a column's pieces, from the start, at each call


class LazyOpenLoop(OpenLoop):
    """An open loop of ``n`` requests that ``initial`` builds as the run reaches them, none held: the list, the
    arrivals and the lengths are built from it anew at each call (a subclass that holds columns reads those)."""

    n: int

    def __len__(self) -> int:
        return self.n

    @property
    def requests(self) -> list[Request]:
        """Every request as a fresh object (builds them all: for callers that need the list)."""
        return list(self.initial())

    @property
    def arrival_times(self) -> np.ndarray:
        return np.array([r.arrival for r in self.initial()], dtype=np.float64)

    @property
    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        reqs = list(self.initial())
        return (np.array([r.prompt_len for r in reqs], dtype=np.int64),
                np.array([r.output_len for r in reqs], dtype=np.int64))


class StreamedOpenLoop(LazyOpenLoop):
    """An open loop held as column chunks: the columns are drawn a chunk at a time and each Request is built when
    the run reaches its arrival and dropped once recorded, so memory follows the requests in flight, not the
    number of requests. Each column is a function giving its pieces anew (times; (prompts, outputs); tiers; and,
    for a trace that names them, the requests' contents)."""

    def __init__(self, n: int, times: Chunks, lengths: Chunks, tiers: Chunks, contents: Chunks | None = None):
        self.n = n
        self._times, self._lengths, self._tiers = times, lengths, tiers
        self._contents = contents

    @property
    def arrival_times(self) -> np.ndarray:
        """Every arrival time (drawn anew at each call)."""
        return np.concatenate([np.zeros(0), *self._times()])

    @property
    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Every prompt and output length (drawn anew at each call)."""
        drawn = list(self._lengths())
        return (np.concatenate([np.zeros(0, np.int64), *(p for p, _ in drawn)]).astype(np.int64),
                np.concatenate([np.zeros(0, np.int64), *(o for _, o in drawn)]).astype(np.int64))

    def initial(self):
        """Fresh requests, ids 0..n-1, built one at a time in arrival order."""
        if self._contents is not None:
            yield from self._with_contents()
            return
        i = 0
        for times, (prompts, outputs), tiers in zip(self._times(), self._lengths(), self._tiers(), strict=True):
            columns = (np.asarray(times, np.float64).tolist(), np.asarray(prompts, np.int64).tolist(),
                       np.asarray(outputs, np.int64).tolist(), tiers)
            for t, p, o, tier in zip(*columns, strict=True):
                yield Request(i, t, p, o, tier)
                i += 1
        if i != self.n:
            raise ValueError(f"StreamedOpenLoop: its columns gave {i} requests, not the {self.n} it was built for")

    def _with_contents(self):
        i = 0
        for times, (prompts, outputs), tiers, contents in zip(self._times(), self._lengths(), self._tiers(),
                                                              self._contents(), strict=True):
            columns = (np.asarray(times, np.float64).tolist(), np.asarray(prompts, np.int64).tolist(),
                       np.asarray(outputs, np.int64).tolist(), tiers, contents)
            for t, p, o, tier, content in zip(*columns, strict=True):
                yield Request(i, t, p, o, tier, content=content)
                i += 1
        if i != self.n:
            raise ValueError(f"StreamedOpenLoop: its columns gave {i} requests, not the {self.n} it was built for")


class SessionOpenLoop(StreamedOpenLoop):
    """An open loop whose requests may open sessions. A session's first request arrives at its time, as any
    request does; each later turn arrives ``delay`` seconds after the turn before it leaves the run, and not before
    its own ``not_before`` (LLMServingSim's agentic sessions: the tool time; inference-perf's multi-turn chat: the
    round's scheduled time). First requests have ids 0..n-1 in arrival order, later turns n, n+1, ... as issued.

    ``follow_ups`` gives, a chunk of first requests at a time, each one's later turns (an iterable of objects with
    ``delay``, ``not_before``, ``prompt_len``, ``output_len``, ``tier`` and ``content``, read lazily) or None;
    ``total`` counts every request. Memory follows the sessions in flight."""

    def __init__(self, n: int, times: Chunks, lengths: Chunks, tiers: Chunks, contents: Chunks | None,
                 follow_ups: Chunks, total: int):
        super().__init__(n, times, lengths, tiers, contents)
        self._follow_ups = follow_ups
        self.total = total
        self.sessions: dict[int, Iterator] = {}
        self.issued = n

    def __len__(self) -> int:
        return self.total

    def initial(self):
        self.sessions = {}
        self.issued = self.n
        follow = chain.from_iterable(self._follow_ups())
        for req in super().initial():
            rest = next(follow)
            if rest is not None:
                self.sessions[req.id] = iter(rest)
            yield req

    def on_done(self, req: Request, now: float) -> list[Request]:
        rest = self.sessions.pop(req.id, None)
        turn = None if rest is None else next(rest, None)
        if turn is None:
            return []
        nxt = Request(self.issued, max(now + turn.delay, turn.not_before), turn.prompt_len, turn.output_len,
                      turn.tier, content=turn.content)
        self.issued += 1
        self.sessions[nxt.id] = rest
        return [nxt]


class ClosedLoop:
    """``concurrency`` users, each sending a new request ``think_time`` seconds after the last one ends.

    The i-th request issued has the i-th drawn lengths and tier whatever the order of completions, so one seed
    gives the same requests under every scheduler. ``initial`` restarts the source. Lengths and tiers are drawn
    ``chunk`` requests at a time as requests are issued.
    """

    def __init__(self, concurrency: int, lengths: LengthDist, num_requests: int,
                 tiers: Sequence[Tier] | str = (DEFAULT_TIER,), think_time: float = 0.0, seed: int = 0,
                 max_total_tokens: int | None = None, chunk: int = CHUNK, contents: Callable | None = None):
        self.concurrency = positive_int("ClosedLoop concurrency", concurrency)
        self.num_requests = positive_int("ClosedLoop num_requests", num_requests)
        if not isinstance(lengths, LengthDist):
            raise ValueError(f"ClosedLoop lengths must be a LengthDist, got {type(lengths).__name__}")
        if not (think_time >= 0 and math.isfinite(think_time)):
            raise ValueError(f"ClosedLoop think_time must be a finite number of seconds >= 0, got {think_time!r}")
        self.lengths = lengths if max_total_tokens is None else Capped(lengths, max_total_tokens)
        self.tiers = check_tiers(tiers)
        self.think_time = float(think_time)
        self.seed = seed
        self.chunk = check_chunk(chunk)
        # the requests' contents in issue order (a trace's, ``Workload.contents``'s signature); None: no identities
        self.contents = contents
        self.max_prompt = None if max_total_tokens is None else max_total_tokens - 1
        self._drawn = self._draws()  # a length distribution refuses what it cannot draw now, not mid-run
        self.issued = 0
        self.outstanding: set[int] = set()
        self.length_caps = caps_of(self.lengths, max_total_tokens)

    def _draws(self) -> Iterator[tuple[int, int, Tier, object]]:
        """(prompt, output, tier, content) of each request in issue order, from the start."""
        _, length_rng, tier_rng = streams(self.seed, 3)
        n = self.num_requests
        lengths = self.lengths.chunks(n, length_rng, self.chunk)
        tiers = tier_chunks(n, self.tiers, tier_rng, self.chunk)
        contents = (self.contents(n, self.chunk, self.max_prompt) if self.contents is not None else
                    ([None] * min(self.chunk, n - a) for a in range(0, n, self.chunk)))
        return chain.from_iterable(zip(np.asarray(p, np.int64).tolist(), np.asarray(o, np.int64).tolist(), t, c)
                                   for (p, o), t, c in zip(lengths, tiers, contents, strict=True))

    @property
    def prompts(self) -> np.ndarray:
        """Every prompt length, in issue order (drawn anew at each call)."""
        return self.lengths.sample(self.num_requests, streams(self.seed, 3)[1])[0]

    @property
    def outputs(self) -> np.ndarray:
        """Every output length, in issue order (drawn anew at each call)."""
        return self.lengths.sample(self.num_requests, streams(self.seed, 3)[1])[1]

    def _issue(self, at: float) -> Request:
        i = self.issued
        self.issued += 1
        self.outstanding.add(i)
        prompt, output, tier, content = next(self._drawn)
        return Request(i, at, prompt, output, tier, content=content)

    def initial(self) -> list[Request]:
        self.issued = 0
        self.outstanding = set()
        self._drawn = self._draws()
        return [self._issue(0.0) for _ in range(min(self.concurrency, self.num_requests))]

    def on_done(self, req: Request, now: float) -> list[Request]:
        if req.id not in self.outstanding:
            raise ValueError(f"ClosedLoop: on_done for request {req.id}, which this source has not issued or "
                             f"was already told is done")
        self.outstanding.discard(req.id)
        if self.issued >= self.num_requests:
            return []
        return [self._issue(now + self.think_time)]

    def describe(self) -> dict:
        return {"kind": "closed-loop", "concurrency": self.concurrency, "num_requests": self.num_requests,
                "think_time": self.think_time, "lengths": self.lengths.describe(),
                "tiers": [tier_dict(t) for t in self.tiers], "seed": self.seed}


def trace_workload(path, target_rate: float | None = None, num_requests: int | None = None,
                   tiers: Sequence[Tier] | str = (DEFAULT_TIER,), max_total_tokens: int | None = None,
                   seed: int = 0, zero_lengths: str = "error", block_size: int | None = None,
                   vocab_size: int | None = None) -> Workload:
    """Replays a trace with arrival times (Azure, Vidur, a JSONL trace: Mooncake, LLMServingSim, llmsched's
    sessions, or a real server's per-request log: a requests.jsonl or a vllm bench serve result .json): its
    arrivals, each row's own lengths, and the prompts' contents where the trace names them. ``block_size`` (the
    run's KV block size) must divide the trace's hash block; ``vocab_size`` bounds its token ids."""
    return replay(read_arrival_trace(path, zero_lengths, vocab_size), target_rate=target_rate,
                  num_requests=num_requests, tiers=tiers, max_total_tokens=max_total_tokens, seed=seed,
                  block_size=block_size)


SERVER_LOG_KEYS = ("input_toks", "output_toks", "arrival_time")  # workload/traces/server_log.py's per-request log
AIPERF_KEYS = ("metadata", "metrics")  # AIPerf's per-request export (workload/traces/aiperf_records.py)


def is_server_log(keys: set) -> bool:
    """Whether a JSONL file whose first line has ``keys`` is a server's per-request log (or AIPerf's export)."""
    return set(SERVER_LOG_KEYS) <= keys or set(AIPERF_KEYS) <= keys


def read_arrival_trace(path, zero_lengths: str = "error", vocab_size: int | None = None,
                       clock: str = "engine", client: dict | None = None) -> Trace:
    """A trace with arrival times, or a server's per-request log read as one (a length-only file is refused with
    what to use instead); ``clock``: a server log's arrivals as its engine queued them or as its client sent them;
    ``client``: how a vllm bench serve run saved without meta.json sent them (workload/traces/server_log.py)."""
    resolved = resolve_data_file(path)
    prompts = resolved.suffix == ".jsonl" and trace_kind(resolved) in JSONL  # Mooncake, LLMServingSim, sessions
    if resolved.suffix == ".jsonl" and not prompts and not is_server_log(first_keys(resolved)):
        raise TraceError(f"{resolved}:1: unknown JSONL trace format, the first line has keys "
                         f"{', '.join(sorted(first_keys(resolved)))}. Supported: {JSONL_SUPPORTED}; or a server's "
                         f"per-request log ({', '.join(SERVER_LOG_KEYS)}), or AIPerf's profile_export.jsonl")
    if resolved.suffix in (".jsonl", ".json") and not prompts:
        return server_log_trace(resolved, clock, client)
    if client is not None:
        raise TraceError(f"{resolved}: not a vllm bench serve result or a server's requests.jsonl; --bench-command "
                         f"applies to those: drop it")
    if trace_kind(resolved) == "lengths":
        raise TraceError(length_file_as_trace(resolved))
    return read_trace(resolved, zero_lengths=zero_lengths, vocab_size=vocab_size)


def replay(trace: Trace, target_rate: float | None = None, num_requests: int | None = None,
           tiers: Sequence[Tier] | str = (DEFAULT_TIER,), max_total_tokens: int | None = None,
           seed: int = 0, block_size: int | None = None) -> Workload:
    """``trace_workload`` of a trace already read."""
    if len(trace) == 0:
        raise TraceError(f"{trace.source}:1: the trace has a header but no requests")
    hash_block = getattr(trace, "hash_block", None)
    if hash_block and block_size and hash_block % block_size:
        divisors = ", ".join(str(d) for d in (8, 16, 32, 64, 128) if hash_block % d == 0)
        raise TraceError(f"{trace.source}:1: its block ids each stand for {hash_block} tokens, which KV blocks of "
                         f"{block_size} do not divide, so a KV block would straddle two of them; use a --block-size "
                         f"that divides {hash_block} ({divisors}, ...)")
    if num_requests is not None and num_requests > len(trace):
        raise ValueError(f"num_requests {num_requests}: the trace {trace.source} has only {len(trace)} requests; "
                         f"ask for at most {len(trace)} (or leave --num-requests out to replay it whole)")
    # --rate sets the mean rate of what is replayed: a prefix (--num-requests) is rescaled by its own span, not by
    # the whole trace's (the Azure conv trace's first 300 requests arrive at 0.64x its mean rate).
    replayed = trace.arrivals if num_requests is None else trace.arrivals[:num_requests]
    try:
        arrivals = TraceReplay(replayed, target_rate=target_rate)
    except ValueError as e:
        raise TraceError(f"{trace.source}: {e} (--rate rescales a trace's arrivals; leave it out)") from None
    return Workload(arrivals, Empirical.from_trace(trace, draw="sequential"), num_requests=num_requests, tiers=tiers,
                    max_total_tokens=max_total_tokens, seed=seed, contents=getattr(trace, "contents", None),
                    follow_ups=getattr(trace, "follow_ups", None))


def server_log_trace(path: Path, clock: str = "engine", client: dict | None = None) -> Trace | JsonlTrace:
    """A server's per-request log (workload/traces/server_log.py) as a trace: its arrivals and lengths, and its
    prompts' contents where it gives their hash_ids (as a Mooncake trace does) or its client's dataset shared
    prefixes (``client``, else meta.json's beside it)."""
    log = read_server_log(path, clock=clock, client=client)
    if log.failed:  # what the replay leaves out, or sends without comparing, said where the user runs it
        warnings.warn(f"{path}: {log.failed.note}", stacklevel=2)
    return JsonlTrace(log.arrivals, log.prompt_lens, log.output_lens, path, log.format, contents=log.contents,
                      hash_block=HASH_BLOCK if log.hash_ids is not None else None, in_flight=log.in_flight,
                      sent_before=log.sent_before(), turns=log.turns)


def names_prompts(path: Path) -> bool:
    """Whether the trace at ``path`` (resolved) gives its requests' prompt contents, as its first line shows: a
    JSONL trace of prompts (Mooncake, LLMServingSim, sessions) or a server's log (with hash_ids, or each prompt its
    own: a replay of vLLM with its prefix cache finds a recomputed request's own blocks)."""
    if trace_kind(path) in JSONL:
        return True
    if path.suffix == ".json":  # --trace reads a .json as a server's log (vllm bench serve, GuideLLM)
        return True
    if path.suffix != ".jsonl":
        return False
    first = next(lines(path, 1), (0, {}))[1]
    return is_server_log(set(first))


def length_file_as_trace(path: Path) -> str:
    """The error for a length-only file passed where a trace with arrival times is expected."""
    header = ", ".join(read_header(path))
    preset = next((name for name, info in LENGTH_PRESETS.items() if Path(info["source"]).name == path.name), None)
    what = f"the {preset} length file" if preset else "a length-only file"
    instead = f"--workload {preset} (the shipped preset) or --lengths {path}" if preset else f"--lengths {path}"
    return (f"{path}:1: this is {what} (columns {header}): request lengths without arrival times. --trace expects a "
            f"trace with arrival times ({', '.join(AZURE)} or {', '.join(VIDUR)}). To draw lengths from it, use "
            f"{instead} with --rate R (and --arrival)")


def lengths_file(path) -> Empirical:
    """A user's own length file (any supported trace format; its arrival times, if any, are not used) as an
    i.i.d. length distribution over its rows.

    Rows with a zero length (LMSYS has 151 of 50,000) are not requests, only samples of the distribution: they are
    skipped and the count is kept in the distribution's name, which run records show."""
    trace = read_trace(path, zero_lengths="drop")
    if len(trace) == 0:
        raise TraceError(f"{trace.source}: no row with both lengths >= 1")
    dist = Empirical.from_trace(trace, draw="resample")
    if trace.dropped:
        dist.name = f"{dist.name} ({trace.dropped} zero-length rows skipped)"
    return dist


def generated_workload(lengths: LengthDist, rate: float, num_requests: int | None = None,
                       duration: float | None = None, arrival: str = "poisson", cv: float | None = None,
                       tiers: Sequence[Tier] | str = (DEFAULT_TIER,), max_total_tokens: int | None = None,
                       seed: int = 0) -> Workload:
    """Lengths with Poisson, gamma (give cv) or constant arrivals at ``rate``."""
    if arrival not in ARRIVAL_KINDS:
        raise ValueError(f"unknown arrival process {arrival!r}; valid: {', '.join(ARRIVAL_KINDS)}")
    if arrival == "gamma" and cv is None:
        raise ValueError("gamma arrivals need cv, the coefficient of variation of the gaps (1 = Poisson)")
    if arrival != "gamma" and cv is not None:
        raise ValueError(f"cv applies only to gamma arrivals, not {arrival!r}")
    process = Gamma(rate, cv) if arrival == "gamma" else Poisson(rate) if arrival == "poisson" else Constant(rate)
    return Workload(process, lengths, num_requests=num_requests, duration=duration, tiers=tiers,
                    max_total_tokens=max_total_tokens, seed=seed)


def named_workload(name: str, rate: float, num_requests: int | None = None, duration: float | None = None,
                   arrival: str = "poisson", cv: float | None = None, tiers: Sequence[Tier] | str = (DEFAULT_TIER,),
                   max_total_tokens: int | None = None, seed: int = 0) -> Workload:
    """A length preset (see LENGTH_PRESETS) with Poisson, gamma (give cv) or constant arrivals at ``rate``."""
    return generated_workload(length_preset(name), rate, num_requests=num_requests, duration=duration,
                              arrival=arrival, cv=cv, tiers=tiers, max_total_tokens=max_total_tokens, seed=seed)

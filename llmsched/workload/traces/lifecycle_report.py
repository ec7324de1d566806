"""inference-perf's lifecycle report of one stage: aggregate percentiles measured at the client, no per-request rows.

``stage_N_lifecycle_metrics.json`` (kubernetes-sigs/inference-perf, ``inference_perf/reportgen/base.py``):
``load_summary`` (``count``, ``requested_rate``, ``achieved_rate``, ``send_duration``) and ``successes``
(``count``; ``latency`` with ``time_to_first_token``, ``time_per_output_token`` ((last − first token)/(output −
1)), ``inter_token_latency`` (every gap between the token times it records), ``request_latency`` (E2E), each a
summary with ``mean``, ``median``, ``p90``, ``p99`` and more; ``throughput`` with ``output_tokens_per_sec`` and
``requests_per_sec``; ``prompt_len`` and ``output_len`` summaries), ``failures`` (``count``). Since inference-perf
a486b01 (August 2026) the prompt lengths are ``successes.prompt_tokens`` (the same summary, plus the prefix cache's
``total``/``cached`` tokens), and a ``concurrent`` stage (``num_requests`` at ``concurrency_level``) adds
``load_summary.concurrency``.

Such a stage cannot be replayed request for request: its ``count`` requests are sent again as inference-perf's
load generator sends a stage of ``requested_rate`` (its load type, inference-perf's default ``constant``, or
``poisson``: meta.json ``client.load_type``), or for a ``concurrent`` stage as a closed loop of that many requests
in flight, with lengths drawn from the report's own quantiles of the prompt and output lengths (linear between the
listed quantiles, each drawn independently: the report gives no joint distribution); the percentiles are
compared. A stage of shared prompts is replayed with its data generator instead (validate/perf_stages.py).

A stage whose requests failed (``failures.count``) is replayed with all of them sent, through its client's timeout
(``timeout``: inference-perf's ``load.request_timeout``, else aiohttp's default ``ClientTimeout(total=5 * 60)``,
which inference-perf's session keeps when none is set: ``client/modelserver/openai_client.py`` at 7de5ef2): the
replay's aborted requests stand for its failures (under overload the timeout is what fails a request), and the
percentiles of the rest, as the report's are of its successes, are compared.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .trace_error import TraceError

AIOHTTP_TIMEOUT = 300.0  # aiohttp's DEFAULT_TIMEOUT total, which inference-perf keeps without load.request_timeout
QUANTILE_KEYS = (("min", 0.0), ("p0.1", 0.001), ("p1", 0.01), ("p5", 0.05), ("p10", 0.10), ("p25", 0.25),
                 ("median", 0.5), ("p75", 0.75), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999),
                 ("max", 1.0))
METRICS = {"ttft": "time_to_first_token", "tpot": "time_per_output_token", "itl": "inter_token_latency",
           "e2e": "request_latency"}
STATS = {"mean": "mean", "p50": "median", "p90": "p90", "p99": "p99"}
FIX = "write the stage's report as inference-perf does (report.request_lifecycle.summary: true)"


@dataclass
class LifecycleReport:
    path: Path
    count: int
    rate: float
    latency: dict                  # metric -> {mean, p50, p90, p99} in seconds (None where the report has none)
    throughput: dict               # output_tps, rps
    prompt_quantiles: list         # (quantile, tokens), ascending
    output_quantiles: list
    notes: list = field(default_factory=list)
    load_type: str = "constant"    # inference-perf's default load type (config/loadgen/config.py LoadType.CONSTANT)
    concurrency: int | None = None  # a concurrent stage's concurrency_level (a closed loop; None: an open loop)
    drain: float = 0.0             # its slowest request's latency (request_latency max, else p99), seconds
    send_span: float | None = None  # its first to last send (load_summary.send_duration), seconds
    prompt_cache: tuple[int, int] | None = None  # (cached, total) prompt tokens, where the report counts them
    # its run's shared_prefix generator settings (validate/perf_stages.py; None: unknown), and the stages before it
    # in its run (rate, count, drain each; None where one of them was not a rate stage)
    data: dict | None = None
    before: list | None = None
    failures: int = 0              # failures.count: sent, no latencies (``count`` includes them)
    timeout: float = AIOHTTP_TIMEOUT  # its client's timeout, seconds (serving_run.py sets the run's own)
    boundary = "client"
    format = "inference-perf"
    hash_ids = None
    cached_tokens = None
    itls = None

    def __len__(self) -> int:
        return self.count

    @property
    def prompt_lens(self) -> np.ndarray:
        return self.lengths()[0]

    @property
    def output_lens(self) -> np.ndarray:
        return self.lengths()[1]

    def lengths(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``count`` prompt and output lengths drawn from the report's quantiles (seeded)."""
        rng = np.random.default_rng(seed)
        return (draw(self.prompt_quantiles, self.count, rng), draw(self.output_quantiles, self.count, rng))


def draw(quantiles: list, n: int, rng) -> np.ndarray:
    q, v = np.array([a for a, _ in quantiles]), np.array([b for _, b in quantiles], dtype=float)
    return np.maximum(1, np.rint(np.interp(rng.random(n), q, v))).astype(np.int64)


def is_lifecycle(data) -> bool:
    return isinstance(data, dict) and "load_summary" in data and "successes" in data


def read_lifecycle(path: Path, data: dict) -> LifecycleReport:
    """The stage report ``data`` read from ``path``; a missing field is an error naming it."""
    def need(obj, *keys):
        for i, key in enumerate(keys):
            if not isinstance(obj, dict) or obj.get(key) is None:
                raise TraceError(f"{path}: no {'.'.join(keys[:i + 1])}; an inference-perf lifecycle report has it "
                                 f"({FIX})")
            obj = obj[key]
        return obj

    def need_object(*keys) -> dict:
        obj = need(data, *keys)
        if not isinstance(obj, dict):
            raise TraceError(f"{path}: {'.'.join(keys)} is {obj!r}, not a summary object; {FIX}")
        return obj

    failures = data.get("failures")
    if failures is not None and not isinstance(failures, dict):
        raise TraceError(f"{path}: failures is {failures!r}, not an object with the failed requests' count; {FIX}")
    failures = (failures or {}).get("count") or 0
    if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
        raise TraceError(f"{path}: failures.count is {failures!r}, not a number of requests")
    count = need(data, "successes", "count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise TraceError(f"{path}: successes.count is {count!r}, not a positive number of requests")
    count += failures  # every request sent: the failed ones loaded the server too
    concurrency = need(data, "load_summary").get("concurrency")
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise TraceError(f"{path}: load_summary.concurrency is {concurrency!r}, not a number of requests in flight")
    rate = data["load_summary"].get("requested_rate") if concurrency else need(data, "load_summary",
                                                                               "requested_rate")
    if concurrency and rate is None:
        rate = math.nan  # a closed loop has no rate of its own
    elif isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (rate > 0 and math.isfinite(rate)):
        raise TraceError(f"{path}: load_summary.requested_rate is {rate!r}, not a positive rate in requests/s")
    latency = {}
    for metric, key in METRICS.items():
        summary = need_object("successes", "latency", key)
        latency[metric] = {stat: _seconds(path, f"successes.latency.{key}.{name}", summary.get(name))
                           for stat, name in STATS.items()}
    throughput = {}
    for name, key in (("output_tps", "output_tokens_per_sec"), ("rps", "requests_per_sec")):
        value = need(data, "successes", "throughput", key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value >= 0 and math.isfinite(value)):
            raise TraceError(f"{path}: successes.throughput.{key} is {value!r}, not a rate >= 0")
        throughput[name] = value
    prompts = "prompt_len" if data["successes"].get("prompt_len") is not None else "prompt_tokens"
    report = LifecycleReport(path, count, float(rate), latency, throughput,
                             _quantiles(path, need_object("successes", prompts), f"successes.{prompts}"),
                             _quantiles(path, need_object("successes", "output_len"), "successes.output_len"))
    report.concurrency = concurrency
    report.failures = failures
    usage = data["successes"].get("prompt_tokens")  # (inference-perf since a486b01: the server's cached tokens)
    if isinstance(usage, dict) and all(isinstance(usage.get(k), (int, float)) and not isinstance(usage.get(k), bool)
                                       and usage[k] >= 0 for k in ("cached", "total")) and usage["total"] > 0:
        report.prompt_cache = (int(usage["cached"]), int(usage["total"]))
    span = data["load_summary"].get("send_duration")
    if span is not None:
        report.send_span = _seconds(path, "load_summary.send_duration", span)
    slowest = data["successes"]["latency"]["request_latency"]
    report.drain = _seconds(path, "successes.latency.request_latency.max", slowest.get("max", slowest.get("p99")))
    sends = (f"a closed loop of {concurrency} in flight" if concurrency else
             "its requests sent again as inference-perf sends a stage of its rate")
    report.notes.append(f"inference-perf aggregate percentiles: {sends}, lengths from the report's quantiles; its "
                        f"inter_token_latency (gaps between the token times it records, tokens of one streamed "
                        f"chunk microseconds apart) is not compared")
    return report


def _seconds(path: Path, where: str, value):
    if value is None:
        raise TraceError(f"{path}: no {where}; an inference-perf lifecycle report has it ({FIX})")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TraceError(f"{path}: {where} is {value!r}, not a time in seconds >= 0")
    return float(value)


def _quantiles(path: Path, summary: dict, where: str) -> list:
    out = []
    for key, q in QUANTILE_KEYS:
        value = summary.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
            raise TraceError(f"{path}: {where}.{key} is {value!r}, not a token count >= 1")
        out.append((q, float(value)))
    if len(out) < 2 or out[0][0] != 0.0 or out[-1][0] != 1.0:
        raise TraceError(f"{path}: {where} needs at least min and max (and the percentiles between); {FIX}")
    values = [v for _, v in out]
    if any(b < a for a, b in zip(values, values[1:])):
        raise TraceError(f"{path}: {where}'s quantiles decrease; not a length summary")
    return out

"""A real serving run replayed in the simulator: the same arrivals and lengths, vLLM v1's policy and engine, and
how far the simulated latencies are from the measured ones.

The replay is a RunConfig: ``vllm-chunked`` (vLLM v1's scheduler) with the run's token budget, sequence cap,
block size, tensor and data parallelism; the batch-time model ``vllm-v1`` (or any kind or stored profile); the KV
cache vLLM reported (``num_gpu_blocks`` or ``memory_gib.kv_cache_tokens`` in meta.json), else vLLM's sizing
for its version (hardware/vllm_memory.py); DP ranks behind the balancer of the run's vLLM version.

Like is compared with like: a log measured in the engine (requests.jsonl's ``queued_ts``, ``first_token_ts``,
``last_token_ts``) against the simulation's engine-side figures (``latency_boundary`` engine: arrivals are the
``queued_ts``); a log measured at the client (``vllm bench serve`` results, GuideLLM reports, inference-perf's
lifecycle reports, a requests.jsonl with its client's stamps read with ``--latency-boundary client``) against the
client-side figures (``latency_boundary`` client: arrivals are the sends, through the run's front end,
hardware/front_end.py).

Metrics, per request: TTFT, TPOT = (E2E − TTFT)/(output − 1), E2E; ITL, every inter-token gap, where the log
has them (vllm bench serve results); throughput = output tokens (and requests) per second from the first
arrival to the last finish (the measured log's arrival + E2E; the replay's the same, where it measures: at the client,
send + E2E, not the engine's finish). Each is reported as mean, P50, P90, P99, real and simulated, with the simulated
one's signed error in % of the real one, and checked against the fidelity targets (:data:`TARGETS`).

A log that names its prompts' blocks (``hash_ids``) replays them as a Mooncake trace's, through the prefix cache
when vLLM ran with one; for such a log, or one with vLLM's ``num_cached_tokens``, the report adds the prefix
cache's hit rate, cached prompt tokens / prompt tokens over all requests, real and simulated.
"""
from __future__ import annotations

import numpy as np

import hashlib
import tempfile
from dataclasses import replace
from pathlib import Path

from ..experiment import run as run_config
from ..metrics.rejections import never_served
from ..metrics.requests import CACHED_FIELD, prefix_cache_stats
from ..metrics.summary import left_at
from ..request import Status
from ..run_config import RunConfig
from ..hardware.gpus import gpu as gpu_preset
from ..hardware.kv_groups import kv_groups
from ..hardware.kv_sizing import kv_cache
from ..hardware.vllm_memory import default_utilization, parse_version
from ..batchtime.registry import resolve_kind
from ..batchtime.vllm_v1 import cudagraph_capture_sizes
from ..workload.arrivals.rate_shape import RateShape
from ..workload.arrivals.stage_counts import StageCounts
from ..workload.traces.lifecycle_report import LifecycleReport
from .perf_stages import chained_fields, in_window
from .serving_run import RunFolder, ServingRun, batch_limits, gpu_of

STATS = ("mean", "p50", "p90", "p99")
METRICS = ("ttft", "tpot", "itl", "e2e")
# the fidelity targets (docs/fidelity.md): |signed error| at most this many % (metric, statistic)
TARGETS = {("ttft", "p50"): 10.0, ("tpot", "p50"): 5.0, ("e2e", "p50"): 5.0, ("throughput", "output_tps"): 3.0,
           ("ttft", "p90"): 15.0}
SCHEDULER = "vllm-chunked"


def dp_router(vllm_version: str | None) -> str:
    """vLLM's DP balancer at ``vllm_version``: 4·waiting + running up to v0.19, PR #49204's rule after."""
    version = parse_version(vllm_version)
    return "vllm-dp-0.19" if version is not None and version <= (0, 19) else "vllm-dp-latest"


def replay_config(run: ServingRun, gpu: str | None = None, batch_time: str = "vllm-v1",
                  batch_time_params: dict | None = None, model: str | None = None,
                  front_end: str | None = None, decode_batch_time_params: dict | None = None) -> RunConfig:
    """The simulation of ``run``: its arrivals and lengths, its engine arguments, vLLM's policy, measured where the
    run's log was (its front end: ``front_end``, else the run's own)."""
    fields = engine_fields(run, gpu, batch_time, batch_time_params, model)
    spec, model_name = run.model_spec(model)
    pools = {}
    if run.args.disaggregation:  # (the decode instance's own batch-time parameters over the run's)
        pools = pd_fields(run, gpu, batch_time, {**(batch_time_params or {}), **(decode_batch_time_params or {})},
                          model)
    elif decode_batch_time_params:
        raise ValueError(f"{run.folder}: the decode instance's batch-time parameters are for a 1P1D run (meta.json "
                         f"with disaggregation); this run is one engine")
    return RunConfig(**{**fields, "front_end": front_end or fields["front_end"]},
                     **replayed_workload(run.log, run.args.enable_prefix_caching),
                     num_blocks=kv_blocks(run, spec, gpu_preset(gpu_of(run, gpu)), model_name),
                     latency_boundary=run.boundary, client_timeout=client_timeout(run.log), **pools)


# what the decode instance of a 1P1D run sets for its pool (the rest is the run's: the prefill instance's)
DECODE_POOL = ("gpu", "tp", "max_num_seqs", "max_num_batched_tokens", "max_model_len", "gpu_memory_utilization",
               "block_size", "kv_cache_dtype", "prefix_caching", "batch_time_params", "scheduler_params")


def pd_fields(run: ServingRun, gpu: str | None, batch_time: str, batch_time_params: dict | None,
              model: str | None) -> dict:
    """A 1P1D run replayed as ``--disaggregate 1P1D``: the prefill instance is the run's engine (its KV cache the
    prefill pool's), the decode instance's limits, memory and KV cache the decode pool's (each sized from its own
    arguments), the KV priced on the link meta.json names, and the decode side waiting for it as vLLM's
    ``WAITING_FOR_REMOTE_KVS`` does (``kv_connector=nixl``). ``batch_time_params``: the decode pool's."""
    pd = run.args.disaggregation
    decode = replace(run, args=pd.decode)
    spec, model_name = run.model_spec(model)
    decode_spec, _ = decode.model_spec(model)
    decode_pool = decode_pool_fields(run, gpu, batch_time, batch_time_params, model)
    decode_pool["num_blocks"] = kv_blocks(decode, decode_spec, gpu_preset(gpu_of(decode, gpu)), model_name)
    check_decode_holds(run, decode_spec, decode_pool["num_blocks"], decode_pool["block_size"])
    return dict(disaggregate="1P1D", kv_link=pd.kv_link, kv_connector="nixl", decode_pool=decode_pool,
                prefill_pool={"num_blocks": kv_blocks(run, spec, gpu_preset(gpu_of(run, gpu)), model_name)})


def check_decode_holds(run: ServingRun, spec, blocks: int, block_size: int) -> None:
    """The decode instance's reported KV cache holds the log's longest request, as the recorded run's did: an
    error naming meta.json's field and the request otherwise (the fleet's own check would name simulate's flags).
    Full-attention models only: a windowed one's blocks a request are the fleet's to count."""
    memory, log = run.args.disaggregation.decode.memory, run.log
    if memory is None or not memory.reported_tokens or isinstance(log, LifecycleReport) or kv_groups(spec):
        return
    total = log.prompt_lens + log.output_lens
    i = int(np.argmax(total))
    need = -(-(int(total[i]) - 1) // block_size)  # the decode side holds all but the last token's KV
    if need > blocks:
        field = run.args.disaggregation.field(memory.where)
        raise ValueError(f"{run.args.given_by or run.folder / 'meta.json'}: {field} gives the decode instance "
                         f"{blocks} KV blocks of {block_size} tokens, but {request_named(log, i)} needs {need} for "
                         f"its {int(log.prompt_lens[i])} prompt + {int(log.output_lens[i])} output tokens, and the "
                         f"recorded run served it: fix {field} or that request's lengths")


def request_named(log, i: int) -> str:
    """The log's request ``i`` as an error names it: its line (a requests.jsonl's) and id, else its id."""
    lines = getattr(log, "lines", None)
    if lines:
        return f"{log.path}:{lines[i]} (request {log.ids[i]})"
    if log.format == "vllm-bench":  # its ids are the request's place in the result's lists
        return f"{log.path}: request {log.ids[i]} (input_lens[{log.ids[i]}])"
    return f"{log.path}: request {log.ids[i]}"


def decode_pool_fields(run: RunFolder, gpu: str | None, batch_time: str, batch_time_params: dict | None,
                       model: str | None) -> dict:
    """The decode pool's own fields of a 1P1D run: its instance's limits, memory share, token budget and CUDA graph
    sizes (``engine_fields`` of the decode instance's arguments)."""
    decode = replace(run, args=run.args.disaggregation.decode)
    own = engine_fields(decode, gpu, batch_time, batch_time_params, model)
    return {key: own[key] for key in DECODE_POOL}


def client_timeout(log) -> float | None:
    """The replay's client timeout: an inference-perf stage's (its client always has one, and its failures are the
    requests it ended); None for the other logs, whose failed requests are replayed with the tokens they got or
    left out (workload/traces/failed_requests.py), and compared with nothing."""
    return log.timeout if isinstance(log, LifecycleReport) else None


def replayed_workload(log, caching: bool = True) -> dict:
    """The run fields of a log's requests: a per-request log replayed as its trace; an inference-perf stage's
    count of lengths drawn from its quantiles, sent as inference-perf's load generator sends a stage of that rate
    and count (``--arrival inference-perf``: its constant load's exponential gaps scaled to the stage, or its
    poisson load's Poisson count a second) or, for a concurrent stage, as its closed loop; a stage of shared
    prompts served with a prefix cache (``caching``), after the stages before it with its data generator
    (validate/perf_stages.py)."""
    if not isinstance(log, LifecycleReport):
        return dict(trace=str(log.path), rate=None, **({"bench_command": log.bench_command}
                                                       if getattr(log, "bench_command", None) else {}))
    if chains(log, caching):
        return chained_fields(log)[0]
    if log.concurrency:
        return dict(lengths=str(drawn_lengths(log)), num_requests=log.count, rate=None, concurrency=log.concurrency)
    return dict(trace=str(stage_trace(log)), rate=None)


def chains(log, caching: bool) -> bool:
    """Whether an inference-perf stage is replayed after the stages before it with its shared_prefix generator."""
    return (isinstance(log, LifecycleReport) and caching and log.data is not None and log.before is not None
            and not log.concurrency)


def stage_trace(report: LifecycleReport) -> Path:
    """The stage's requests as a trace (Vidur's columns), named by its content in the temp folder: sent as
    inference-perf sends ``count`` requests at its rate (``StageCounts``, seeded), their first-to-last span
    rescaled to the one the report measured (``load_summary.send_duration``), lengths drawn from its quantiles."""
    seconds = (report.count + 0.5) / report.rate  # int(rate x duration) is the count
    shape = RateShape((0.0, seconds), (report.rate, 0.0))
    sends = StageCounts(shape, report.load_type).all_times(np.random.default_rng(0))
    sends -= sends[0]
    if report.send_span and sends[-1] > 0:
        sends *= report.send_span / sends[-1]
    prompts, outputs = report.lengths()
    text = "arrived_at,num_prefill_tokens,num_decode_tokens\n" + "".join(
        f"{t!r},{p},{o}\n" for t, p, o in zip(sends.tolist(), prompts.tolist(), outputs.tolist()))
    path = Path(tempfile.gettempdir()) / f"llmsched-stage-{hashlib.sha1(text.encode()).hexdigest()[:16]}.csv"
    if not path.is_file():
        path.write_text(text)
    return path


def engine_fields(run: RunFolder, gpu: str | None = None, batch_time: str = "vllm-v1",
                  batch_time_params: dict | None = None, model: str | None = None) -> dict:
    """The run fields of a real run's engine (all but its workload, KV cache size and latency boundary): vLLM v1's
    policy with the run's token budget, its model (``model``, else its config.json or preset) and GPU (``gpu``, else
    the one meta.json names), tensor, data and expert parallelism, limits, KV cache dtype, prefix caching, front end,
    and for the vllm-v1 kind the CUDA graphs vLLM captured and its async scheduling (``batch_time_params`` win)."""
    args = run.args
    device = gpu_preset(gpu_of(run, gpu))
    spec, model_name = run.model_spec(model)
    max_num_seqs, max_num_batched_tokens = batch_limits(args, device, spec.max_model_len)
    params = dict(batch_time_params or {})
    if resolve_kind(batch_time)[0] == "vllm-v1":
        if args.enforce_eager:
            params.setdefault("capture_sizes", [])
        elif args.capture_sizes:
            params.setdefault("capture_sizes", list(args.capture_sizes))
        params.setdefault("async_scheduling", args.async_scheduling)
    return dict(
        scheduler=SCHEDULER, scheduler_params={"token_budget": max_num_batched_tokens,
                                               **({} if args.enable_chunked_prefill else {"chunked_prefill": False})},
        model=model_name,
        gpu=device.name, tp=args.tensor_parallel_size, batch_time=batch_time, batch_time_params=params,
        dp=args.data_parallel_size, expert_parallel=args.enable_expert_parallel,
        router=dp_router(args.vllm_version) if args.data_parallel_size > 1 else "round-robin",
        block_size=args.block_size, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization or default_utilization(args.vllm_version),
        kv_cache_dtype=args.kv_cache_dtype, prefix_caching=args.enable_prefix_caching, front_end=run.front_end,
        stream_interval=args.stream_interval)


def drawn_lengths(report: LifecycleReport) -> Path:
    """The lengths drawn from an inference-perf stage's quantiles, as a length file (--lengths) named by its
    content in the temp folder."""
    prompts, outputs = report.lengths()
    text = "num_prefill_tokens,num_decode_tokens\n" + "".join(f"{p},{o}\n" for p, o in zip(prompts, outputs))
    path = Path(tempfile.gettempdir()) / f"llmsched-lifecycle-{hashlib.sha1(text.encode()).hexdigest()[:16]}.csv"
    if not path.is_file():
        path.write_text(text)
    return path


def proven_by(run: ServingRun, gpu: str | None = None, model: str | None = None) -> str | None:
    """meta.json, where it proves the run's model ran on its GPU: vLLM reported the KV cache it allocated (which it
    does only after the weights loaded and memory was profiled) for the model and GPU meta.json names, not ones
    given on the command line. Else None: the replay's model must fit the GPU (``experiment.check_fit``)."""
    memory = run.args.memory
    reported = memory is not None and bool(memory.reported_tokens)
    return str(run.folder / "meta.json") if reported and not gpu and not model else None


def kv_blocks(run: ServingRun, spec, device, model_name: str) -> int:
    """The KV blocks per rank, by the one function every command sizes with (hardware/kv_sizing.py): vLLM's own
    figure from meta.json, else its sizing for the run's version; a model that leaves no room, or too little for
    the run's longest request, is an error naming meta.json."""
    args = run.args
    meta = args.given_by or run.folder / "meta.json"
    if args.assumed:  # a bench result alone: TP 1 was assumed, and meta.json is where to say otherwise
        meta = (f"{run.folder} (no meta.json: TP 1 assumed; give --serve-command with the run's `vllm serve` flags, "
                f"or write meta.json with engine_kwargs)")
    max_num_seqs, max_num_batched_tokens = batch_limits(args, device, spec.max_model_len)
    sizes = [] if args.enforce_eager else args.capture_sizes or cudagraph_capture_sizes(max_num_seqs,
                                                                                          max_num_batched_tokens)
    # a windowed model's blocks are vLLM's grouped ones where the replay counts its groups (experiment.py's
    # windowed_groups: vllm-chunked without a prefix cache)
    groups = None if args.enable_prefix_caching else kv_groups(spec)
    try:
        cache = kv_cache(spec, device, block_size=args.block_size, max_num_seqs=max_num_seqs,
                         max_num_batched_tokens=max_num_batched_tokens, vllm_engine=True,
                         gpu_memory_utilization=args.gpu_memory_utilization, capture_sizes=len(sizes),
                         run=args.memory, groups=groups)
    except ValueError as e:
        field = "--tensor-parallel-size" if args.given_by else "engine_kwargs.tensor_parallel_size"
        raise ValueError(f"{meta}: {field} {args.tensor_parallel_size}: {e}") from None
    if args.memory is not None and args.memory.reported_tokens:
        return cache.blocks
    longest = int(np.max(run.log.prompt_lens + run.log.output_lens))
    tokens = cache.blocks * args.block_size // (groups.full + groups.local if groups else 1)  # in every group
    if tokens < longest:
        raise ValueError(f"{meta}: {model_name} on {device.name} at tensor_parallel_size "
                         f"{args.tensor_parallel_size} leaves a KV cache of {tokens} tokens, "
                         f"less than the run's longest request ({longest}); raise the tensor parallelism or check "
                         f"--gpu")
    return cache.blocks


def stats(values: np.ndarray) -> dict:
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return dict.fromkeys(STATS)
    return {"mean": float(v.mean()), "p50": float(np.percentile(v, 50)), "p90": float(np.percentile(v, 90)),
            "p99": float(np.percentile(v, 99))}


def measured(run: ServingRun) -> dict:
    log = run.log
    if isinstance(log, LifecycleReport):  # aggregate percentiles only
        return {**{m: dict(log.latency[m]) for m in ("ttft", "tpot", "e2e")}, "itl": dict.fromkeys(STATS),
                "throughput": {"output_tps": log.throughput["output_tps"], "rps": log.throughput["rps"],
                               "span_s": None}}
    k = log.compared  # (the others loaded the server, but have no latencies)
    # a bench result without send times: its own duration (its arrivals are drawn, or a closed loop's)
    span = log.span if log.span is not None else float((log.arrivals[k] + log.e2e[k]).max() - log.arrivals[k].min())
    return {"ttft": stats(log.ttft[k]), "tpot": stats(log.tpot), "e2e": stats(log.e2e[k]),
            "itl": stats(np.concatenate(log.itls)) if log.itls else dict.fromkeys(STATS),
            "throughput": throughput(int(log.output_lens[k].sum()), int(k.sum()), span)}


def stage_requests(run: ServingRun, result) -> np.ndarray:
    """Per simulated request, whether it is one of the run's own: all of them, but for an inference-perf stage
    replayed after the stages before it, the requests sent in its window."""
    if chains(run.log, run.args.enable_prefix_caching):
        return in_window(result, chained_fields(run.log)[1])
    return np.ones(len(result.requests.column("id")), dtype=bool)


def kept(run: ServingRun, result, stage: np.ndarray | None = None) -> np.ndarray:
    """Per simulated request, whether it is compared: one whose real counterpart's latencies were measured (a
    log's ``compared``, in the log's order, which is the replay's request ids), or one of an inference-perf stage's
    requests its client's timeout did not end (``stage``: ``stage_requests``, where the caller has it)."""
    log = run.log
    if isinstance(log, LifecycleReport):  # its successes: the stage's requests its client's timeout did not end
        stage = stage_requests(run, result) if stage is None else stage
        return stage & (result.requests.column("status") != int(Status.ABORTED))
    return log.compared[result.requests.column("id")]


def simulated(result, with_itl: bool, k: np.ndarray | None = None, log=None) -> dict:
    """The replay's figures over the requests ``k`` keeps (all when None); ``log``: the run's, to name a request
    the replay could not serve."""
    reqs = result.requests
    status = reqs.column("status")
    done = (status == int(Status.FINISHED)) | (status == int(Status.ABORTED))  # (aborted: the client's timeout)
    if not done.all():
        raise ValueError(left_unserved(reqs, done, log))
    k = np.ones(len(status), dtype=bool) if k is None else k
    out = reqs.column("output_len")[k]
    tpot = reqs.column("tpot")[k][out > 1]
    span = float(left_at(reqs, result.end_time)[k].max() - reqs.column("arrival")[k].min())
    return {"ttft": stats(reqs.column("ttft")[k]), "tpot": stats(tpot), "e2e": stats(reqs.column("e2e")[k]),
            "itl": stats(reqs.gaps_of(None if k.all() else k)) if with_itl else dict.fromkeys(STATS),
            "throughput": throughput(int(out.sum()), len(out), span)}


def left_unserved(reqs, done: np.ndarray, log) -> str:
    """Why the replay failed: the first request it left unfinished or rejected, named by its line (a
    requests.jsonl's) or id in the log, and its reason; one the replay can never serve (too long for max_model_len,
    more KV than the cache) contradicts the recorded run, which served it."""
    first = int(np.flatnonzero(~done)[0])
    rid = int(reqs.column("id")[first])
    reason = reqs.reasons.get(rid) or "no reason recorded"
    left, ids = int((~done).sum()), getattr(log, "ids", None)
    if ids is None or not 0 <= rid < len(ids):
        return f"the replay left {left} of {len(done)} requests unfinished or rejected, the first: {reason}"
    text = f"{request_named(log, rid)}: the replay left it unfinished or rejected: {reason}"
    if never_served(reason):
        text += ("; the recorded run served it, so its lengths in the log (or the limits the replay took from the "
                 "run) are wrong: fix or remove that request")
    return text + (f" ({left - 1} more of the {len(done)} requests too)" if left > 1 else "")


def prefix_cache(run: ServingRun, result, k: np.ndarray) -> dict | None:
    """The prefix cache's hit rate, real (vLLM's num_cached_tokens, where the log has them) and simulated, with the
    simulated one's error in % of the real one and in points; None for a log with no hash_ids, no num_cached_tokens,
    no bench dataset's prefixes and no conversations (its prompts share nothing the replay knows of). ``k``: the
    simulated requests compared (``kept``), over which an inference-perf stage's is taken."""
    log = run.log
    if isinstance(log, LifecycleReport):
        return stage_prefix_cache(run, result, k)
    if log.hash_ids is None and log.cached_tokens is None and log.prefixes is None and log.turns is None:
        return None
    reqs = result.requests
    cached = int(reqs.column(CACHED_FIELD).sum()) if CACHED_FIELD in reqs.cols else 0
    sim = prefix_cache_stats(cached, int(reqs.column("prompt_len").sum()))
    real = None if log.cached_tokens is None else prefix_cache_stats(int(log.cached_tokens.sum()),
                                                                     int(log.prompt_lens.sum()))
    notes = []
    if log.prefixes is not None:
        notes.append(log.prefixes.note)
    elif log.hash_ids is None and log.turns is None:
        notes.append("no hash_ids: the replayed prompts share nothing")
    elif log.hash_ids is None:
        notes.append("no hash_ids: the replayed prompts share only their conversations' earlier turns")
    if not run.args.enable_prefix_caching:
        notes.append("vLLM ran without prefix caching")
    return {"real": real, "simulated": sim, "prefix_caching": run.args.enable_prefix_caching,
            "error_pct": pct(sim["hit_rate"], real["hit_rate"]) if real else None,
            "error_points": 100.0 * (sim["hit_rate"] - real["hit_rate"]) if real else None, "notes": notes}


def stage_prefix_cache(run: ServingRun, result, k: np.ndarray) -> dict | None:
    """An inference-perf stage's prefix cache: the hit rate its report counted (``successes.prompt_tokens``' cached
    and total, since a486b01) and its replay's over the stage's requests; None where it has neither."""
    log = run.log
    shared = chains(log, run.args.enable_prefix_caching)
    if not shared and log.prompt_cache is None:
        return None
    reqs = result.requests
    cached = int(reqs.column(CACHED_FIELD)[k].sum()) if CACHED_FIELD in reqs.cols else 0
    sim = prefix_cache_stats(cached, int(reqs.column("prompt_len")[k].sum()))
    real = prefix_cache_stats(*log.prompt_cache) if log.prompt_cache else None
    notes = [] if shared else ["the stage replayed from its report's lengths: its prompts share nothing (no "
                               "shared_prefix generator named, or no prefix cache)"]
    return {"real": real, "simulated": sim, "prefix_caching": run.args.enable_prefix_caching,
            "error_pct": pct(sim["hit_rate"], real["hit_rate"]) if real else None,
            "error_points": 100.0 * (sim["hit_rate"] - real["hit_rate"]) if real else None, "notes": notes}


def throughput(output_tokens: int, requests: int, span: float) -> dict:
    return {"output_tps": output_tokens / span, "rps": requests / span, "span_s": span}


def errors(real: dict, sim: dict) -> dict:
    """Signed % error of every statistic the two summaries share."""
    out = {}
    for metric in METRICS + ("throughput",):
        keys = ("output_tps", "rps") if metric == "throughput" else STATS
        out[metric] = {k: pct(sim[metric][k], real[metric][k]) for k in keys}
    return out


def pct(sim, real) -> float | None:
    if sim is None or real is None or real == 0:
        return None
    return 100.0 * (sim - real) / real


def targets(err: dict) -> dict:
    """Each fidelity target: the error, the bound, met or not."""
    return {f"{m} {s}": {"error_pct": err[m][s], "bound_pct": bound,
                         "met": None if err[m][s] is None else abs(err[m][s]) <= bound}
            for (m, s), bound in TARGETS.items()}


def validate(run: ServingRun, gpu: str | None = None, batch_time: str = "vllm-v1",
             batch_time_params: dict | None = None, model: str | None = None, front_end: str | None = None,
             simulated_at: str | None = None, decode_batch_time_params: dict | None = None) -> dict:
    """Replay ``run`` and compare: the run's row of the report (config, real, simulated, errors, targets).
    ``simulated_at``: the simulation's latency boundary when it is not the log's (what an engine-side prediction
    misses of a client's measurement: docs/fidelity.md's before/after tables). ``decode_batch_time_params``: a 1P1D
    run's decode instance's own batch-time parameters (over ``batch_time_params``)."""
    cfg = replay_config(run, gpu, batch_time, batch_time_params, model, front_end, decode_batch_time_params)
    if simulated_at is not None and simulated_at != cfg.latency_boundary:
        cfg = cfg.with_values(latency_boundary=simulated_at)
    result = run_config(cfg, ran=proven_by(run, gpu, model))
    real = measured(run)
    lifecycle = isinstance(run.log, LifecycleReport)
    stage = stage_requests(run, result)
    k = kept(run, result, stage)
    sim = simulated(result, with_itl=run.log.itls is not None, k=k, log=run.log)
    err = errors(real, sim)
    cache = prefix_cache(run, result, k)
    row = {"run": run.name, "folder": str(run.folder), "log": str(run.log.path), "log_format": run.log.format,
           "notes": list(run.log.notes), "vllm_version": run.args.vllm_version, "model": cfg.model,
           "gpu": cfg.gpu, "tp": cfg.tp, "dp": cfg.dp, "expert_parallel": cfg.expert_parallel,
           "batch_time": cfg.batch_time, "batch_time_params": cfg.batch_time_params, "num_blocks": cfg.num_blocks,
           "router": cfg.router if cfg.dp > 1 else None, "requests": len(run.log),
           "disaggregate": str(cfg.disaggregate) if cfg.disaggregate else None,
           "decode_pool": dict(cfg.decode_pool) if cfg.disaggregate else None,
           "latency_boundary": cfg.latency_boundary,
           "front_end": cfg.front_end if cfg.latency_boundary == "client" else None,
           "real": real, "simulated": sim, "errors": err, "targets": targets(err),
           "samples": {"real": None if lifecycle else samples_of(run.log.ttft[run.log.compared], run.log.tpot,
                                                                  run.log.e2e[run.log.compared]),
                       "simulated": simulated_samples(result, k)}}
    if cache is not None:
        row["prefix_cache"] = cache
    if lifecycle:  # the requests its client gave up on: the report's failures, the replay's aborts
        aborted = int((stage & ~k).sum())
        row["failures"] = {"real": run.log.failures, "simulated": aborted, "timeout_s": run.log.timeout}
    elif run.log.failed:  # the requests its client saw fail: those that got tokens replayed, the rest left out
        failed = run.log.failed
        row["failures"] = {"real": len(failed.got), "simulated": 0, "timeout_s": None,
                           "replayed": len(failed.replayed), "not_replayed": len(failed.got) - len(failed.replayed),
                           "first_error": failed.first_error}
    return row


def simulated_samples(result, k: np.ndarray) -> dict:
    reqs = result.requests
    more = k & (reqs.column("output_len") > 1)
    return samples_of(reqs.column("ttft")[k], reqs.column("tpot")[more], reqs.column("e2e")[k])


def samples_of(ttft, tpot, e2e) -> dict:
    return {"ttft": np.sort(ttft).tolist(), "tpot": np.sort(tpot).tolist(), "e2e": np.sort(e2e).tolist()}

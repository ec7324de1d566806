"""One simulated run from a flat, name-based config: what the CLI and config files describe.

Every name (scheduler, model, GPU, batch-time model, workload, router) resolves
through a registry, never through an import path, so a config file cannot load code.
"""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from .batchtime.registry import BATCH_TIME_MODELS, make_batch_time_model, resolve_kind
from .engine.offload_plan import plan_offload
from .engine.replica import Replica, ReplicaConfig
from .hardware.gpus import gpu as gpu_preset
from .hardware.hf_config import kv_cache_dtype_bytes
from .hardware.memory import kv_capacity_blocks
from .hardware.vllm_memory import no_room, vllm_kv_budget
from .hardware.models import model as model_preset
from .metrics.requests import RequestLog
from .metrics.steps import StepLog
from .metrics.streams import open_streams
from .routers import make_router
from .run_config import RunConfig
from .schedulers.registry import create_scheduler, scheduler_info
from .sim.dp_lockstep import in_lockstep, simulate_lockstep
from .sim.simulator import RunResult, simulate
from .workload.tenants import tenant_workloads, trace_tenants
from .workload.workload import (ClosedLoop, OpenLoop, Workload, generated_workload, lengths_file, names_prompts,
                                read_arrival_trace, replay)
from .workload.length_presets import length_preset
from .workload.traces import DataFileNotFound, resolve_data_file
from .workload.closed_sessions import DrawnSessions, SessionClosedLoop
from .workload.shared_prefix import NAME as SHARED_PREFIX, SharedPrefix, open_loop_rate


def build_replicas(cfg: RunConfig, workload_params: dict | None = None,
                   steps: StepLog | None = None) -> list[Replica]:
    """The run's replicas, sharing ``steps`` (default a new StepLog); ``workload_params`` (from
    ``workload_params(cfg, source)``) tunes workload-aware policies to the run's own workload where the user did
    not set those parameters."""
    m = run_model(cfg)
    if cfg.max_model_len is not None and cfg.max_model_len > m.max_model_len:
        raise ValueError(f"max_model_len {cfg.max_model_len} is above {cfg.model}'s context length "
                         f"{m.max_model_len}; lower --max-model-len or leave it out to use the model's")
    g = gpu_preset(cfg.gpu)
    try:
        bt = make_batch_time_model(cfg.batch_time, m, g, **run_params(cfg), **cfg.batch_time_params)
    except TypeError as e:  # a value of the wrong type deep in the model's arithmetic
        raise ValueError(f"batch_time_params {cfg.batch_time_params}: a value has the wrong type for batch-time "
                         f"model {cfg.batch_time!r} ({e}); give numbers (and a path for file=)") from None
    num_blocks = cfg.num_blocks or kv_blocks(cfg, m, g, bt)
    block_bytes = m.kv_bytes_per_token * cfg.block_size
    caching = cfg.prefix_caching and carries_content(cfg)
    config = ReplicaConfig(
        num_blocks=num_blocks, block_size=cfg.block_size, max_num_seqs=cfg.max_num_seqs,
        max_num_batched_tokens=cfg.max_num_batched_tokens, max_model_len=cfg.max_model_len or m.max_model_len,
        preemption_mode=cfg.preemption_mode, swap_blocks=int(cfg.swap_space_gb * 2**30 // block_bytes),
        swap_seconds_per_block=block_bytes / (g.host_bw * m.tp), oracle=cfg.oracle, overflow=cfg.overflow,
        fast_forward=cfg.fast_forward and not in_lockstep(cfg.dp, cfg.expert_parallel, m),
        check_invariants=cfg.check_invariants, prefix_caching=caching, kv_offload=offload_plan(cfg, m, g, caching))
    steps = steps if steps is not None else StepLog()
    params = {**(workload_params or {}), **cfg.scheduler_params}
    try:
        policies = [create_scheduler(cfg.scheduler, **params) for _ in range(cfg.replicas if cfg.dp == 1 else cfg.dp)]
    except TypeError as e:
        raise ValueError(f"scheduler {cfg.scheduler!r} parameters {params}: a value has the wrong type ({e})") from None
    for i, policy in enumerate(policies):  # a budget above the replica's cap: lowered, recorded, warned about once
        policy.fit_token_budgets(config.max_num_batched_tokens, cfg.scheduler_params if i == 0 else ())
    return [Replica(i, policy, bt, config, steps) for i, policy in enumerate(policies)]


def offload_plan(cfg: RunConfig, spec, device, caching: bool):
    """The run's KV tiers below the GPU resolved for its model, GPU and TP (None without ``kv_offload``)."""
    if not cfg.kv_offload:
        return None
    if not caching:
        raise ValueError(f"--kv-offload {cfg.kv_offload}: offload tiers keep cached prefixes, so the requests must "
                         f"name their prompts (a Mooncake or session trace, --workload shared-prefix, --turns); this "
                         f"run's do not")
    return plan_offload(cfg.kv_offload.value, cfg.kv_offload_mode, spec, device, spec.tp, cfg.block_size,
                        replicas=max(cfg.replicas, cfg.dp))


def run_model(cfg: RunConfig):
    """The run's model spec: the preset (or config.json) with the run's KV cache dtype, at the run's tensor and
    data parallelism, its experts sharded by expert parallelism where the run asks (the batch-time models and the
    KV cache's size read all of these from the spec)."""
    m = model_preset(cfg.model)
    kv_bytes = kv_cache_dtype_bytes(cfg.kv_cache_dtype)
    if kv_bytes is not None and kv_bytes != m.kv_dtype_bytes:
        m = dataclasses.replace(m, kv_dtype_bytes=kv_bytes)
    if cfg.tp is None and cfg.dp == 1 and not cfg.expert_parallel:
        return m
    return m.with_parallel(tp=cfg.tp, dp=cfg.dp, expert_parallel=cfg.expert_parallel or None)


def run_params(cfg: RunConfig) -> dict:
    """The run settings the batch-time kind takes from the run (its ``run_fields``), where not given in
    ``batch_time_params``."""
    kind, _ = resolve_kind(cfg.batch_time)
    fields = BATCH_TIME_MODELS[kind].get("run_fields", ())
    return {name: getattr(cfg, name) for name in fields if name not in cfg.batch_time_params}


def kv_blocks(cfg: RunConfig, spec, device, bt) -> int:
    """KV blocks per replica (per DP rank): sized as vLLM v1 does (hardware/vllm_memory.py) for the vllm-v1
    batch-time kind, else the weights-and-activation reserve of hardware/memory.py."""
    if resolve_kind(cfg.batch_time)[0] != "vllm-v1":
        return kv_capacity_blocks(spec, device, gpu_memory_utilization=cfg.gpu_memory_utilization,
                                  block_size=cfg.block_size)
    budget = vllm_kv_budget(spec, device, max_num_batched_tokens=cfg.max_num_batched_tokens,
                            max_num_seqs=cfg.max_num_seqs, gpu_memory_utilization=cfg.gpu_memory_utilization,
                            capture_sizes=len(getattr(bt, "capture_sizes", ())), block_size=cfg.block_size)
    if budget.blocks < 1:
        raise ValueError(no_room(spec, device, budget, cfg.gpu_memory_utilization))
    return budget.blocks


def workload_params(cfg: RunConfig, source) -> dict:
    """``lengths`` and ``rate`` of the run's own workload, for policies whose thresholds are derived from them
    (WAIT, nested WAIT: Ao et al. §5-6); empty for other policies or when the user gave explicit ``types``.

    The rate is the configured one, or for a trace replayed at its own pace or a rate schedule the mean rate of
    the generated arrivals, divided among the replicas (each policy instance sees its replica's share); a
    closed loop has none (the batch-cap rule needs only the rates' ratios)."""
    params = scheduler_info(cfg.scheduler)["params"]
    if not {"lengths", "rate", "types"} <= set(params) or cfg.scheduler_params.get("types"):
        return {}
    out = {"lengths": cfg.lengths or cfg.trace or cfg.workload}
    if out["lengths"] == SHARED_PREFIX:  # not a length preset: the policy keeps its own default lengths
        del out["lengths"]
    if cfg.concurrency is None:
        rate = cfg.rate if cfg.rate and not (cfg.rate_schedule or cfg.tenants) else mean_rate(source)
        if rate:
            out["rate"] = rate / max(cfg.replicas, cfg.dp)  # each replica's (DP rank's) share: spread evenly
    return out


def mean_rate(source) -> float | None:
    if not isinstance(source, OpenLoop):
        return None
    times = np.sort(source.arrival_times)
    if len(times) < 2 or times[-1] <= times[0]:
        return None
    return (len(times) - 1) / float(times[-1] - times[0])


def length_dist(cfg: RunConfig):
    """The run's length distribution: the user's own length file (``lengths``), else the named preset."""
    if cfg.lengths:
        return lengths_file(cfg.lengths)
    return length_preset(cfg.workload)


def carries_content(cfg: RunConfig) -> bool:
    """Whether the run's requests name their prompts' content (a prefix cache can find what they share): a
    JSONL trace (Mooncake, LLMServingSim, sessions), a server log with hash_ids, --workload shared-prefix, or
    closed-loop sessions."""
    if cfg.trace:
        try:
            return names_prompts(resolve_data_file(cfg.trace))
        except (DataFileNotFound, OSError, ValueError):
            return False  # trace_workload says what is wrong with it
    if cfg.workload == SHARED_PREFIX and not cfg.lengths:
        return True
    return cfg.concurrency is not None and (cfg.turns or 1) > 1


def vocab_size(cfg: RunConfig) -> int | None:
    """The run's model's vocabulary, which bounds a trace's token ids; None for a model name that build_replicas
    will refuse with its own error."""
    try:
        return model_preset(cfg.model).vocab
    except ValueError:
        return None


def shared_prefix_source(cfg: RunConfig, tiers):
    """inference-perf's shared_prefix generator (workload/shared_prefix.py) in an open or a closed loop."""
    extra = {"tiers": tiers} if tiers else {}
    if cfg.max_total_tokens is not None:
        raise ValueError(f"max_total_tokens caps generated lengths; {SHARED_PREFIX}'s lengths are its parameters "
                         f"(--wl-param system_prompt_len=..., question_len=..., output_len=...): drop it")
    generator = SharedPrefix.from_params(cfg.workload_params, cfg.seed)
    if cfg.concurrency is not None:
        return generator.closed_loop(cfg.concurrency, cfg.num_requests, cfg.think_time, cfg.turns, **extra)
    if cfg.rate_schedule:
        raise ValueError(f"--rate-schedule does not apply to --workload {SHARED_PREFIX}; give --rate")
    n = None if cfg.duration is not None else cfg.num_requests or 1000
    return generator.open_loop(open_loop_rate(cfg.rate), n, cfg.duration, cfg.arrival, cfg.cv, **extra)


def build_source(cfg: RunConfig):
    tiers = cfg.tiers.value if cfg.tiers else None
    extra = {"tiers": tiers} if tiers else {}
    if cfg.trace:
        return trace_source(cfg, extra)
    if cfg.workload == SHARED_PREFIX and not cfg.lengths:
        return shared_prefix_source(cfg, tiers or None)
    if cfg.tenants:
        n = cfg.num_requests if cfg.num_requests or cfg.duration else 1000
        return tenant_workloads(cfg.tenants.value, lambda preset: tenant_lengths(cfg, preset),
                                num_requests=None if cfg.duration else n, duration=cfg.duration,
                                arrival=cfg.arrival, cv=cfg.cv, max_total_tokens=cfg.max_total_tokens,
                                seed=cfg.seed, **extra)
    if cfg.concurrency is not None:
        if cfg.num_requests is None:
            raise ValueError("concurrency (a closed loop) needs num_requests, how many requests it sends in all")
        if (cfg.turns or 1) > 1:
            plan = DrawnSessions(length_dist(cfg), cfg.turns, cfg.num_requests, cfg.concurrency, seed=cfg.seed,
                                 max_total_tokens=cfg.max_total_tokens, **extra)
            return SessionClosedLoop(cfg.concurrency, plan, cfg.num_requests, cfg.think_time, plan.describe())
        return ClosedLoop(cfg.concurrency, length_dist(cfg), cfg.num_requests, seed=cfg.seed,
                          max_total_tokens=cfg.max_total_tokens, think_time=cfg.think_time, **extra)
    if cfg.rate_schedule:
        if cfg.num_requests is None and cfg.duration is None:
            raise ValueError(f"rate_schedule {cfg.rate_schedule!r} needs num_requests or duration (--num-requests "
                             f"or --duration)")
        wl = Workload(cfg.rate_schedule.value, length_dist(cfg),
                      num_requests=cfg.num_requests, duration=cfg.duration, max_total_tokens=cfg.max_total_tokens,
                      seed=cfg.seed, **extra)
    else:
        if cfg.rate is None:
            raise ValueError("a generated workload needs rate (--rate, requests/s)")
        n = cfg.num_requests if cfg.num_requests or cfg.duration else 1000
        wl = generated_workload(length_dist(cfg), rate=cfg.rate, num_requests=n, duration=cfg.duration,
                                arrival=cfg.arrival, cv=cfg.cv, max_total_tokens=cfg.max_total_tokens,
                                seed=cfg.seed, **extra)
    return wl.source()


def trace_source(cfg: RunConfig, extra: dict):
    """A trace replay; when the trace names each row's tenant (a ``tenant`` column) its requests carry them, with
    the weights and priorities ``tenants`` gives (weight 1 each without it)."""
    trace = read_arrival_trace(cfg.trace, vocab_size=vocab_size(cfg))
    source = replay(trace, target_rate=cfg.rate, num_requests=cfg.num_requests, max_total_tokens=cfg.max_total_tokens,
                    seed=cfg.seed, block_size=cfg.block_size, **extra).source()
    tenants = getattr(trace, "tenants", None)  # a JSONL trace of prompts has no tenant column
    if tenants is None:
        if cfg.tenants:
            raise ValueError(f"--tenants {cfg.tenants}: the trace {trace.source} has no tenant column to say whose "
                             f"each request is; add one (a column named tenant) or drop --tenants")
        return source
    return trace_tenants(source, tenants, cfg.tenants.value if cfg.tenants else None,
                         str(trace.source))


def tenant_lengths(cfg: RunConfig, preset: str | None):
    """A tenant's length distribution: its own preset, else the run's."""
    return length_preset(preset) if preset else length_dist(cfg)


DP_ROUTER = "vllm-dp-latest"  # the DP ranks' balancer unless the run names a router


def simulate_config(cfg: RunConfig, source, replicas: list[Replica], horizon: float | None = None,
                    progress: bool = False, log=None, keep_gaps: bool | None = None) -> RunResult:
    """Simulate ``replicas`` (from ``build_replicas(cfg)``) on ``source`` the way ``cfg`` says: its router (vLLM's
    DP balancer for DP ranks unless one is named), a MoE model's DP ranks in lockstep."""
    keep_gaps = cfg.keep_gaps if keep_gaps is None else keep_gaps
    router = (make_router(DP_ROUTER) if cfg.dp > 1 and cfg.router == "round-robin"
              else make_router(cfg.router, cfg.router_params))
    if in_lockstep(cfg.dp, cfg.expert_parallel, run_model(cfg)):
        return simulate_lockstep(source, replicas, router, horizon=horizon, seed=cfg.seed, keep_gaps=keep_gaps,
                                 log=log)
    return simulate(source, replicas, router, horizon=horizon, seed=cfg.seed, lanes=cfg.lanes, progress=progress,
                    keep_gaps=keep_gaps, log=log)


def run(cfg: RunConfig, progress: bool = False, stream: bool = False, out=None) -> RunResult:
    """One simulation. ``stream``: write ``out``/requests.csv and steps.csv during the run (no ``out``: keep
    totals only) and keep no rows in memory (see ``metrics/stream_summary.py``); needs ``keep_gaps=False``."""
    source = build_source(cfg)
    caching = cfg.prefix_caching and carries_content(cfg)
    log = steps = None
    tier_names = offload_tier_names(cfg) if caching else ()
    if stream:
        if cfg.keep_gaps:
            raise ValueError("a streamed run keeps TBT gaps only as sketches: set keep_gaps = false (--sketch)")
        log, steps = open_streams(out, caching, tier_names)
    elif caching:
        log = RequestLog(cfg.keep_gaps, cached=True, tiers=tier_names)
    replicas = build_replicas(cfg, workload_params(cfg, source), steps)
    result = simulate_config(cfg, source, replicas, horizon=cfg.horizon, progress=progress, log=log)
    rep = replicas[0]
    result.meta = {
        "config": dataclasses.asdict(cfg),
        "scheduler": rep.scheduler.describe(),
        "batch_time": rep.batch_time.describe(),
        "kv_blocks": rep.config.num_blocks,
        "block_size": rep.config.block_size,
        "max_model_len": rep.config.max_model_len,
        **({"kv_offload": rep.config.kv_offload.describe()} if rep.config.kv_offload is not None else {}),
        "wall_time_s": result.wall_time,
        "simulated_s": result.end_time,
    }
    if cfg.horizon is not None:
        account_horizon(cfg, source, result)
    return result


def offload_tier_names(cfg: RunConfig) -> tuple[str, ...]:
    """The media of the run's KV tiers below the GPU, in order (none without ``kv_offload``)."""
    return tuple(t.medium for t in cfg.kv_offload.value) if cfg.kv_offload else ()


def offered(source) -> int:
    """How many requests the run's source offers: an open loop's every arrival, a closed loop's whole count."""
    return source.num_requests if isinstance(source, ClosedLoop) else len(source)


def account_horizon(cfg: RunConfig, source, result: RunResult) -> None:
    """Requests the horizon kept out (arriving, or in a closed loop issued, after it) never enter the run: counted
    in meta.json (``offered``, ``after_horizon``) and said in one warning, so every offered request is accounted."""
    total, entered = offered(source), len(result.requests)
    result.meta.update(offered=total, after_horizon=total - entered)
    if total > entered:
        late = "would be issued" if isinstance(source, ClosedLoop) else "arrive"
        warnings.warn(f"horizon {cfg.horizon:g} s: {total - entered} of {total} requests {late} after it and were "
                      f"not run (meta.json: after_horizon); the {entered} that entered are in requests.csv, those "
                      f"in flight as unfinished", stacklevel=2)

"""One simulated run from a flat, name-based config: what the CLI and config files describe.

Every name (scheduler, model, GPU, batch-time model, workload, router) resolves
through a registry, never through an import path, so a config file cannot load code.
"""
from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np

from .batchtime.registry import BATCH_TIME_MODELS, make_batch_time_model, resolve_kind
from .batchtime.vllm_v1 import cudagraph_capture_sizes
from .config_fields import refuse_as_vllm
from .engine.replica import Replica, ReplicaConfig
from .hardware.gpus import gpu as gpu_preset
from .hardware.hf_config import kv_cache_dtype_bytes
from .hardware.kv_groups import KVGroups, kv_groups
from .hardware.kv_sizing import KVCache, kv_cache, memory_beside
from .hardware.models import model as model_preset
from .hardware.front_end import front_end
from .metrics.client_side import to_client
from .metrics.requests import RequestLog
from .metrics.slo_met import meets
from .metrics.steps import StepLog
from .metrics.streams import open_streams
from .metrics.timeline import Timeline, fold_requests, window_width
from .request import Status
from .routing.registry import make_router
from .run_config import RunConfig
from .schedulers.registry import create_scheduler, scheduler_info
from .sim.dp_lockstep import in_lockstep, simulate_lockstep
from .sim.simulator import RunResult, simulate
from .sources.registry import build_source
from .warm_caches import warm_caches
from .workload.workload import ClosedLoop, OpenLoop, names_prompts
from .workload.traces.readers import DataFileNotFound, resolve_data_file
from .workload.client_sends import client_sends
from .workload.held_turns import held_turns
from .workload.generators.shared_prefix import NAME as SHARED_PREFIX


def build_replicas(cfg: RunConfig, workload_params: dict | None = None,
                   steps: StepLog | None = None, ran: str | None = None) -> list[Replica]:
    """The run's replicas, sharing ``steps`` (default a new StepLog); ``workload_params`` (from
    ``workload_params(cfg, source)``) tunes workload-aware policies to the run's own workload where the user did
    not set those parameters. ``ran``: the log that proves this model ran on this GPU (a real run replayed), so
    that a model the memory model finds no room for is warned about, not refused."""
    bt, config = replica_parts(cfg, ran)
    steps = steps if steps is not None else StepLog()
    params = {**(workload_params or {}), **cfg.scheduler_params}
    policies = [new_policy(cfg, params, config, i == 0) for i in range(cfg.replicas if cfg.dp == 1 else cfg.dp)]
    return [Replica(i, policy, bt, config, steps) for i, policy in enumerate(policies)]


def replica_maker(cfg: RunConfig, workload_params: dict | None, steps: StepLog, disaggregated: bool = False):
    """A function that builds one more of ``cfg``'s replicas, given its index (in a fleet, unique across the
    pools), recording into ``steps``: the batch-time model and the limits built once, a new policy each.
    ``disaggregated``: a pool of a disaggregated fleet (``windowed_groups``)."""
    bt, config = replica_parts(cfg, disaggregated=disaggregated)
    params = {**(workload_params or {}), **cfg.scheduler_params}
    made = []

    def make(index: int) -> Replica:
        made.append(index)
        return Replica(index, new_policy(cfg, params, config, len(made) == 1), bt, config, steps)
    return make


def new_policy(cfg: RunConfig, params: dict, config: ReplicaConfig, first: bool):
    """A replica's own scheduler; a token budget above the replica's cap is lowered, recorded, and warned about
    for the ``first`` replica only."""
    try:
        policy = create_scheduler(cfg.scheduler, **params)
    except TypeError as e:
        raise ValueError(f"scheduler {cfg.scheduler!r} parameters {params}: a value has the wrong type ({e})") from None
    if first:
        refuse_as_vllm(cfg, policy, config.max_model_len)
    policy.fit_token_budgets(config.max_num_batched_tokens, cfg.scheduler_params if first else ())
    return policy


def replica_parts(cfg: RunConfig, ran: str | None = None, disaggregated: bool = False) -> tuple:
    """What the run's replicas share: the batch-time model and the replica config (limits, KV cache size);
    ``ran``: see ``build_replicas``; ``disaggregated``: see ``replica_maker``."""
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
    caching = cfg.prefix_caching and carries_content(cfg)
    groups, _ = windowed_groups(cfg, m, caching, disaggregated)
    num_blocks = cfg.num_blocks or kv_blocks(cfg, m, g, bt, groups)
    if cfg.num_blocks:
        check_fit(cfg, m, g, bt, ran)
    block_bytes = m.kv_bytes_per_token * cfg.block_size
    if groups is not None:  # a grouped block holds one page of each layer of a group
        block_bytes = block_bytes * groups.group_layers // m.layers
    config = ReplicaConfig(
        num_blocks=num_blocks, block_size=cfg.block_size, max_num_seqs=cfg.max_num_seqs,
        max_num_batched_tokens=cfg.max_num_batched_tokens, max_model_len=cfg.max_model_len or m.max_model_len,
        preemption_mode=cfg.preemption_mode, swap_blocks=int(cfg.swap_space_gb * 2**30 // block_bytes),
        swap_seconds_per_block=block_bytes / (g.host_bw * m.tp), oracle=cfg.oracle, overflow=cfg.overflow,
        fast_forward=cfg.fast_forward and not in_lockstep(cfg.dp, cfg.expert_parallel, m),
        check_invariants=cfg.check_invariants, prefix_caching=caching, kv_offload=offload_plan(cfg, m, g, caching),
        kv_groups=groups)
    return bt, config


def offload_plan(cfg: RunConfig, spec, device, caching: bool):
    """The run's KV tiers below the GPU resolved for its model, GPU and TP (None without ``kv_offload``)."""
    if not cfg.kv_offload:
        return None
    if not caching:
        raise ValueError(f"--kv-offload {cfg.kv_offload}: offload tiers keep cached prefixes, so the requests must "
                         f"name their prompts (a Mooncake or session trace, --workload shared-prefix, --turns); this "
                         f"run's do not")
    from .engine.offload_plan import plan_offload  # the tiers' modules load only for a run that has them
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


def kv_blocks(cfg: RunConfig, spec, device, bt, groups: KVGroups | None = None) -> int:
    """KV blocks per replica (per DP rank): :func:`run_kv_cache`'s."""
    return run_kv_cache(cfg, spec, device, bt, groups=groups).blocks


def windowed_groups(cfg: RunConfig, spec, caching: bool, disaggregated: bool = False) -> tuple[KVGroups | None, str]:
    """The model's windowed KV cache groups where the run counts them as vLLM's hybrid KV cache manager does
    (hardware/kv_groups.py, engine/kv_windows.py), else None and why not ('' for a model without windows).
    ``disaggregated``: ``cfg`` is a pool's of a disaggregated fleet (whose own fields drop ``disaggregate``): its
    KV crosses the link as every layer's (engine/kv_transfer.py), so its cache counts every layer too."""
    groups = kv_groups(spec)
    if groups is None:
        return None, ""
    if caching or cfg.kv_offload:
        why = "the prefix cache (and its tiers) is counted for full-attention layers only"
    elif cfg.disaggregate or disaggregated:
        why = ("a disaggregated run's KV crosses its link as every layer's (vLLM 0.32's NIXL and Mooncake "
               "connectors keep the hybrid manager and send a window's blocks: not modelled)")
    elif cfg.preemption_mode == "swap":
        why = "swapping (vLLM v0's) is counted for full-attention layers only"
    elif not scheduler_info(cfg.scheduler)["windowed_kv"]:
        why = f"scheduler {cfg.scheduler!r} plans one block per {cfg.block_size} tokens in every layer"
    else:
        return groups, ""
    return None, (f"{spec.base_name}'s sliding-window/chunked layers are counted as full attention (as vLLM's "
                  f"--disable-hybrid-kv-cache-manager): {why}")


def run_kv_cache(cfg: RunConfig, spec, device, bt, reported: bool = True, groups: KVGroups | None = None) -> KVCache:
    """The run's KV cache, sized by the one function every command uses (hardware/kv_sizing.py): the block count
    vLLM reported for the real run whose log ``cfg.trace`` is (its meta.json beside it, where that describes this
    model, parallelism and GPU), else vLLM's sizing for the vllm-v1 kind (or a real vLLM run's log), else the
    weights-and-reserve estimate of the engine-agnostic kinds. ``reported=False`` leaves the real run's count out:
    what the memory model alone finds room for (the fit check)."""
    vllm_engine = resolve_kind(cfg.batch_time)[0] == "vllm-v1"
    run = None
    if cfg.trace and reported:
        try:
            run = memory_beside(resolve_data_file(cfg.trace), spec, device, cudagraph_capture_sizes)
        except (DataFileNotFound, OSError):
            run = None  # the trace's own reader says what is wrong with it
    sizes = getattr(bt, "capture_sizes", None)
    graphs = len(sizes) if sizes is not None else \
        len(cudagraph_capture_sizes(cfg.max_num_seqs, cfg.max_num_batched_tokens)) if run is not None else 0
    return kv_cache(spec, device, block_size=cfg.block_size, max_num_seqs=cfg.max_num_seqs,
                    max_num_batched_tokens=cfg.max_num_batched_tokens, vllm_engine=vllm_engine,
                    gpu_memory_utilization=cfg.gpu_memory_utilization, capture_sizes=graphs, run=run, groups=groups)


def check_fit(cfg: RunConfig, spec, device, bt, ran: str | None = None) -> None:
    """A given KV cache size (``num_blocks``) sets the cache, not the room the weights need: the weights must still
    fit the GPU at the run's tensor parallelism, or the run is refused as without it (a warning where ``ran``, a
    real run's log, shows it ran there)."""
    try:
        run_kv_cache(cfg, spec, device, bt, reported=False)
    except ValueError as e:
        if ran is None:
            raise ValueError(f"{e} (--num-blocks {cfg.num_blocks} sets the KV cache's size, not the memory the "
                             f"weights need)") from None
        warnings.warn(f"{e}; yet {ran} shows the model ran there: the replay uses the KV cache the log reports, "
                      f"but check --model and --gpu", stacklevel=3)


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
        scheduled = cfg.rate_schedule or cfg.tenants or cfg.time_scale is not None
        rate = cfg.rate if cfg.rate and not scheduled else mean_rate(source)
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


DP_ROUTER = "vllm-dp-latest"  # the DP ranks' balancer unless the run names a router


def simulate_config(cfg: RunConfig, source, replicas: list[Replica], horizon: float | None = None,
                    progress: bool = False, log=None, keep_gaps: bool | None = None) -> RunResult:
    """Simulate ``replicas`` (from ``build_replicas(cfg)``) on ``source`` the way ``cfg`` says: its router (vLLM's
    DP balancer for DP ranks unless one is named), a MoE model's DP ranks in lockstep, and, at the client latency
    boundary (the default), the requests sent through the run's front end (workload/client_sends.py) and the
    latencies turned into the client's (metrics/client_side.py); ``engine`` gives vLLM's own stamps, as every run
    did before the client boundary."""
    keep_gaps = cfg.keep_gaps if keep_gaps is None else keep_gaps
    router = (make_router(DP_ROUTER) if cfg.dp > 1 and cfg.router == "round-robin"
              else make_router(cfg.router, cfg.router_params))
    source, log, fe = client_sends_of(cfg, source, log, keep_gaps, replicas[0].caching, replicas)
    source = held_turns(source)
    abort_delay = fe.handoff if fe is not None else 0.0  # a client's abort crosses the front end
    if in_lockstep(cfg.dp, cfg.expert_parallel, run_model(cfg)):
        result = simulate_lockstep(source, replicas, router, horizon=horizon, seed=cfg.seed, keep_gaps=keep_gaps,
                                   log=log, client_timeout=cfg.client_timeout,
                                   abort_delay=abort_delay)
    else:
        result = simulate(source, replicas, router, horizon=horizon, seed=cfg.seed, lanes=cfg.lanes,
                          progress=progress, keep_gaps=keep_gaps, log=log, client_timeout=cfg.client_timeout,
                          abort_delay=abort_delay)
    if fe is not None:
        to_client(result.requests, result.steps, fe, cfg.stream_interval, cfg.client_timeout)
    return result


def run(cfg: RunConfig, progress: bool = False, stream: bool = False, out=None, ran: str | None = None) -> RunResult:
    """One simulation. ``stream``: write ``out``/requests.csv and steps.csv during the run (no ``out``: keep
    totals only) and keep no rows in memory (see ``metrics/stream_summary.py``); needs ``keep_gaps=False`` and the
    engine latency boundary. ``ran``: see ``build_replicas``."""
    source = build_source(cfg)
    timeline = run_timeline(cfg, source)
    if cfg.runs_as_fleet:  # imported here: a run without a fleet loads none of it
        from .fleet_setup import run_fleet
        result, rep, fleet_meta = run_fleet(cfg, source, progress, stream, out, timeline)
    else:
        fleet_meta = None
        log, steps = open_logs(cfg, cfg.prefix_caching and carries_content(cfg), stream, out)
        if timeline is not None and getattr(log, "streamed", False):
            log.timeline = timeline  # a streamed log folds arrivals in as it writes them
        replicas = build_replicas(cfg, workload_params(cfg, source), steps, ran)
        warm_caches(replicas, source, cfg.max_total_tokens)
        result = simulate_config(cfg, source, replicas, horizon=cfg.horizon, progress=progress, log=log)
        rep = replicas[0]
    if timeline is not None:
        result.timeline = offered_timeline(cfg, timeline, result)
    result.meta = {
        "config": dataclasses.asdict(cfg),
        "scheduler": rep.scheduler.describe(),
        "batch_time": rep.batch_time.describe(),
        "kv_blocks": rep.config.num_blocks,
        # a fleet's first replica's, sized by its pool's fields (the run's own may not fit the card)
        "kv_cache": fleet_meta["pools"][next(iter(fleet_meta["pools"]))]["kv_cache"] if fleet_meta else
        kv_description(cfg, rep),
        "block_size": rep.config.block_size,
        "max_model_len": rep.config.max_model_len,
        **({"kv_offload": rep.config.kv_offload.describe()} if rep.config.kv_offload is not None else {}),
        "wall_time_s": result.wall_time,
        "simulated_s": result.end_time,
    }
    if cfg.rate_schedule:
        result.meta["rate_schedule"] = cfg.rate_schedule.value.describe()  # the pieces the text stood for
    if cfg.latency_boundary == "client":
        result.meta["front_end"] = {**front_end(cfg.front_end).describe(), "stream_interval": cfg.stream_interval}
    if fleet_meta is not None:
        result.meta["fleet"] = fleet_meta
    if cfg.horizon is not None:
        account_horizon(cfg, source, result)
    caps = getattr(source, "length_caps", ())
    if caps and cfg.max_total_tokens is not None:
        result.meta["max_total_tokens"] = length_cap_counts(cfg.max_total_tokens, caps)
    return result


def length_cap_counts(limit: int, caps) -> dict:
    """What ``max_total_tokens`` did to the run's requests: of the length draws the run took (every request's,
    a closed loop's sessions' turns', a tenant's stream's), how many it clipped, and how."""
    return {"limit": limit, "drawn": sum(c.drawn for c in caps), "clipped": sum(c.clipped for c in caps),
            "how": CLIP_RULE}


CLIP_RULE = ("a prompt longer than limit-1 tokens is cut to limit-1, then the output to limit minus the prompt "
             "(the prompt kept whole where it fits, generation cut short, as a max_tokens limit would)")


def keeps_timeline(cfg: RunConfig) -> bool:
    """Whether the run keeps a timeline: a rate schedule, or a timeline window given."""
    return cfg.timeline_window is not None or bool(cfg.rate_schedule)


def run_timeline(cfg: RunConfig, source) -> Timeline | None:
    """The run's timeline grid, when it keeps one (``keeps_timeline``): ``timeline_window`` seconds a window, else
    the width that gives at most 300 windows over the schedule's span."""
    if not keeps_timeline(cfg):
        return None
    return Timeline(cfg.timeline_window or window_width(schedule_extent(cfg, source)))


def schedule_extent(cfg: RunConfig, source) -> float:
    """How long the run's arrivals last: its duration, or the time the schedule expects its last arrival at."""
    if cfg.duration is not None:
        return cfg.duration
    shape = cfg.rate_schedule.value.shape
    n = float(len(source))
    return float(shape.inverse(np.array([n]))[0]) if n < shape.total else shape.end


def offered_timeline(cfg: RunConfig, timeline: Timeline, result: RunResult) -> dict:
    """summary.json's ``timeline``: per window, the requests that arrived (``arrivals``, and per second
    ``offered_rate``) and, with a rate schedule, the rate it offers on average over the window (``scheduled_rate``,
    its integral over the window divided by the width); what was served (``finished`` by finish time,
    ``served_rate``), the mean waiting queue over the window (``waiting``: requests arrived and not yet scheduled),
    the TTFT and TPOT quantiles and the SLO attainment (``slo_attainment``: those that met every target of their
    tier, over those that arrived) of the requests that arrived in it; in a fleet run the mean replicas in each
    state (``replicas_<state>``) and the mean GPUs billed (``billed_gpus``)."""
    log = result.requests
    if not getattr(log, "streamed", False):
        finished = log.column("status") == int(Status.FINISHED)
        fold_requests(timeline, log.column, finished, meets(log.column, finished)["all"])
    end = cfg.duration
    columns = {"arrivals": ("arrivals", False), "offered_rate": ("arrivals", True)}
    if cfg.rate_schedule:
        shape = cfg.rate_schedule.value.shape
        if end is None and cfg.num_requests is None and shape.end < math.inf:
            end = shape.end  # a schedule that ends (stages) is the run's span
        edges = np.append(timeline.starts(end), timeline.windows(end) * timeline.width)
        timeline.set("scheduled", np.diff(shape.cumulative(edges)))
        columns["scheduled_rate"] = ("scheduled", True)
    columns.update({"finished": ("finished", False), "served_rate": ("finished", True), "waiting": ("waiting", True)})
    fleet = getattr(result, "fleet", None)
    if fleet is not None:
        for state, spans in fleet_spans(fleet, result.end_time).items():
            name = state if state == "billed_gpus" else f"replicas_{state}"
            timeline.add_spans(name, *spans)
            columns[name] = (name, True)
    n = timeline.windows(end)
    arrived, good = timeline.column("arrivals", end), timeline.column("good", end)
    with np.errstate(invalid="ignore", divide="ignore"):
        extra = {"slo_attainment": np.where(arrived > 0, good / np.maximum(arrived, 1), np.nan)[:n]}
    for name in ("ttft", "tpot"):
        for q in (0.5, 0.9, 0.99):
            extra[f"{name}_p{round(q * 100)}"] = timeline.quantile(name, q, end)
    return {"window": timeline.width, "rows": timeline.rows(columns, end, extra)}


def fleet_spans(fleet: dict, end: float) -> dict[str, tuple]:
    """A fleet's replicas per state as intervals (start, end, count) from each pool's timeline rows, and its GPUs
    billed (every state but gone, times the pool's GPUs a replica): what ``Timeline.add_spans`` averages."""
    out = {state: ([], [], []) for state in ("provisioning", "loading", "warm", "serving", "draining")}
    out["billed_gpus"] = ([], [], [])
    for pool in fleet["pools"].values():
        rows = pool["timeline"]
        for row, nxt in zip(rows, rows[1:] + [None]):
            stop = nxt["t"] if nxt is not None else end
            for state in ("provisioning", "loading", "warm", "serving", "draining"):
                for part, value in zip(out[state], (row["t"], stop, row[state])):
                    part.append(value)
            billed = sum(row[s] for s in ("provisioning", "loading", "warm", "serving", "draining"))
            for part, value in zip(out["billed_gpus"], (row["t"], stop, billed * pool["gpus_per_replica"])):
                part.append(value)
    return out


def last_batch(replicas: list[Replica], req) -> int:
    """The requests that got a token in the step that just ended on ``req``'s replica (its decodes and chunks)."""
    if req.replica < 0:
        return 0
    _, prefills, decodes, _ = replicas[req.replica].clock.row
    return prefills + decodes


def kv_description(cfg: RunConfig, rep: Replica, disaggregated: bool = False) -> dict:
    """How the run's KV cache was sized, for meta.json (with a windowed model's KV cache groups, or why its windows
    are counted as full attention); ``disaggregated``: see ``replica_maker``."""
    spec, groups = run_model(cfg), rep.config.kv_groups
    if cfg.num_blocks:
        out = {"blocks": cfg.num_blocks, "source": "given (num_blocks)"}
    else:
        out = run_kv_cache(cfg, spec, gpu_preset(cfg.gpu), rep.batch_time, groups=groups).describe()
    why = windowed_groups(cfg, spec, rep.config.prefix_caching, disaggregated)[1] if groups is None else ""
    if groups is not None:
        out["groups"] = groups.describe()
    elif why:
        out["windows"] = why
    return out


def open_logs(cfg: RunConfig, caching: bool, stream: bool, out, tiers: tuple[str, ...] | None = None):
    """The run's request and step logs: None, None for the defaults (a plain log, a new step log), streams
    writing ``out`` for a streamed run, a log of cached tokens and of client sends where the run has them.
    ``tiers``: the media of the KV tiers its requests' cached tokens are split by (default the run's)."""
    client = cfg.latency_boundary == "client"
    log = steps = None
    tiers = (offload_tier_names(cfg) if tiers is None else tiers) if caching else ()
    if stream:
        if cfg.keep_gaps:
            raise ValueError("a streamed run keeps TBT gaps only as sketches: set keep_gaps = false (--sketch)")
        if client:
            raise ValueError("a streamed run (--stream) keeps no step log to price the front end's output path "
                             "per step: add --latency-boundary engine (latency_boundary = \"engine\")")
        log, steps = open_streams(out, caching, tiers)
    elif caching or client:
        log = RequestLog(cfg.keep_gaps, cached=caching, client=client, tiers=tiers)
    return log, steps


def offload_tier_names(cfg: RunConfig) -> tuple[str, ...]:
    """The media of the run's KV tiers below the GPU, in order (none without ``kv_offload``)."""
    return tuple(t.medium for t in cfg.kv_offload.value) if cfg.kv_offload else ()

def client_sends_of(cfg: RunConfig, source, log, keep_gaps: bool, caching: bool, replicas: list[Replica]):
    """At the client latency boundary: ``source``'s requests sent through the run's front end
    (workload/client_sends.py) into a log that keeps each send; returns the source, the log and the front end
    (None at the engine boundary, where nothing changes)."""
    if cfg.latency_boundary != "client":
        return source, log, None
    if getattr(log, "streamed", False):
        raise ValueError("a streamed run (--stream) keeps no step log to price the front end's output path "
                         "per step: add --latency-boundary engine (latency_boundary = \"engine\")")
    if log is None:
        log = RequestLog(keep_gaps, cached=caching, client=True)
    fe = front_end(cfg.front_end)
    return client_sends(source, fe, lambda req: last_batch(replicas, req)), log, fe


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

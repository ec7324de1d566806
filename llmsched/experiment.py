"""One simulated run from a flat, name-based config: what the CLI and config files describe.

Every name (scheduler, model, GPU, batch-time model, workload, router) resolves
through a registry, never through an import path, so a config file cannot load code.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .batchtime.registry import BATCH_TIME_MODELS, make_batch_time_model, resolve_kind
from .config_fields import API, FIELDS, Origin, check_combination, check_field, check_params, parse_rate_schedule
from .engine.replica import Replica, ReplicaConfig
from .hardware.gpus import gpu as gpu_preset
from .hardware.memory import kv_capacity_blocks
from .hardware.vllm_memory import no_room, vllm_kv_budget
from .hardware.models import model as model_preset
from .metrics.steps import StepLog
from .metrics.streams import open_streams
from .routers import make_router
from .schedulers.registry import create_scheduler, scheduler_info
from .sim.dp_lockstep import in_lockstep, simulate_lockstep
from .sim.simulator import RunResult, simulate
from .workload.tiers import parse_tiers
from .workload.arrivals import Piecewise
from .workload.workload import ClosedLoop, OpenLoop, Workload, generated_workload, lengths_file, trace_workload
from .workload.presets import length_preset


@dataclass
class RunConfig:
    """Everything one run needs. Field names match the CLI options and config-file keys."""

    scheduler: str = "sarathi"
    scheduler_params: dict = field(default_factory=dict)
    model: str = "llama-3-8b"
    gpu: str = "a100"
    tp: int | None = None  # tensor parallelism override of the model preset
    batch_time: str = "roofline"
    batch_time_params: dict = field(default_factory=dict)
    replicas: int = 1
    router: str = "round-robin"
    # vLLM's data parallelism: dp engines (attention ranks), each with its own scheduler and KV cache, behind
    # vLLM's DP load balancer (the router, unless one is named); expert_parallel shards a MoE model's experts
    # over them, and a MoE model's ranks step in lockstep (sim/dp_lockstep.py)
    dp: int = 1
    expert_parallel: bool = False
    # workload: a named length preset with an arrival process, a real trace, or a closed loop
    workload: str = "sharegpt"
    trace: str | None = None
    lengths: str | None = None  # a user's own length CSV instead of the named preset `workload`
    rate: float | None = 2.0
    num_requests: int | None = None
    duration: float | None = None
    arrival: str = "poisson"
    cv: float | None = None
    rate_schedule: str | None = None  # piecewise-constant rate, "T0:RATE0,T1:RATE1,..." (seconds:req/s)
    concurrency: int | None = None  # closed loop: this many requests in flight
    tiers: str | None = None  # e.g. "paid:tbt=0.1:share=0.05,free:tbt=0.5"
    max_total_tokens: int | None = None
    # replica limits, named as in vLLM
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    num_blocks: int | None = None  # override the KV capacity derived from the GPU
    preemption_mode: str = "recompute"
    overflow: str = "error"  # KV overflow: error, evict-newest (restart, seed 003), evict-newest-recompute
    swap_space_gb: float = 4.0
    oracle: bool = False
    # run control
    horizon: float | None = None
    warmup: float = 0.0
    cooldown: float = 0.0
    keep_gaps: bool = True
    fast_forward: bool = True  # fast-forward runs of decode-only steps (identical results; docs/simulator.md)
    lanes: bool = True  # run replicas that cannot affect each other one at a time (docs/simulator.md)
    check_invariants: bool = False  # the full KV and decode-group accounting check after every step (slow)
    seed: int = 0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            setattr(self, f.name, check_field(f.name, getattr(self, f.name)))
        defaults = RunConfig.__dataclass_fields__
        check_combination({f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                           if getattr(self, f.name) != _default(defaults[f.name])})

    @classmethod
    def from_dict(cls, data: dict, origin: str | Origin | dict = "config") -> "RunConfig":
        """A config from user-written values; ``origin`` says where each was written (one Origin, or one per
        key), so an error names the option or the file and line."""
        def origin_of(key):
            if isinstance(origin, dict):
                return origin.get(key, API)
            return origin if isinstance(origin, Origin) else API
        label = origin if isinstance(origin, str) else "config"
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            where = origin_of(unknown[0]).path if origin_of(unknown[0]).kind == "file" else label
            raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(known))}")
        data = {k: check_field(k, v, origin_of(k)) for k, v in data.items()}
        check_combination(data, origin_of)
        if "scheduler_params" in data:
            name = data.get("scheduler", cls.scheduler)
            data["scheduler_params"] = check_params(
                f"scheduler {name!r}", data["scheduler_params"], scheduler_info(name)["params"],
                origin_of("scheduler_params").name("scheduler_params"))
        return cls(**data)


def _default(f):
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


if {f.name for f in dataclasses.fields(RunConfig)} != set(FIELDS):
    raise RuntimeError("RunConfig's fields and config_fields.FIELDS differ: give every field a schema entry")


def load_config(path: str | Path) -> dict:
    """Read a TOML or YAML run config safely (data only, no code, no tags)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ValueError(f"cannot read config file {path}: {e.strerror}") from None
    if path.suffix == ".toml":
        import tomllib  # here: most runs have no config file
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"config file {path} is not valid TOML: {e}") from None
    elif path.suffix in (".yaml", ".yml"):
        import yaml
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"config file {path} is not valid YAML: {e}") from None
    else:
        raise ValueError(f"config file {path}: use a .toml, .yaml or .yml file")
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold a table/mapping of run options")
    return {k.replace("-", "_"): v for k, v in data.items()}


def read_run_config(path: str | Path) -> tuple[dict, Origin]:
    """A run config file's keys, each checked against RunConfig's schema, and its Origin for later errors."""
    data = load_config(path)
    origin = Origin.file(path, Path(path).read_text())
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise ValueError(f"config file {path}{origin.line_of(unknown[0])}: unknown key(s) {', '.join(unknown)}; "
                         f"valid keys: {', '.join(sorted(FIELDS))}")
    return {k: check_field(k, v, origin) for k, v in data.items()}, origin


DP_ROUTER = "vllm-dp-latest"  # the DP ranks' balancer unless the run names a router


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
        bt = make_batch_time_model(cfg.batch_time, m, g, **run_params(cfg, m), **cfg.batch_time_params)
    except TypeError as e:  # a value of the wrong type deep in the model's arithmetic
        raise ValueError(f"batch_time_params {cfg.batch_time_params}: a value has the wrong type for batch-time "
                         f"model {cfg.batch_time!r} ({e}); give numbers (and a path for file=)") from None
    num_blocks = cfg.num_blocks or kv_blocks(cfg, m, g, bt)
    block_bytes = m.kv_bytes_per_token * cfg.block_size
    config = ReplicaConfig(
        num_blocks=num_blocks, block_size=cfg.block_size, max_num_seqs=cfg.max_num_seqs,
        max_num_batched_tokens=cfg.max_num_batched_tokens, max_model_len=cfg.max_model_len or m.max_model_len,
        preemption_mode=cfg.preemption_mode, swap_blocks=int(cfg.swap_space_gb * 2**30 // block_bytes),
        swap_seconds_per_block=block_bytes / (g.host_bw * m.tp), oracle=cfg.oracle, overflow=cfg.overflow,
        fast_forward=cfg.fast_forward and not in_lockstep(cfg.dp, cfg.expert_parallel, m),
        check_invariants=cfg.check_invariants)
    steps = steps if steps is not None else StepLog()
    params = {**(workload_params or {}), **cfg.scheduler_params}
    try:
        return [Replica(i, create_scheduler(cfg.scheduler, **params), bt, config, steps)
                for i in range(cfg.replicas if cfg.dp == 1 else cfg.dp)]
    except TypeError as e:
        raise ValueError(f"scheduler {cfg.scheduler!r} parameters {params}: a value has the wrong type ({e})") from None


def run_model(cfg: RunConfig):
    """The run's model spec: the preset (or config.json) at the run's tensor parallelism."""
    m = model_preset(cfg.model)
    return m.with_tp(cfg.tp) if cfg.tp is not None else m


def run_params(cfg: RunConfig, spec) -> dict:
    """The run settings the batch-time kind takes from the run (its ``run_fields``, and the expert- and
    data-parallel sizes ``ep``/``dp`` where the kind has such parameters), where not given in
    ``batch_time_params``."""
    kind, _ = resolve_kind(cfg.batch_time)
    entry = BATCH_TIME_MODELS[kind]
    given = {name: getattr(cfg, name) for name in entry.get("run_fields", ())}
    if "ep" in entry["params"]:
        given["ep"] = spec.tp * cfg.dp if cfg.expert_parallel else 1
    if "dp" in entry["params"]:
        given["dp"] = cfg.dp
    return {k: v for k, v in given.items() if k not in cfg.batch_time_params}


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
    (WAIT, nested WAIT: seed 003 §5-6); empty for other policies or when the user gave explicit ``types``.

    The rate is the configured one, or for a trace replayed at its own pace or a rate schedule the mean rate of
    the generated arrivals, divided among the replicas (each policy instance sees its replica's share); a
    closed loop has none (the batch-cap rule needs only the rates' ratios)."""
    params = scheduler_info(cfg.scheduler)["params"]
    if not {"lengths", "rate", "types"} <= set(params) or cfg.scheduler_params.get("types"):
        return {}
    out = {"lengths": cfg.lengths or cfg.trace or cfg.workload}
    if cfg.concurrency is None:
        rate = cfg.rate if cfg.rate and not cfg.rate_schedule else mean_rate(source)
        if rate:
            out["rate"] = rate / cfg.replicas  # each replica's share (the routers spread arrivals evenly)
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


def build_source(cfg: RunConfig):
    tiers = parse_tiers(cfg.tiers) if cfg.tiers else None
    extra = {"tiers": tiers} if tiers else {}
    if cfg.concurrency is not None:
        if cfg.num_requests is None:
            raise ValueError("concurrency (a closed loop) needs num_requests, how many requests it sends in all")
        return ClosedLoop(cfg.concurrency, length_dist(cfg), cfg.num_requests, seed=cfg.seed,
                          max_total_tokens=cfg.max_total_tokens, **extra)
    if cfg.rate_schedule:
        if cfg.num_requests is None and cfg.duration is None:
            raise ValueError(f"rate_schedule {cfg.rate_schedule!r} needs num_requests or duration (--num-requests "
                             f"or --duration)")
        wl = Workload(Piecewise(parse_rate_schedule(cfg.rate_schedule)), length_dist(cfg),
                      num_requests=cfg.num_requests, duration=cfg.duration, max_total_tokens=cfg.max_total_tokens,
                      seed=cfg.seed, **extra)
    elif cfg.trace:
        wl = trace_workload(cfg.trace, target_rate=cfg.rate, num_requests=cfg.num_requests,
                            max_total_tokens=cfg.max_total_tokens, seed=cfg.seed, **extra)
    else:
        if cfg.rate is None:
            raise ValueError("a generated workload needs rate (--rate, requests/s)")
        n = cfg.num_requests if cfg.num_requests or cfg.duration else 1000
        wl = generated_workload(length_dist(cfg), rate=cfg.rate, num_requests=n, duration=cfg.duration,
                                arrival=cfg.arrival, cv=cfg.cv, max_total_tokens=cfg.max_total_tokens,
                                seed=cfg.seed, **extra)
    return wl.source()


def simulate_config(cfg: RunConfig, source, replicas: list[Replica], horizon: float | None = None,
                    progress: bool = False, log=None, keep_gaps: bool | None = None) -> RunResult:
    """Simulate ``replicas`` (from ``build_replicas(cfg)``) on ``source`` the way ``cfg`` says: its router (vLLM's
    DP balancer for DP ranks unless one is named), a MoE model's DP ranks in lockstep."""
    keep_gaps = cfg.keep_gaps if keep_gaps is None else keep_gaps
    router = make_router(DP_ROUTER if cfg.dp > 1 and cfg.router == "round-robin" else cfg.router)
    if in_lockstep(cfg.dp, cfg.expert_parallel, run_model(cfg)):
        if log is not None:
            raise ValueError("--stream does not run DP ranks in lockstep (a MoE model with --dp); drop --stream")
        return simulate_lockstep(source, replicas, router, horizon=horizon, seed=cfg.seed, keep_gaps=keep_gaps)
    return simulate(source, replicas, router, horizon=horizon, seed=cfg.seed, lanes=cfg.lanes, progress=progress,
                    keep_gaps=keep_gaps, log=log)


def run(cfg: RunConfig, progress: bool = False, stream: bool = False, out=None) -> RunResult:
    """One simulation. ``stream``: write ``out``/requests.csv and steps.csv during the run (no ``out``: keep
    totals only) and keep no rows in memory (see ``metrics/stream_summary.py``); needs ``keep_gaps=False``."""
    source = build_source(cfg)
    log = steps = None
    if stream:
        if cfg.keep_gaps:
            raise ValueError("a streamed run keeps TBT gaps only as sketches: set keep_gaps = false (--sketch)")
        log, steps = open_streams(out)
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
        "wall_time_s": result.wall_time,
        "simulated_s": result.end_time,
    }
    return result

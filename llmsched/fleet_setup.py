"""A run's fleet, built from its RunConfig and its fleet file, and run.

Each pool's replicas are built as a run's replicas are (``experiment.replica_maker``), from the pool's config: the
run's fields with the pool's own (``Pool.run_fields``), checked as any run config is; an error names the fleet
file, the pool and the field. A role one pool serves is routed by that pool's router; a role several pools serve
by the fleet's (the file's top-level ``router``, else the run's).

A fleet in which no replica joins or leaves and every request is served in one stage (``Fleet.is_static``) runs in
``simulate``, lanes and all: exactly a plain run of its replicas behind its router. Any other runs in
``sim/fleet_loop.py``.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .config_fields import DISAGG_KEYS, check_combination
from .experiment import (carries_content, client_sends_of, kv_description, offload_tier_names, open_logs,
                         replica_maker, run_model, schedule_extent, workload_params)
from .fleet.autoscaler import ScalingContext
from .fleet.autoscalers import make_autoscaler
from .fleet.cold_start import ColdStart, cold_start_model
from .fleet.fleet import Fleet
from .fleet.pool import PREFILL
from .fleet.state import FleetState
from .hardware.front_end import front_end
from .hardware.prices import load_prices
from .metrics.client_side import to_client
from .metrics.requests import RequestLog
from .metrics.steps import StepLog
from .routing.registry import make_router
from .run_config import (DEFAULTS, RunConfig, check_batch_time_params, check_field, checked_params,
                         checked_router_params)
from .run_field import API, Origin
from .sim.fleet_loop import simulate_fleet
from .sim.simulator import RunResult, simulate
from .warm_caches import warm_caches
from .workload.held_turns import held_turns
from .workload.workload import OpenLoop


def pool_config(cfg: RunConfig, pool) -> RunConfig:
    """The config of ``pool``'s replicas: ``cfg``'s fields (checked when ``cfg`` was made) with the pool's own,
    each checked by its declaration, all of them together, and parameters the pool gives for the run's scheduler
    or router against it; a decode pool without the run's KV tiers below the GPU (``Pool.run_fields``: the prompts
    the decider serves there whole find their prefixes in the tiers a decode pool sets itself)."""
    origin = pool.origin if pool.origin is not None else API
    run = {k: v for k, v in cfg.__dict__.items() if k != "fleet" and k not in DISAGG_KEYS and v != DEFAULTS[k]}
    data = pool.run_fields(run)
    data.update({k: check_field(k, v, origin) for k, v in pool.fields.items()})
    check_combination(data, lambda key: origin if key in pool.fields else API)
    if "scheduler_params" in pool.fields and "scheduler" not in pool.fields:
        data["scheduler_params"] = checked_params(data, origin)
    if "router_params" in pool.fields and "router" not in pool.fields:
        data["router_params"] = checked_router_params(data, origin)
    if data.get("batch_time_params") and ("batch_time_params" in pool.fields or "batch_time" in pool.fields):
        check_batch_time_params(data, origin if "batch_time_params" in pool.fields else API)
    return RunConfig.checked(data)


def pool_configs(cfg: RunConfig, fleet: Fleet) -> dict[str, RunConfig]:
    return {pool.name: pool_config(cfg, pool) for pool in fleet.pools}


def fleet_of(cfg: RunConfig) -> Fleet:
    """The run's fleet: its fleet file's, or one pool of the run's replicas (a DP group is no fleet: its ranks
    are one server, ``experiment.simulate_config`` runs them); an autoscaled pool starts with ``--replicas`` (a
    fleet's pool with its own replicas), at least ``--min-replicas`` (its own min_replicas)."""
    if cfg.fleet:
        return autoscaled_starts(cfg.fleet.value, cfg)
    if cfg.disaggregate:
        from .disagg_config import disaggregated_fleet  # here: a plain run loads none of disaggregation
        return autoscaled_starts(disaggregated_fleet(cfg), cfg)
    if cfg.dp > 1:
        raise ValueError(f"dp={cfg.dp}: a DP group is one server of {cfg.dp} ranks, not a fleet of replicas")
    if cfg.autoscaler:
        start = max(cfg.replicas, cfg.min_replicas)
        if start > cfg.max_replicas:
            raise ValueError(f"--replicas {cfg.replicas} is above --max-replicas {cfg.max_replicas}: an autoscaled "
                             f"run starts within its bounds; lower --replicas or raise --max-replicas")
        return Fleet.single(start)
    return Fleet.single(cfg.replicas)


def autoscaled_starts(fleet: Fleet, cfg: RunConfig) -> Fleet:
    """``fleet`` (of run ``cfg``) with each autoscaled pool starting within its bounds, as a plain run does: below
    its min_replicas its autoscaler's first tick would cold-start replicas the run asked to have from the start."""
    pools = []
    for pool in fleet.pools:
        own = pool_config(cfg, pool)
        if own.autoscaler:
            if pool.replicas > own.max_replicas:
                raise ValueError(f"{fleet.source}: pool {pool.name!r} starts with {pool.replicas} replicas, above its "
                                 f"max_replicas {own.max_replicas}: an autoscaled pool starts within its bounds; "
                                 f"give it fewer replicas or raise max_replicas (--max-replicas)")
            pool = dataclasses.replace(pool, replicas=max(pool.replicas, own.min_replicas))
        pools.append(pool)
    return dataclasses.replace(fleet, pools=tuple(pools))


def with_cold_starts(fleet: Fleet, configs: dict[str, RunConfig]) -> Fleet:
    """``fleet`` with the cold-start model (fleet/cold_start.py) as the start-up phases of each pool that gives none
    and whose run asks for one (``--cold-start``, ``--cold-start-param`` or an autoscaler); other pools unchanged."""
    pools = []
    for pool in fleet.pools:
        own = configs[pool.name]
        if pool.phases is None and (own.cold_start is not None or own.cold_start_params or own.autoscaler):
            try:
                model = cold_start_model(run_model(own), own.gpu, own.cold_start_params, own.cold_start)
            except ValueError as e:
                where = f"{fleet.source}: pool {pool.name!r}: " if pool.origin is not None else ""
                raise ValueError(f"{where}{e}") from None
            pool = dataclasses.replace(pool, phases=model)
        pools.append(pool)
    return dataclasses.replace(fleet, pools=tuple(pools))


def scaling_context(cfg: RunConfig, fleet: Fleet, role: str, source) -> ScalingContext:
    """What the run tells an autoscaler of ``role``'s pool (``ScalingContext``): its rate forecast, the strictest
    TTFT and TPOT targets of its tiers, its requests' mean lengths where the source holds them."""
    if cfg.rate_schedule:
        forecast = cfg.rate_schedule.value.shape
    elif cfg.rate and cfg.concurrency is None and not cfg.tenants:
        forecast = float(cfg.rate)
    else:
        forecast = None
    targets = {}
    for tier in cfg.tiers.value if cfg.tiers else ():
        for name in ("ttft", "tpot"):
            value = getattr(tier.slo, name, None)
            if value is not None:
                targets[name] = min(targets.get(name, math.inf), value)
    isl = osl = None
    if isinstance(source, OpenLoop) and len(source):  # its columns (a streamed source draws them, builds no request)
        prompts, outputs = source.lengths
        isl, osl = float(np.mean(prompts)), float(np.mean(outputs))
    return ScalingContext(forecast, targets.get("ttft"), targets.get("tpot"), isl, osl, len(fleet.pools_of(role)))


def run_extent(cfg: RunConfig, source) -> float | None:
    """How long the run's arrivals last (None where a source does not say before it runs)."""
    if cfg.duration is not None:
        return cfg.duration
    if cfg.rate_schedule:
        return schedule_extent(cfg, source)
    times = getattr(source, "arrival_times", None)
    return float(np.max(times)) if times is not None and len(times) else None


def autoscalers_of(cfg: RunConfig, fleet: Fleet, configs: dict[str, RunConfig], source) -> list:
    """An autoscaler for each pool whose run fields name one, each with its pool's bounds and parameters; a pool's
    cold start longer than the run's arrivals is refused (nothing it adds would serve)."""
    out = []
    extent = None
    for pool in fleet.pools:
        own = configs[pool.name]
        if not own.autoscaler:
            continue
        try:
            scaler = make_autoscaler(own.autoscaler, pool.name, own.min_replicas, own.max_replicas,
                                     own.autoscaler_params, scaling_context(cfg, fleet, pool.role, source))
        except ValueError as e:
            where = f"{fleet.source}: pool {pool.name!r}: " if cfg.fleet else ""
            raise ValueError(f"{where}{e}") from None
        if extent is None:
            extent = run_extent(cfg, source) or math.inf
        cold = pool.durations.cold_start
        if cold >= extent:
            given = f"--cold-start {own.cold_start:g} s" if own.cold_start is not None else \
                f"the cold start of {cold:.4g} s"
            raise ValueError(f"{given} (pool {pool.name!r}) is longer than the run's {extent:.6g} s of arrivals: no "
                             f"replica the autoscaler adds would ever serve; shorten the cold start (--cold-start) "
                             f"or run longer")
        out.append(scaler)
    return out


def role_router(cfg: RunConfig, fleet: Fleet, role: str, configs: dict[str, RunConfig]):
    """The router of ``role``: its one pool's, or the fleet's for a role several pools serve."""
    pools = fleet.pools_of(role)
    if len(pools) == 1:
        own = configs[pools[0].name]
        return make_router(own.router, own.router_params)
    data = {"router": cfg.router, "router_params": cfg.router_params}
    if fleet.router.get("router", cfg.router) != cfg.router:
        data["router_params"] = {}  # the fleet's router takes only the parameters the file gives it
    data.update(fleet.router)
    where = Origin.file(fleet.source) if fleet.router else API
    return make_router(data["router"], checked_router_params(data, where))


def build_fleet(cfg: RunConfig, fleet: Fleet, source, steps: StepLog,
                configs: dict[str, RunConfig] | None = None, controllers=()) -> FleetState:
    """``fleet`` (of run ``cfg``) at the run's start, its replicas recording into ``steps``; ``controllers``: what
    changes its size besides its scale events (``FleetState``)."""
    configs = configs or pool_configs(cfg, fleet)
    handoff = None
    if disaggregated(fleet):
        from .disagg_config import disaggregation, sending
        fleet, handoff = disaggregation(cfg, fleet, configs,
                                        front_end(cfg.front_end) if cfg.latency_boundary == "client" else None)
    total = fleet.initial_replicas
    makers, gpus = {}, {}
    for pool in fleet.pools:
        own = configs[pool.name]
        try:  # a policy tuned to its workload sees its replica's share of the fleet's rate
            params = workload_params(own.with_values(replicas=total), source)
            makers[pool.name] = replica_maker(own, params, steps, handoff is not None)
            if handoff is not None and pool.role == PREFILL:
                makers[pool.name] = sending(makers[pool.name])
            gpus[pool.name] = run_model(own).tp
        except ValueError as e:
            raise ValueError(f"{fleet.source}: pool {pool.name!r}: {e}") from None
    routers = {role: role_router(cfg, fleet, role, configs) for role in fleet.roles}
    try:
        state = FleetState(fleet, makers, routers, gpus, controllers)
    except ValueError as e:
        raise ValueError(f"{fleet.source}: {e}") from None
    if handoff is not None:
        from .disagg_config import check_decode_fits, kv_transfers
        check_decode_fits(state, source)
        state.transfers = kv_transfers(cfg, state, handoff, configs)
        state.handoff = handoff
    return state


def check_pool_schedulers(cfg: RunConfig) -> None:
    """What a fleet run's start refuses of its pools' schedulers, said before the first of several runs (compare,
    sweep): a decode pool's that cannot plan a sent prompt (``disagg_config.check_decode_schedulers``)."""
    if not cfg.runs_as_fleet:
        return
    fleet = fleet_of(cfg)
    if disaggregated(fleet):
        from .disagg_config import check_decode_schedulers
        check_decode_schedulers(fleet, pool_configs(cfg, fleet))


def disaggregated(fleet: Fleet) -> bool:
    """Whether ``fleet`` has prefill or decode pools (its requests' KV moves between them)."""
    return any(p.role in ("prefill", "decode") for p in fleet.pools)


def fleet_caching(configs: dict[str, RunConfig]) -> bool:
    """Whether any pool keeps a prefix cache (the run's requests then record their cached tokens)."""
    return any(c.prefix_caching and carries_content(c) for c in configs.values())


def fleet_tier_names(configs: dict[str, RunConfig]) -> tuple[str, ...]:
    """The media requests.csv splits a fleet's cached tokens by: its pools' KV tiers, the longest list, which each
    pool's must begin (a request's split is its replica's, nearest the GPU first; a pool without some lower tier
    found none there); a one-line error naming the pools otherwise."""
    lists = {name: offload_tier_names(c) for name, c in configs.items() if c.kv_offload}
    longest = max(lists.values(), key=len, default=())
    for name, media in lists.items():
        if media != longest[:len(media)]:
            other = next(n for n, m in lists.items() if m == longest)
            raise ValueError(f"pool {name!r} keeps KV tiers {', '.join(media)} and pool {other!r} "
                             f"{', '.join(longest)}: a fleet's pools list their tiers' media in one order, each "
                             f"beginning the longest (e.g. cpu and cpu,disk); give them the same media")
    return longest


def simulate_fleet_config(cfg: RunConfig, source, horizon: float | None = None, progress: bool = False, log=None,
                          steps: StepLog | None = None, keep_gaps: bool | None = None, fleet: Fleet | None = None,
                          configs: dict[str, RunConfig] | None = None,
                          controllers=()) -> tuple[RunResult, FleetState]:
    """Simulate ``fleet`` (default the run's, ``fleet_of(cfg)``) on ``source`` (module docstring); ``log`` and
    ``steps`` as ``simulate``'s; ``controllers`` change its size (an autoscaler: ``FleetState``)."""
    fleet = fleet or fleet_of(cfg)
    configs = configs or pool_configs(cfg, fleet)
    fleet = with_cold_starts(fleet, configs)
    controllers = (*controllers, *autoscalers_of(cfg, fleet, configs, source))
    keep_gaps = cfg.keep_gaps if keep_gaps is None else keep_gaps
    steps = steps if steps is not None else StepLog()
    state = build_fleet(cfg, fleet, source, steps, configs, controllers)
    for members in state.members.values():  # each role's replicas serving at the start, as their routers see them
        warm_caches(members.replicas, source, cfg.max_total_tokens)
    source, log, fe = client_sends_of(cfg, source, log, keep_gaps, fleet_caching(configs), state.replicas)
    source = held_turns(source)
    abort_delay = fe.handoff if fe is not None else 0.0  # a client's abort crosses the front end
    if log is None:
        caching = fleet_caching(configs)
        log = RequestLog(keep_gaps, cached=caching, tiers=fleet_tier_names(configs) if caching else ())
    log.pools = ([p.name for p in fleet.pools], state.pool_index)  # requests.csv's pool column
    if state.transfers is not None:  # requests.csv's prefill instance and KV transfer columns
        log.enable_transfers(state.handoff.record_of)
    if fleet.is_static and not controllers:
        members = state.members[fleet.roles[0]]
        result = simulate(source, state.replicas, members.router, horizon=horizon, seed=cfg.seed, lanes=cfg.lanes,
                          progress=progress, keep_gaps=keep_gaps, log=log, client_timeout=cfg.client_timeout,
                          abort_delay=abort_delay)
        result.fleet = state.summary(result.end_time)
    else:
        result = simulate_fleet(source, state, horizon=horizon, seed=cfg.seed, progress=progress,
                                keep_gaps=keep_gaps, log=log, client_timeout=cfg.client_timeout,
                                abort_delay=abort_delay)
    if fe is not None:
        to_client(result.requests, result.steps, fe, cfg.stream_interval, cfg.client_timeout)
    if state.autoscalers or cfg.cold_start is not None or cfg.cold_start_params:
        result.fleet["cost"] = fleet_cost(result.fleet, configs)
    return result, state


def fleet_cost(fleet: dict, configs: dict[str, RunConfig]) -> dict:
    """GPU-hours billed per pool and in all, and their cost at the built-in prices (llmsched/hardware/prices.json;
    a pool whose GPU has no price there costs None, and so does the total)."""
    prices = load_prices()
    pools, total = {}, 0.0
    for name, pool in fleet["pools"].items():
        hours = pool["billed_gpu_s"] / 3600
        try:
            usd = hours * prices.price(configs[name].gpu)
        except ValueError:
            usd = None
        pools[name] = {"gpu": configs[name].gpu, "gpu_hours": hours, "usd": usd}
        total = None if usd is None or total is None else total + usd
    return {"gpu_hours": fleet["billed_gpu_s"] / 3600, "usd": total, "pools": pools,
            "prices": "llmsched/hardware/prices.json"}


def run_fleet(cfg: RunConfig, source, progress: bool, stream: bool, out, timeline=None):
    """``experiment.run`` of a fleet: the result, the fleet's first replica (the run's meta describes it) and the
    fleet's own meta (each pool's settings, the scale events); ``timeline`` a streamed log folds arrivals into."""
    fleet = fleet_of(cfg)
    configs = pool_configs(cfg, fleet)
    log, steps = open_logs(cfg, fleet_caching(configs), stream, out, fleet_tier_names(configs))
    if timeline is not None and getattr(log, "streamed", False):
        log.timeline = timeline
    result, state = simulate_fleet_config(cfg, source, horizon=cfg.horizon, progress=progress, log=log,
                                          steps=steps, fleet=fleet, configs=configs)
    return result, state.replicas[0], fleet_meta(state, configs)


def fleet_meta(state: FleetState, configs: dict[str, RunConfig]) -> dict:
    fleet = state.fleet
    pools = {}
    for name, pool in state.pools.items():
        rep = pool.replicas[0]
        pools[name] = {"role": pool.spec.role, "replicas": pool.spec.replicas, "fields": pool.spec.fields,
                       **({"cold_start": pool.spec.phases.describe()} if isinstance(pool.spec.phases, ColdStart)
                          else {}),
                       "phases_s": {p: pool.spec.durations.seconds(p) for p in ("provisioning", "loading", "warm")},
                       "scheduler": rep.scheduler.describe(), "batch_time": rep.batch_time.describe(),
                       "kv_blocks": rep.config.num_blocks,
                       "kv_cache": kv_description(configs[name], rep, state.handoff is not None),
                       **({"kv_offload": rep.config.kv_offload.describe()} if rep.config.kv_offload is not None
                          else {}),
                       "max_model_len": rep.config.max_model_len, "gpus_per_replica": pool.gpus}
    routers = {role: members.router.name for role, members in state.members.items()}
    meta = {"file": fleet.source, "pools": pools, "routers": routers,
            "scale": [{"at": e.at, "pool": e.pool, "replicas": e.replicas} for e in fleet.scale]}
    if state.transfers is not None:
        meta["disaggregation"] = {"decider": repr(fleet.paths), "kv_link": state.transfers.link.describe(),
                                  "kv_connector": state.transfers.connector}
    return meta

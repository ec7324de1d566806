"""A disaggregated run from its run fields: the checks of the fields together, the fleet ``--disaggregate xPyD``
describes, and what its run needs besides its pools (the KV handoff, the decider, the transfers).

``--disaggregate xPyD`` is a fleet of two pools, ``prefill`` (x replicas) and ``decode`` (y), each with the run's
fields and its own (``--prefill-gpu/--prefill-tp/--prefill-pool FIELD=VALUE``, likewise for decode); a fleet file
with ``role = "prefill"`` and ``role = "decode"`` pools is the same with any pools. Either way ``--kv-link``,
``--kv-connector`` and ``--pd-decider`` say how the KV moves and which requests are disaggregated.
"""
from __future__ import annotations

import dataclasses

from .fleet.deciders import check_decider, make_decider
from .fleet.disagg import KVHandoff, unbuilt
from .fleet.deciders import Always
from .fleet.fleet import Fleet
from .fleet.kv_transfers import KVTransfers
from .fleet.pool import DECODE, POOL_FIELDS, PREFILL, Pool
from .hardware.links import kv_link, link as named_link
from .run_field import shown

POOL_OF = {"prefill_gpu": ("prefill", "gpu"), "prefill_tp": ("prefill", "tp"), "decode_gpu": ("decode", "gpu"),
           "decode_tp": ("decode", "tp")}
LINK_FIELDS = ("kv_link", "kv_connector", "pd_first_token", "pd_decider", "pd_decider_params")
POOL_TABLES = ("prefill_pool", "decode_pool")
# a pool table's fields: a replica's run fields written KEY=VALUE, and its scheduler's and batch-time model's
# parameters as tables (from a config file or the API; a validate-serving replay of a 1P1D run sets them)
TABLE_FIELDS = tuple(f for f in POOL_FIELDS if f not in ("replicas", "router_params"))


def set_fields(data: dict) -> list[str]:
    """The disaggregation fields ``data`` sets to other than their defaults."""
    from .run_config import DEFAULTS  # here: run_config imports the checks that call this
    return [k for k in (*POOL_OF, *POOL_TABLES, *LINK_FIELDS) if k in data and data[k] is not None
            and data[k] != DEFAULTS[k]]


def check_disagg_combination(data: dict, origin_of) -> None:
    """The disaggregation fields together with the rest of a run (one-line errors naming them)."""
    def given(key):
        return data.get(key) not in (None, "")

    fields = set_fields(data)
    if given("disaggregate"):
        where = origin_of("disaggregate").name("disaggregate")
        if given("fleet"):
            raise ValueError(f"{where} does not apply together with {origin_of('fleet').name('fleet')}: a fleet "
                             f"file gives its pools; write pools with role = \"prefill\" and role = \"decode\" there")
        for key, neutral, why in (("replicas", 1, "xPyD gives each pool's replicas"),
                                  ("dp", 1, "a pool's replicas are its engines; vLLM's DP group is a plain run's"),
                                  ("expert_parallel", False, "a MoE model's DP ranks step in lockstep, which a "
                                                             "fleet's pools do not")):
            if given(key) and data[key] != neutral:
                raise ValueError(f"{origin_of(key).name(key)} does not apply together with {where}: {why}")
    elif fields and not given("fleet"):
        key = fields[0]
        raise ValueError(f"{origin_of(key).name(key)} applies to a disaggregated run: add --disaggregate xPyD (or "
                         f"a fleet file with prefill and decode pools)")
    elif given("fleet"):
        own = [k for k in (*POOL_OF, *POOL_TABLES) if k in fields]
        if own:
            raise ValueError(f"{origin_of(own[0]).name(own[0])} does not apply together with "
                             f"{origin_of('fleet').name('fleet')}: the fleet file gives each pool's fields")
    for key, (pool, name) in POOL_OF.items():  # --prefill-tp 4 with --prefill-pool tp=2: which one is meant?
        table = data.get(f"{pool}_pool") or {}
        if given(key) and name in table and not same_value(table[name], data[key]):
            raise ValueError(f"{origin_of(key).at(key, data[key])} contradicts "
                             f"{origin_of(f'{pool}_pool').in_table(f'{pool}_pool').at(name, table[name])}: give the "
                             f"{pool} pool's {name} once")
    for table in POOL_TABLES:
        if data.get(table):
            check_pool_table(table, data[table], origin_of(table), data, origin_of)
    decider = data.get("pd_decider") or "always"
    if data.get("pd_decider_params"):
        check_decider(decider, data["pd_decider_params"], origin_of("pd_decider_params").name("pd_decider_params"))
    if given("kv_link"):
        try:
            named_link(data["kv_link"], data.get("decode_gpu") or data.get("gpu") or "a100")
        except ValueError as e:
            raise ValueError(f"{origin_of('kv_link').at('kv_link', data['kv_link'])}: {e}") from None


def same_value(a, b) -> bool:
    """Two spellings of one value: a card's name in any case (--decode-gpu A100, --decode-pool gpu=a100)."""
    return a == b or (isinstance(a, str) and isinstance(b, str) and a.strip().lower() == b.strip().lower())


def check_pool_table(table: str, values: dict, origin, run: dict | None = None, origin_of=None) -> dict:
    """``--prefill-pool``/``--decode-pool``'s fields, each checked by its run field's declaration, then together
    with the run's (``run``, written where ``origin_of`` says), as the pool's replicas will take them: its scheduler's
    parameters against the scheduler it runs, its autoscaler's options with an autoscaler; an error names the
    table's field where it was written (``decode_pool.scheduler_params (in run.toml)``)."""
    from .config_fields import DISAGG_KEYS, check_combination
    from .run_config import check_batch_time_params, check_field, checked_params
    from .run_field import API
    out = {}
    for key, value in values.items():
        if key not in TABLE_FIELDS:
            raise ValueError(f"{origin.name(table)} {key}={shown(value)}: a pool here sets "
                             f"{', '.join(TABLE_FIELDS)} (replicas come from xPyD; a router's parameters need a "
                             f"fleet file)")
        try:
            out[key] = check_field(key, value, API)
        except ValueError as e:  # named as written: --decode-pool max_num_seqs=0: must be ...
            raise ValueError(f"{origin.name(table)} {e}") from None
    own, run_of, run = origin.in_table(table), origin_of or (lambda key: API), run or {}
    role = table.removesuffix("_pool")
    fields = {**out, **{name: run[key] for key, (pool, name) in POOL_OF.items() if pool == role and
                        run.get(key) is not None}}
    data = Pool(table, 1, role, fields).run_fields({k: v for k, v in run.items() if k not in DISAGG_KEYS})
    check_combination(data, lambda key: own if key in out else run_of(key))
    if "scheduler_params" in out:
        out["scheduler_params"] = checked_params(data, own)
    if data.get("batch_time_params") and ("batch_time_params" in out or "batch_time" in out):
        check_batch_time_params(data, own if "batch_time_params" in out else run_of("batch_time_params"))
    return out


def disaggregated_fleet(cfg) -> Fleet:
    """The fleet ``--disaggregate xPyD`` describes: a ``prefill`` and a ``decode`` pool, each with the run's
    fields and its own."""
    x, y = cfg.disaggregate.value
    own = {"prefill": dict(cfg.prefill_pool), "decode": dict(cfg.decode_pool)}
    for key, (pool, name) in POOL_OF.items():
        value = getattr(cfg, key)
        if value is not None:
            own[pool][name] = value
    return Fleet((Pool("prefill", x, PREFILL, own["prefill"]), Pool("decode", y, DECODE, own["decode"])),
                 paths=Always(unbuilt()), source=f"--disaggregate {cfg.disaggregate}")


def is_disaggregated(fleet: Fleet) -> bool:
    return PREFILL in fleet.roles or DECODE in fleet.roles


def disaggregation(cfg, fleet: Fleet, configs: dict, front_end=None) -> tuple[Fleet, KVHandoff]:
    """``fleet`` with its decider over a KV handoff through the run's front end (None at the engine boundary),
    after the checks a disaggregated fleet needs: one model and one KV dtype in every pool (the KV moves as it
    is), both roles served."""
    from .experiment import run_model
    pools = fleet.pools_of(PREFILL) + fleet.pools_of(DECODE)
    missing = [role for role in (PREFILL, DECODE) if not fleet.pools_of(role)]
    if missing:
        raise ValueError(f"{fleet.source}: a disaggregated fleet needs a {missing[0]} pool (role = "
                         f"\"{missing[0]}\") besides its {'decode' if missing[0] == PREFILL else 'prefill'} pools")
    from .engine.kv_transfer import check_tp
    for pool in pools:  # each side's KV layout splits the model's KV heads (the transfer maps one onto the other)
        check_tp(run_model(configs[pool.name].with_values(tp=None)), configs[pool.name].tp or 1,
                 f"{fleet.source}: pool {pool.name!r}:")
    first = pools[0]
    model, spec = configs[first.name].model, run_model(configs[first.name])
    for pool in pools[1:]:
        other = run_model(configs[pool.name])
        if configs[pool.name].model != model or other.kv_bytes_per_token != spec.kv_bytes_per_token:
            raise ValueError(f"{fleet.source}: pool {pool.name!r} serves {configs[pool.name].model} with "
                             f"{other.kv_bytes_per_token} KV bytes a token, pool {first.name!r} {model} with "
                             f"{spec.kv_bytes_per_token}: a prefill's KV moves to the decode pool as it is, so every "
                             f"pool needs the same model and kv_cache_dtype")
    for prefill in fleet.pools_of(PREFILL):  # the KV crosses from every prefill pool to every decode pool
        for decode in fleet.pools_of(DECODE):
            try:
                kv_link(cfg.kv_link, configs[prefill.name].gpu, configs[decode.name].gpu)
            except ValueError as e:
                raise ValueError(f"{fleet.source}: --kv-link from pool {prefill.name!r} to pool {decode.name!r}: "
                                 f"{e}") from None
    check_decode_schedulers(fleet, configs)
    handoff = KVHandoff(front_end, first_token_at_prefill=cfg.pd_first_token == "prefill")
    decider = make_decider(cfg.pd_decider, dict(cfg.pd_decider_params), handoff)
    return dataclasses.replace(fleet, paths=decider), handoff


def check_decode_schedulers(fleet: Fleet, configs: dict) -> None:
    """Each decode pool's scheduler plans a waiting request that holds a sent prompt's KV
    (``Scheduler.serves_transferred_kv``); a one-line error naming the pool and the ones that do otherwise."""
    from .schedulers.registry import create_scheduler, scheduler_names
    for pool in fleet.pools_of(DECODE):
        name, params = configs[pool.name].scheduler, configs[pool.name].scheduler_params
        if not getattr(create_scheduler(name, **params), "serves_transferred_kv", False):  # (may be per setting)
            able = [n for n in scheduler_names() if getattr(create_scheduler(n), "serves_transferred_kv", False)]
            setting = f" with {', '.join(f'{k}={v}' for k, v in params.items())}" if params else ""
            raise ValueError(f"{fleet.source}: decode pool {pool.name!r}: scheduler {name!r}{setting} plans a waiting "
                             f"request as holding no KV, but one whose prompt a prefill instance sent holds its blocks "
                             f"while it waits; a decode pool runs {', '.join(able)} (docs/disaggregation.md)")


def kv_transfers(cfg, state, handoff: KVHandoff, configs: dict) -> KVTransfers:
    """The fleet's KV transfers over the run's link (``--kv-link``, a decode pool's GPU for ``pcie`` and
    ``same-node``), each replica's TP and block size its pool's."""
    from .experiment import run_model
    fleet = state.fleet
    decode = fleet.pools_of(DECODE)[0]
    own = configs[decode.name]
    link = named_link(cfg.kv_link, own.gpu)
    spec = run_model(own)
    tp = {p.name: state.pools[p.name].gpus for p in fleet.pools}
    names = [p.name for p in fleet.pools]
    return KVTransfers(spec, link, cfg.kv_connector, lambda i: tp[names[state.pool_index[i]]],
                       lambda i: state.replicas[i].kv.block_size, handoff.records)


def sending(make):
    """``make`` (a prefill pool's replica maker) with each replica keeping a finished prompt's blocks until the
    decode side has read them, or the request has left: vLLM's NIXL connector delays their free
    (``request_finished`` returns ``delay_free_blocks``; the decode instance's read, or its notice that the request
    went, frees them; its 30-s lease, renewed by the decode side's heartbeats while it waits, is not modelled).
    Only under a policy that plans from the KV manager's free blocks (``Scheduler.serves_transferred_kv``): one
    with a ledger of its own cannot run beside blocks it does not hold, and frees them at the prefill's end."""
    def make_sending(index: int):
        rep = make(index)
        rep.send_kv()
        return rep
    return make_sending


def check_decode_fits(state, source) -> None:
    """Before the run: every decode pool's KV cache holds the workload's longest request (a one-line error
    naming the pool and the request otherwise)."""
    longest = workload_longest(source)
    if longest is None:
        return
    prompt, output = longest
    tokens = prompt + output - 1
    for pool in state.fleet.pools_of(DECODE):
        rep = state.pools[pool.name].replicas[0]
        need = rep.kv.blocks_for(tokens)
        if need > rep.kv.total:
            raise ValueError(f"{state.fleet.source}: decode pool {pool.name!r} holds {rep.kv.total} KV blocks of "
                             f"{rep.kv.block_size} tokens, the workload's longest request ({prompt} prompt + "
                             f"{output} output tokens) needs {need}: give the decode pool more KV (a larger GPU or "
                             f"TP, --decode-pool gpu_memory_utilization=..., kv_cache_dtype=fp8) or cap the lengths")


def workload_longest(source) -> tuple[int, int] | None:
    """The (prompt, output) of ``source``'s request with the most KV tokens, where the source knows its lengths
    before the run (open loops of a fixed list, closed loops); None otherwise."""
    try:
        lengths = getattr(source, "lengths", None)  # an open loop's (drawn anew: a property or a method)
        if callable(lengths):
            lengths = lengths()
        if isinstance(lengths, tuple):
            prompts, outputs = lengths
        elif hasattr(source, "prompts") and hasattr(source, "outputs"):
            prompts, outputs = source.prompts(), source.outputs()
        else:
            return None
    except (TypeError, ValueError, AttributeError):
        return None
    if not len(prompts):
        return None
    total = [int(p) + int(o) for p, o in zip(prompts, outputs)]
    i = max(range(len(total)), key=total.__getitem__)
    return int(prompts[i]), int(outputs[i])

"""The rules of a run config beyond one field's declaration: which fields go together, ranges over two fields,
scheduler parameters (``KEY=VALUE`` text and their check against the scheduler's defaults).

Config files (TOML/YAML), the command line and the Python API all pass through ``check_combination``, so a wrong
combination gets the same error wherever it comes from, naming the fields as the user wrote them. Each field's
own type and range are declared with it (``run_config.RunConfig``).
"""
from __future__ import annotations

import math

from .bounds import MAX_REQUESTS, MAX_SECONDS, MIN_RATE
from .engine.limits import vllm_refusal
from .hardware.batch_defaults import GpuDefault
from .run_field import API, shown
from .workload.tenants.streams import EXAMPLE as TENANTS_EXAMPLE, check_trace_streams, parse_tenants, total_rate
from .workload.tenants.tiers import parse_tiers

DEFAULT_MIN_REPLICAS, DEFAULT_MAX_REPLICAS = 1, 16  # an autoscaler's bounds unless given


# (field, other field, why they do not go together and what to do instead)
CONFLICTS = (
    ("time_scale", "concurrency", "a closed loop sends a trace's requests as others finish, not at its "
                                  "timestamps; drop --time-scale or --concurrency"),
    ("trace", "arrival", "a trace has its own arrival times; --arrival applies to --workload or --lengths"),
    ("trace", "cv", "a trace has its own arrival times; --cv applies to gamma arrivals of --workload/--lengths"),
    ("trace", "workload", "a trace carries its own lengths; drop --workload (or drop --trace)"),
    ("trace", "lengths", "a trace carries its own lengths; drop --lengths (or drop --trace)"),
    ("workload", "lengths", "--lengths FILE.csv replaces the named length preset; give one of them"),
    ("concurrency", "rate", "a closed loop sends a new request when one finishes, so it has no arrival rate; drop "
                            "--rate or --concurrency"),
    ("concurrency", "duration", "a closed loop runs --num-requests requests; drop --duration"),
    ("concurrency", "rate_schedule", "a closed loop has no arrival rate; drop --rate-schedule or --concurrency"),
    ("concurrency", "arrival", "a closed loop has no arrival process; drop --arrival or --concurrency"),
    ("concurrency", "cv", "a closed loop has no arrival process; drop --cv or --concurrency"),
    ("rate_schedule", "rate", "the schedule gives the rate of each period; drop --rate"),
    ("time_scale", "rate", "both set a trace's pace: --rate rescales it to a mean rate, --time-scale multiplies its "
                           "timestamps; give one"),
    ("time_scale", "rate_schedule", "the schedule sets the trace's pace; drop --time-scale"),
    ("num_requests", "duration", "give the number of requests or the duration of arrivals, not both"),
    ("tenants", "rate", "each tenant has its own rate (--tenants NAME:rate=R,...); drop --rate"),
    ("tenants", "concurrency", "each tenant is an open-loop arrival stream; drop --concurrency or --tenants"),
)

# what the rest of a run is, for defaults that would not apply to it
ARRIVAL_KEYS = ("rate", "duration", "arrival", "cv", "rate_schedule")
# prefill/decode disaggregation's fields (disagg_config.py checks them together with the rest)
DISAGG_KEYS = ("disaggregate", "prefill_gpu", "prefill_tp", "decode_gpu", "decode_tp", "prefill_pool", "decode_pool",
               "kv_link", "kv_connector", "pd_first_token", "pd_decider", "pd_decider_params")


def given(data: dict, key: str) -> bool:
    value = data.get(key)
    return value is not None and value != ""


def conflicts_with(key: str, data: dict) -> str | None:
    """The given field that ``key`` would conflict with in ``data``, if any."""
    for a, b, _ in CONFLICTS:
        if key == a and given(data, b):
            return b
        if key == b and given(data, a):
            return a
    return None


def check_stage_counts(data: dict, origin_of) -> None:
    """``--arrival inference-perf`` sends each stage's fixed count (workload/arrivals/stage_counts.py): it needs
    a stages schedule (text or an inference-perf file) without bursts, and one open loop of generated requests."""
    name = origin_of("arrival").name("arrival")
    schedule = getattr(data.get("rate_schedule"), "value", None)
    if schedule is None or not (schedule.base == "stages" or schedule.base.startswith("inference-perf")):
        raise ValueError(f"{name} inference-perf sends int(rate x duration) requests a stage: give --rate-schedule "
                         f"'stages:RATE@SECONDS,...' or an inference-perf config file, or another --arrival")
    if schedule.bursts:
        raise ValueError(f"{name} inference-perf: inference-perf's stages have no bursts; drop the burst: terms "
                         f"or use --arrival poisson")
    if given(data, "tenants"):
        raise ValueError(f"{name} inference-perf: one load generator sends the stages, not a stream per tenant; "
                         f"drop --tenants or use --arrival poisson")
    from .workload.arrivals.stage_counts import StageCounts
    try:
        StageCounts(schedule.shape, schedule.load_type)
    except ValueError as e:
        raise ValueError(f"{name} inference-perf with {origin_of('rate_schedule').name('rate_schedule')} "
                         f"{data['rate_schedule']}: {e}") from None


def check_combination(data: dict, origin_of=lambda key: API) -> None:
    """Fields that must not be given together, and ranges that involve two fields."""
    for a, b, why in CONFLICTS:
        if given(data, a) and given(data, b):
            if (a, b) == ("concurrency", "arrival") and data[b] == "poisson":
                continue
            if a == "trace" and b == "arrival" and data[b] == "poisson":
                continue
            if (a, b) == ("tenants", "rate") and given(data, "trace"):
                continue  # --rate rescales a trace whose rows name their tenants
            raise ValueError(f"{origin_of(b).name(b)} does not apply together with {origin_of(a).name(a)}: {why}")
    if given(data, "gpu_spec") and given(data, "gpu") and data["gpu"] != data["gpu_spec"]:
        raise ValueError(f"{origin_of('gpu').name('gpu')} does not apply together with "
                         f"{origin_of('gpu_spec').name('gpu_spec')}: the spec file is the GPU; drop one of them")
    arrival = data.get("arrival") or "poisson"
    if given(data, "cv") and arrival != "gamma":
        raise ValueError(f"{origin_of('cv').name('cv')} applies only to gamma arrivals (--arrival gamma), not "
                         f"{arrival!r}")
    if arrival == "gamma" and given(data, "arrival") and not given(data, "cv"):
        raise ValueError(f"{origin_of('arrival').name('arrival')} gamma needs --cv, the coefficient of variation of "
                         f"the gaps (1 = Poisson, > 1 burstier)")
    if arrival == "inference-perf":
        check_stage_counts(data, origin_of)
    if given(data, "bench_command") and not given(data, "trace"):
        raise ValueError(f"{origin_of('bench_command').name('bench_command')} applies to a replayed vllm bench serve "
                         f"result (--trace FILE); drop it, or give the result")
    if given(data, "time_scale") and not given(data, "trace"):
        raise ValueError(f"{origin_of('time_scale').name('time_scale')} applies to a replayed trace (--trace); for "
                         f"generated arrivals give --rate or --rate-schedule")
    for key, neutral in (("turns", 1), ("think_time", 0.0)):  # a session's one turn, no think time: no closed loop
        if given(data, key) and data[key] != neutral and not given(data, "concurrency"):
            raise ValueError(f"{origin_of(key).name(key)} applies to a closed loop: give --concurrency (the users) "
                             f"and --num-requests, or drop it")
    if data.get("workload_params") and data.get("workload") != "shared-prefix":
        raise ValueError(f"{origin_of('workload_params').name('workload_params')} applies to --workload "
                         f"shared-prefix (the only workload with parameters); drop it or use that workload")
    turns, users, n = data.get("turns"), data.get("concurrency"), data.get("num_requests")
    if all(isinstance(x, int) for x in (turns, users, n)) and n + users * (turns - 1) > MAX_REQUESTS:
        raise ValueError(f"{origin_of('turns').name('turns')} {turns} with "
                         f"{origin_of('concurrency').name('concurrency')} {users}: the sessions draw {n + users * (turns - 1):,} requests' lengths, more than "
                         f"{MAX_REQUESTS:,}; fewer turns (a session of more turns than --num-requests never ends)")
    if given(data, "concurrency") and not given(data, "num_requests"):
        raise ValueError(f"{origin_of('concurrency').name('concurrency')} (a closed loop) needs --num-requests, how "
                         f"many requests it sends in all")
    if given(data, "tenants") and isinstance(data["tenants"], str):
        check_tenant_combination(data, origin_of)
    if given(data, "fleet"):
        check_fleet_combination(data, origin_of)
    check_autoscaler_combination(data, origin_of)
    if data.get("kv_offload_mode") not in (None, "", "vllm") and not given(data, "kv_offload"):  # not the default
        raise ValueError(f"{origin_of('kv_offload_mode').name('kv_offload_mode')} chooses the connector of KV "
                         f"offload tiers: give them with --kv-offload (e.g. cpu:200GiB), or drop it")
    if given(data, "kv_offload") and data.get("prefix_caching") is False:
        raise ValueError(f"{origin_of('kv_offload').name('kv_offload')}: offload tiers keep cached prefixes below "
                         f"the GPU's prefix cache; drop --no-prefix-caching or the tiers")
    if any(given(data, key) for key in DISAGG_KEYS):
        from .disagg_config import check_disagg_combination  # here: a plain run loads none of the fleet layer
        check_disagg_combination(data, origin_of)
    dp, replicas = data.get("dp"), data.get("replicas")
    if isinstance(dp, int) and dp > 1 and isinstance(replicas, int) and replicas > 1:
        raise ValueError(f"{origin_of('dp').name('dp')} {dp} with {origin_of('replicas').name('replicas')} "
                         f"{replicas}: a DP group is one server of {dp} ranks; give --dp or --replicas, not both")
    rate, rate_key = data.get("rate"), "rate"
    if given(data, "tenants") and isinstance(data["tenants"], str) and not given(data, "trace"):
        rate, rate_key = total_rate(parse_tenants(data["tenants"])), "tenants"  # the tenants' rates added up
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
        n, duration = data.get("num_requests"), data.get("duration")
        what = f"{origin_of(rate_key).name(rate_key)} {rate:g}" + (" requests/s in all" if rate_key == "tenants"
                                                                    else "")
        if isinstance(n, int) and n > 1 and (n - 1) / rate > MAX_SECONDS:
            raise ValueError(f"{what} with {n} requests: arrivals would span {(n - 1) / rate:.3g} s (more than "
                             f"{MAX_SECONDS:g} s); raise the rate")
        if isinstance(duration, (int, float)) and duration * rate > MAX_REQUESTS:
            raise ValueError(f"{origin_of('duration').name('duration')} {duration:g} at {what} means about "
                             f"{duration * rate:.3g} requests (more than {MAX_REQUESTS:,}); shorten the duration")
    schedule = getattr(data.get("rate_schedule"), "value", None)  # a RateSchedule, parsed by the field's check
    if schedule is not None:
        shape, name = schedule.shape, origin_of("rate_schedule").name("rate_schedule")
        n, duration = data.get("num_requests"), data.get("duration")
        low = [r for r in shape.levels if 0 < r < MIN_RATE] if shape.is_steps else []
        if low:  # bounds.py: as --rate (a rate of 1e-300 would report TTFT = 0)
            raise ValueError(f"{name} {data['rate_schedule']}: rate {low[0]:g} must be 0 or at least {MIN_RATE:g} "
                             f"requests/s (a mean gap of at most 11.6 days)")
        if isinstance(n, int) and n < shape.total:
            span = float(shape.inverse([float(n)])[0])
            if span > MAX_SECONDS:
                raise ValueError(f"{name} {data['rate_schedule']} with {n} requests: arrivals would span "
                                 f"{span:.3g} s (more than {MAX_SECONDS:g} s); raise the rates")
        if isinstance(duration, (int, float)) and float(shape.cumulative(duration)) > MAX_REQUESTS:
            raise ValueError(f"{origin_of('duration').name('duration')} {duration:g} at {name} "
                             f"{data['rate_schedule']} means about {float(shape.cumulative(duration)):.3g} requests "
                             f"(more than {MAX_REQUESTS:,}); shorten the duration")


def refuse_as_vllm(cfg, policy, max_model_len: int) -> None:
    """A run of vLLM's own scheduler (``models_vllm``) with limits vLLM refuses at start-up: refused with vLLM's
    reason. Without chunked prefill vLLM also refuses a step budget below the context length, but raises its own
    default budget to the context length: so the rule applies to a budget given here, and the default one keeps
    rejecting longer prompts at arrival, with that reason."""
    if not policy.models_vllm:
        return
    given = not isinstance(cfg.max_num_batched_tokens, GpuDefault)
    reason = vllm_refusal(cfg.max_num_batched_tokens, cfg.max_num_seqs, max_model_len if given else None,
                          policy.chunks_prompts)
    if reason:
        raise ValueError(f"scheduler {policy.name!r} is vLLM's, and vLLM refuses these limits at start-up: {reason}")


def check_fleet_combination(data: dict, origin_of) -> None:
    """A fleet file gives its pools' sizes; vLLM's data parallelism is a plain run's (a DP group of a dense model is
    a pool of replicas behind vllm-dp-latest in a fleet; a MoE model's DP ranks step in lockstep, which a fleet's
    pools do not)."""
    for key, neutral, why in (("replicas", 1, "the fleet file gives each pool's replicas ([pools.NAME] replicas = "
                                              "N)"),
                              ("dp", 1, "a pool's replicas are its engines; for vLLM's DP balancer write a pool of "
                                        "replicas with router = \"vllm-dp-latest\", or run the DP group without "
                                        "--fleet"),
                              ("expert_parallel", False, "a MoE model's DP ranks step in lockstep, which a fleet's "
                                                         "pools do not; run it without --fleet")):
        if given(data, key) and data[key] != neutral:
            raise ValueError(f"{origin_of(key).name(key)} does not apply together with "
                             f"{origin_of('fleet').name('fleet')}: {why}")


def check_autoscaler_combination(data: dict, origin_of) -> None:
    """An autoscaler's bounds in order, and its options only with one."""
    low, high = data.get("min_replicas", DEFAULT_MIN_REPLICAS), data.get("max_replicas", DEFAULT_MAX_REPLICAS)
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise ValueError(f"{origin_of('min_replicas').name('min_replicas')} {low} is above "
                         f"{origin_of('max_replicas').name('max_replicas')} {high}: give min <= max")
    if not given(data, "autoscaler"):
        for key in ("min_replicas", "max_replicas", "autoscaler_params"):
            if key in data and data[key] not in (None, {}, DEFAULT_MIN_REPLICAS if key == "min_replicas" else
                                                 DEFAULT_MAX_REPLICAS):
                raise ValueError(f"{origin_of(key).name(key)} applies to an autoscaled run: give --autoscaler NAME "
                                 f"(docs/autoscaling.md), or drop it")
    elif given(data, "dp") and data["dp"] != 1:
        raise ValueError(f"{origin_of('dp').name('dp')} does not apply together with "
                         f"{origin_of('autoscaler').name('autoscaler')}: a DP group is one server; autoscale a pool "
                         f"of replicas (--replicas, or a fleet file)")


def check_tenant_combination(data: dict, origin_of) -> None:
    """Tenants with a trace take weight and priority only; without one each needs its rate; a priority is given by
    the tenants or by the tiers, not both."""
    streams = parse_tenants(data["tenants"])
    where = origin_of("tenants").at("tenants", data["tenants"])
    if given(data, "trace"):
        check_trace_streams(streams, where)
    else:
        for s in streams:
            if s.rate is None:
                raise ValueError(f"{where}: tenant {s.name!r} needs rate=R (requests/s): each tenant is its own "
                                 f"arrival stream, e.g. {TENANTS_EXAMPLE}")
    tiers = data.get("tiers")
    if isinstance(tiers, str) and tiers.strip() and any(s.tenant.priority is not None for s in streams):
        if any(t.priority is not None for t in parse_tiers(tiers)):
            raise ValueError(f"{where}: both the tenants and the tiers ({origin_of('tiers').name('tiers')}) give "
                             f"priorities; give priority= in one of them")


def check_params(owner: str, params: dict, defaults: dict, where: str) -> dict:
    """Scheduler (or model) parameters: known public names, each value of its default's type."""
    if not isinstance(params, dict):
        raise ValueError(f"{where}: parameters must be a table of KEY = VALUE, got {shown(params)}")
    public = sorted(k for k in defaults if not k.startswith("_"))
    out = {}
    for key, value in params.items():
        if not isinstance(key, str) or key.startswith("_") or key not in defaults:
            raise ValueError(f"{where}: {owner} has no parameter {key!r}; its parameters are: "
                             f"{', '.join(public) or '(none)'}")
        default = defaults[key]
        kind = _param_kind(default)
        if kind == "str" and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)  # --param thresholds=5 parses as a number
        ok = (kind is None or value is None and default is None
              or kind == "bool" and isinstance(value, bool)
              or kind == "int" and isinstance(value, int) and not isinstance(value, bool)
              or kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value)
              or kind == "str" and isinstance(value, str))
        if not ok:
            raise ValueError(f"{where}: {owner} parameter {key} = {shown(value)} must be {_KIND_TEXT[kind]} "
                             f"(default {shown(default)})")
        out[key] = value
    return out


_KIND_TEXT = {"bool": "true or false", "int": "an integer", "float": "a finite number", "str": "a string"}


def _param_kind(default) -> str | None:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, str):
        return "str"
    return None  # None or a structured default: the scheduler checks it


def parse_params(items: list[str], option: str = "--param") -> dict:
    """``KEY=VALUE`` texts as a table, each value as the type it reads as (see ``parse_value``)."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{option} {item!r}: expected KEY=VALUE")
        key, value = item.split("=", 1)
        key = key.strip().replace("-", "_")
        if not key:
            raise ValueError(f"{option} {item!r}: the KEY before '=' is empty; expected KEY=VALUE")
        out[key] = parse_value(value.strip())
    return out


def parse_value(v: str):
    low = v.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v

"""What the operator configures for the vLLM plug-in: the policy by name, its parameters, the SLO tiers.

Read from environment variables, or from a TOML/YAML file named by ``LLMSCHED_CONFIG`` (the variables win):

==========================  ============================================  =====================================
variable                    file key                                      example
==========================  ============================================  =====================================
``LLMSCHED_SCHEDULER``      ``scheduler``                                 ``sarathi``
``LLMSCHED_PARAMS``         (same as ``--param``, space-separated)        ``token_budget=256 capacity=token``
``LLMSCHED_SCHEDULER_PARAMS``  ``scheduler_params`` (a table)             ``{"token_budget": 256}`` (JSON)
``LLMSCHED_TIERS``          ``tiers``                                     ``paid:tbt=0.1:share=0.05,free:tbt=0.5``
``LLMSCHED_DEFAULT_TIER``   ``default_tier``                              ``free`` (default: the last tier)
``LLMSCHED_TENANTS``        ``tenants``                                   ``a:weight=2,b:priority=0`` (weights and
                                                                          priorities of the tenants requests
                                                                          may name)
``LLMSCHED_ORACLE``         ``oracle``                                    ``1``: policies may read max_tokens
``LLMSCHED_PROFILE``        ``profile``                                   a profile name or JSON file (the view's
                                                                          batch-time model, for predicting policies)
``LLMSCHED_RECORD_DIR``     ``record_dir``                                write requests/steps records there
``LLMSCHED_ARRIVAL``        ``arrival``                                   ``receipt`` (default): a request's
                                                                          clock starts when the scheduler gets
                                                                          it; ``stamp``: at vLLM's arrival stamp
==========================  ============================================  =====================================

``LLMSCHED_PARAMS`` and ``LLMSCHED_SCHEDULER_PARAMS`` merge (``LLMSCHED_PARAMS`` wins); the policy is built at
start-up, so an unknown parameter or a bad value stops the server before it serves, with a line naming it.
Every name resolves through llmsched's registries; the files are read as data only. Nothing a client sends can
select a policy or load code: a request only picks one of these tiers (see ``tier_of``) and tenants (``tenant_of``: in
``extra_args["tenant"]``); an unknown tier or tenant is rejected with the valid names. A request's priority class is
vLLM's own ``priority`` field when it is not 0, else its tenant's, else its tier's.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..request import DEFAULT_TIER, Tenant, Tier
from ..workload.tenants.streams import check_tenants
from ..workload.tenants.tiers import parse_tiers

TIER_KEY = "tier"  # SamplingParams.extra_args key (OpenAI API: extra_body={"vllm_xargs": {"tier": "paid"}})
TENANT_KEY = "tenant"  # SamplingParams.extra_args key (extra_body={"vllm_xargs": {"tenant": "acme"}})
PLUGIN_VARIABLES = ("LLMSCHED_CONFIG", "LLMSCHED_SCHEDULER", "LLMSCHED_PARAMS", "LLMSCHED_SCHEDULER_PARAMS",
                    "LLMSCHED_TIERS", "LLMSCHED_DEFAULT_TIER", "LLMSCHED_TENANTS", "LLMSCHED_ORACLE", "LLMSCHED_PROFILE",
                    "LLMSCHED_RECORD_DIR", "LLMSCHED_ARRIVAL")
# llmsched's other variables (data and cache folders, the compiled build's switches, test switches): not the
# plug-in's, but not typos either
OTHER_VARIABLES = ("LLMSCHED_DATA", "LLMSCHED_CACHE", "LLMSCHED_PROFILES", "LLMSCHED_PURE", "LLMSCHED_NO_COMPILE",
                   "LLMSCHED_FUZZ_COUNT", "LLMSCHED_FUZZ_SEED", "LLMSCHED_FUZZ_FIRST", "LLMSCHED_FUZZ_WORKERS",
                   "LLMSCHED_REQUIRE_VLLM", "LLMSCHED_REQUIRE_RAY", "LLMSCHED_REQUIRE_COMPILED",
                   "LLMSCHED_VLLM_ALL_SCHEDULERS", "LLMSCHED_CHECK_FIGURES", "LLMSCHED_BATCH_TIME_PROFILES",
                   "LLMSCHED_FAIR_COUNT", "LLMSCHED_TIER_SEEDS")
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass
class Settings:
    scheduler: str = "vllm-chunked"
    scheduler_params: dict = field(default_factory=dict)
    tiers: tuple[Tier, ...] = (DEFAULT_TIER,)
    default_tier: Tier = DEFAULT_TIER
    tenants: tuple[Tenant, ...] = ()  # none: requests carry no tenant
    oracle: bool = False
    profile: str | None = None
    record_dir: str | None = None
    arrival: str = "receipt"

    def describe(self) -> dict:
        return {"scheduler": self.scheduler, "scheduler_params": self.scheduler_params,
                "tiers": [t.name for t in self.tiers], "default_tier": self.default_tier.name,
                "tenants": {t.name: {"weight": t.weight, "priority": t.priority} for t in self.tenants},
                "oracle": self.oracle, "profile": self.profile, "arrival": self.arrival}


def load_settings(env=None, **overrides) -> Settings:
    """Settings from ``env`` (default ``os.environ``), its ``LLMSCHED_CONFIG`` file, then ``overrides``."""
    env = os.environ if env is None else env
    check_variable_names(env)
    data: dict = {}
    if env.get("LLMSCHED_CONFIG"):
        from ..run_config import load_config
        data.update(load_config(env["LLMSCHED_CONFIG"]))
    for key in ("scheduler", "tiers", "default_tier", "tenants", "profile", "record_dir", "arrival"):
        if env.get("LLMSCHED_" + key.upper()):
            data[key] = env["LLMSCHED_" + key.upper()]
    if env.get("LLMSCHED_SCHEDULER_PARAMS"):
        try:
            data["scheduler_params"] = json.loads(env["LLMSCHED_SCHEDULER_PARAMS"])
        except json.JSONDecodeError as e:
            raise ValueError(f"LLMSCHED_SCHEDULER_PARAMS is not JSON ({e}); write e.g. "
                             f"'{{\"token_budget\": 256}}'") from None
    if env.get("LLMSCHED_PARAMS"):
        from ..config_fields import parse_params
        try:
            given = parse_params(env["LLMSCHED_PARAMS"].split())
        except ValueError as e:
            raise ValueError(f"LLMSCHED_PARAMS: {e} (write e.g. 'token_budget=256 capacity=token')") from None
        data["scheduler_params"] = {**data.get("scheduler_params", {}), **given}
    if env.get("LLMSCHED_ORACLE"):
        data["oracle"] = parse_switch("LLMSCHED_ORACLE", env["LLMSCHED_ORACLE"])
    data.update({k: v for k, v in overrides.items() if v is not None})
    known = {"scheduler", "scheduler_params", "tiers", "default_tier", "tenants", "oracle", "profile", "record_dir",
             "arrival"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"llmsched vLLM settings: unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
    arrival = data.get("arrival", "receipt")
    if arrival not in ("receipt", "stamp"):
        raise ValueError(f"LLMSCHED_ARRIVAL {arrival!r}: use 'receipt' (when the scheduler gets the request) or "
                         f"'stamp' (vLLM's arrival stamp)")
    params = data.get("scheduler_params") or {}
    if not isinstance(params, dict):
        raise ValueError(f"scheduler_params must be a mapping of parameter names to values, got {params!r}")
    if not isinstance(data.get("oracle", False), bool):
        raise ValueError(f"oracle = {data['oracle']!r} in {env.get('LLMSCHED_CONFIG')}: write true or false")
    scheduler = data.get("scheduler", "vllm-chunked")
    if not isinstance(scheduler, str):
        raise ValueError(f"scheduler = {scheduler!r}: give a scheduler name (see `llmsched presets`)")
    params = check_scheduler_params(scheduler, params)
    tiers = data.get("tiers")
    tiers = parse_tiers(tiers) if isinstance(tiers, str) else tuple(tiers or (DEFAULT_TIER,))
    by_name = {t.name: t for t in tiers}
    default = data.get("default_tier") or tiers[-1].name
    if isinstance(default, Tier):
        default = default.name
    if default not in by_name:
        raise ValueError(f"default tier {default!r} is not among the configured tiers {', '.join(by_name)}")
    return Settings(scheduler=scheduler, scheduler_params=params, tiers=tiers,
                    default_tier=by_name[default], tenants=plugin_tenants(data.get("tenants"), tiers),
                    oracle=data.get("oracle", False),
                    profile=data.get("profile"), record_dir=data.get("record_dir"), arrival=arrival)


def tier_of(extra_args: dict | None, settings: Settings) -> tuple[Tier, bool]:
    """The tier a request asks for in ``extra_args["tier"]``, and whether it was known (else the default)."""
    name = extra_args.get(TIER_KEY) if extra_args else None
    if name is None:
        return settings.default_tier, True
    for t in settings.tiers:
        if t.name == name:
            return t, True
    return settings.default_tier, False


def plugin_tenants(spec, tiers) -> tuple[Tenant, ...]:
    """The tenants requests may name: a spec of names with weights and priorities (a rate or workload is the
    simulator's and has no meaning here), or Tenant objects."""
    if not spec:
        return ()
    streams = check_tenants(spec)
    for s in streams:
        for key in ("rate", "workload"):
            if getattr(s, key) is not None:
                raise ValueError(f"LLMSCHED_TENANTS: tenant {s.name!r}: {key}= has no meaning in a server (requests "
                                 f"arrive as clients send them); give weight= and priority= only")
    if any(s.tenant.priority is not None for s in streams) and any(t.priority is not None for t in tiers):
        raise ValueError("LLMSCHED_TENANTS and LLMSCHED_TIERS both give priorities; give priority= in one of them")
    return tuple(s.tenant for s in streams)


def tenant_of(extra_args: dict | None, settings: Settings) -> tuple[Tenant | None, str | None]:
    """The tenant a request names in ``extra_args["tenant"]`` (None when it names none), and why it is refused
    (an unknown name), else None."""
    name = extra_args.get(TENANT_KEY) if extra_args else None
    if name is None:
        if settings.tenants:
            return None, (f"no tenant named; this server's tenants are {', '.join(t.name for t in settings.tenants)} "
                          f"(extra_body={{\"vllm_xargs\": {{\"{TENANT_KEY}\": NAME}}}})")
        return None, None
    for t in settings.tenants:
        if t.name == name:
            return t, None
    valid = ", ".join(t.name for t in settings.tenants) or "none (set LLMSCHED_TENANTS)"
    return None, f"unknown tenant {name!r}; valid tenants: {valid}"


def check_variable_names(env) -> None:
    """An ``LLMSCHED_*`` variable the plug-in does not know is most likely a typo: refuse it rather than ignore it."""
    import difflib
    for name in env:
        if name.startswith("LLMSCHED_") and name not in PLUGIN_VARIABLES + OTHER_VARIABLES:
            near = difflib.get_close_matches(name, PLUGIN_VARIABLES, n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            raise ValueError(f"environment variable {name}: llmsched does not know it; {hint}the plug-in reads "
                             f"{', '.join(PLUGIN_VARIABLES)}")


def parse_switch(name: str, text: str) -> bool:
    low = text.strip().lower()
    if low in TRUE_WORDS + FALSE_WORDS:
        return low in TRUE_WORDS
    raise ValueError(f"{name}={text!r}: write 1/true/yes/on or 0/false/no/off")


def check_scheduler_params(scheduler: str, params: dict) -> dict:
    """The policy's parameters checked by name and by type against its defaults, as run configs are."""
    from ..config_fields import check_params
    from ..schedulers.registry import scheduler_info
    return check_params(f"scheduler {scheduler!r}", params, scheduler_info(scheduler)["params"],
                        "LLMSCHED_PARAMS / LLMSCHED_SCHEDULER_PARAMS")

"""Deciders of a disaggregated fleet: for each request, prefill it remotely (the prefill pool, then its KV to the
decode pool) or serve it whole on the decode pool, prefill included. Each is a ``PathChooser``; one that reads
the decode pool's caches is told the fleet when the run begins (``begin``).

* ``always``: every request disaggregated (vLLM's disaggregation proxy).
* ``llm-d``: llm-d's prefix-based P/D decider (llm-d/llm-d-inference-scheduler,
  ``pkg/epp/framework/plugins/scheduling/profilehandler/disagg/prefix_based_pd_decider.go``, ``disaggregate``):
  disaggregate when the prompt is at least ``non_cached_tokens`` long and its part not in the decode endpoint's
  prefix cache is at least ``non_cached_tokens``; 0 never disaggregates, as there. Its default here, 16, is the
  one ``deploy/config/pd-epp-config.yaml`` ships (the code's default, 0, turns P/D off).
* ``dynamo``: NVIDIA Dynamo's conditional disaggregation, its v1 ``IslBoundingPolicy`` (ai-dynamo/dynamo,
  ``lib/kv-router/src/conditional_disagg.rs``; docs "Conditional Disaggregation"): serve locally (bypass remote
  prefill) when the effective input ``eff_isl = prompt − the decode worker's cached prefix`` is below
  ``eff_isl_threshold`` and ``eff_isl / prompt`` below ``eff_isl_ratio_threshold`` (defaults 2048 and 0.7, the
  code's ``DEFAULT_CONDITIONAL_DISAGG_*``); its load-aware variants (``prefill_load``, ``isl_or_load``) are not
  modelled.

Both read "the decode endpoint's" cached prefix as the longest any serving decode replica holds (the replica a
cache-aware decode router picks: llm-d's decode profile scores prefix-cache hits, Dynamo's picks its cache-hot
worker); a decode pool without a prefix cache holds none.
"""
from __future__ import annotations

from ..request import Request
from .disagg import LOCAL, KVHandoff, pd_path
from .pool import DECODE


class Always:
    name = "always"
    params: dict = {}

    def __init__(self, handoff: KVHandoff):
        self.pd = pd_path(handoff)
        self.paths = (self.pd, LOCAL)

    def __call__(self, req: Request):
        return self.pd

    def __repr__(self) -> str:
        return "decider always"


class CacheReading(Always):
    """A decider that reads the decode pool's prefix caches."""

    def __init__(self, handoff: KVHandoff):
        super().__init__(handoff)
        self.decode = None  # the decode role's serving replicas (fleet/members.py), from ``begin``

    def begin(self, fleet_state) -> None:
        self.decode = fleet_state.members[DECODE]

    def decode_cached(self, req: Request) -> int:
        """Leading prompt tokens the serving decode replica caching the most of ``req`` holds."""
        if req.content is None or self.decode is None:
            return 0
        return max((rep.kv.cached_tokens(req) for rep in self.decode.replicas if rep.caching), default=0)


class LlmdPrefixThreshold(CacheReading):
    name = "llm-d"
    params = {"non_cached_tokens": 16}

    def __init__(self, handoff: KVHandoff, non_cached_tokens: int = 16):
        super().__init__(handoff)
        self.non_cached_tokens = non_cached_tokens

    def __call__(self, req: Request):
        k = self.non_cached_tokens
        if k == 0 or req.prompt_len < k or req.prompt_len - self.decode_cached(req) < k:
            return LOCAL
        return self.pd

    def __repr__(self) -> str:
        return f"decider llm-d(non_cached_tokens={self.non_cached_tokens})"


class DynamoConditional(CacheReading):
    name = "dynamo"
    params = {"eff_isl_threshold": 2048, "eff_isl_ratio_threshold": 0.7}

    def __init__(self, handoff: KVHandoff, eff_isl_threshold: int = 2048, eff_isl_ratio_threshold: float = 0.7):
        super().__init__(handoff)
        self.eff_isl_threshold = eff_isl_threshold
        self.eff_isl_ratio_threshold = eff_isl_ratio_threshold

    def __call__(self, req: Request):
        eff = max(req.prompt_len - self.decode_cached(req), 0)
        if eff < self.eff_isl_threshold and eff / max(req.prompt_len, 1) < self.eff_isl_ratio_threshold:
            return LOCAL
        return self.pd

    def __repr__(self) -> str:
        return (f"decider dynamo(eff_isl_threshold={self.eff_isl_threshold}, "
                f"eff_isl_ratio_threshold={self.eff_isl_ratio_threshold})")


DECIDERS = {cls.name: cls for cls in (Always, LlmdPrefixThreshold, DynamoConditional)}


def check_decider(name: str, params: dict, where: str = "pd_decider") -> dict:
    """``params`` for decider ``name``, each checked (a one-line ValueError names the decider, the key and the
    fix)."""
    if name not in DECIDERS:
        raise ValueError(f"{where}: unknown decider {name!r}; deciders: {', '.join(DECIDERS)}")
    known = DECIDERS[name].params
    out = {}
    for key, value in params.items():
        if key not in known:
            raise ValueError(f"{where}: decider {name!r} has no parameter {key!r}"
                             + (f"; its parameters: {', '.join(known)}" if known else "; it takes none"))
        default = known[key]
        if isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            must = "an integer >= 0 (tokens)"
        else:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf")
            must = "a number >= 0"
        if not ok:
            raise ValueError(f"{where}: decider {name!r} {key}={value!r}: must be {must}")
        out[key] = type(default)(value)
    return out


def make_decider(name: str, params: dict, handoff: KVHandoff):
    return DECIDERS[name](handoff, **params)

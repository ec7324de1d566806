"""The autoscalers, by name: an explicit table of the module that defines each (its ``POLICY`` class), imported only
when a run asks for it. ``--autoscaler NAME`` takes these names; tests/test_autoscalers.py checks the table against
the modules."""
from __future__ import annotations

import importlib

AUTOSCALER_MODULES = {
    "hpa": "llmsched.fleet.hpa",
    "kpa": "llmsched.fleet.kpa",
    "dynamo-sla": "llmsched.fleet.dynamo_sla",
    "saturation": "llmsched.fleet.saturation",
    "predictive": "llmsched.fleet.predictive",
}
AUTOSCALER_NAMES = tuple(AUTOSCALER_MODULES)


def autoscaler_class(name: str):
    if name not in AUTOSCALER_MODULES:
        raise ValueError(f"unknown autoscaler {name!r}; valid: {', '.join(AUTOSCALER_NAMES)}")
    return importlib.import_module(AUTOSCALER_MODULES[name]).POLICY


def make_autoscaler(name: str, pool: str, min_replicas: int, max_replicas: int, params: dict | None = None,
                    context=None):
    """Autoscaler ``name`` of ``pool`` within [min_replicas, max_replicas], with ``params`` over its defaults."""
    return autoscaler_class(name)(pool, min_replicas, max_replicas, params, context)

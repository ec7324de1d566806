"""Routers by name: the only way configs, the CLI and the fleet's pools reach a router (no import paths).

A router module registers its classes when it is imported (``@register_router``); ``BUILTIN_MODULES`` names the
modules that hold the built-in ones, imported on the first lookup, in the order ``router_classes`` lists them. A new
built-in router module is added to that table; nothing scans a folder.
"""
from __future__ import annotations

import importlib
from typing import Callable

from .base import Router, router_defaults

BUILTIN_MODULES = (
    "llmsched.routing.simple",           # random, round-robin
    "llmsched.routing.least_loaded",     # least-outstanding, least-load
    "llmsched.routing.prefix_affinity",  # prefix-affinity (cache-aware)
    "llmsched.routing.prefix_hash",      # prefix-hash (consistent hashing with bounded loads)
    "llmsched.routing.pab",              # Lyu et al.'s PAB-LB and its variants
    "llmsched.routing.vllm_dp",          # vLLM's data-parallel balancers
)

ROUTERS: dict[str, Callable[[], Router]] = {}
_loaded = False


def register_router(cls: type[Router]) -> type[Router]:
    if cls.name in ROUTERS:
        raise ValueError(f"router name {cls.name!r} registered twice")
    ROUTERS[cls.name] = cls
    return cls


def router_classes() -> dict[str, Callable[[], Router]]:
    """Every registered router by name: the built-in ones in ``BUILTIN_MODULES``' order, then any registered later."""
    _load_builtin()
    return ROUTERS


def make_router(name: str, params: dict | None = None) -> Router:
    """Router ``name`` with ``params`` (its constructor's keyword parameters, checked by ``router_params``)."""
    routers = router_classes()
    if name not in routers:
        raise ValueError(f"unknown router {name!r}; known routers: {', '.join(sorted(routers))}")
    return routers[name](**(params or {}))


def router_params(name: str) -> dict:
    """Router ``name``'s parameters and their defaults (empty for an unknown name: the name's own check says so)."""
    cls = router_classes().get(name)
    return router_defaults(cls) if cls is not None else {}


def _load_builtin():
    global _loaded
    if not _loaded:
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
        # a module imported before the first lookup registered its routers first: list them in the table's order
        rank = {module: i for i, module in enumerate(BUILTIN_MODULES)}
        ordered = sorted(ROUTERS.items(), key=lambda item: rank.get(item[1].__module__, len(rank)))
        ROUTERS.clear()
        ROUTERS.update(ordered)
        _loaded = True  # only once all imported: a module that failed to import fails every lookup, not one

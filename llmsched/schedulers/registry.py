"""Schedulers by name: the only way configs and the CLI reach a policy (no import paths).

A scheduler module registers its classes when it is imported (``@register``, ``register_variant``);
``BUILTIN_MODULES`` names the modules that hold the built-in ones, imported on the first lookup. A new built-in
scheduler module is added to that table; a helper module beside the policies is simply not listed.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from .base import Scheduler

BUILTIN_MODULES = (
    # baselines
    "llmsched.schedulers.fastertransformer",
    "llmsched.schedulers.fcfs",
    "llmsched.schedulers.orca",
    "llmsched.schedulers.sarathi",
    "llmsched.schedulers.vllm",
    "llmsched.schedulers.vllm_chunked",
    # the papers' policies
    "llmsched.schedulers.rad_slai.rad",
    "llmsched.schedulers.rad_slai.slai",
    "llmsched.schedulers.infermax.infermax",
    "llmsched.schedulers.fairbatching.fairbatching",
    "llmsched.schedulers.wait.wait",
    "llmsched.schedulers.wait.nested_wait",
    "llmsched.schedulers.deferred.deferred_prefill",
    # tenants and priorities
    "llmsched.schedulers.fairness.vtc",
    "llmsched.schedulers.fairness.wfq",
    "llmsched.schedulers.fairness.priority",
    # beyond the papers: their levers combined (docs/goodput.md)
    "llmsched.schedulers.goodput",
)

_REGISTRY: dict[str, tuple[type[Scheduler], dict[str, Any], str]] = {}
_loaded = False


def register(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator: register ``cls`` under ``cls.name`` with its own defaults."""
    _add(cls.name, cls, {}, cls.__doc__.strip().splitlines()[0] if cls.__doc__ else "")
    return cls


def register_variant(name: str, cls: type[Scheduler], summary: str, **defaults) -> None:
    """A named setting of a scheduler class (e.g. ``sarathi-spf``)."""
    _add(name, cls, defaults, summary)


def _add(name, cls, defaults, summary):
    if name in _REGISTRY:
        raise ValueError(f"scheduler name {name!r} registered twice")
    _REGISTRY[name] = (cls, defaults, summary)


def scheduler_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def scheduler_info(name: str) -> dict:
    cls, defaults, summary = _lookup(name)
    params = {}
    for f in dataclasses.fields(cls):
        default = defaults.get(f.name, f.default)
        params[f.name] = None if default is dataclasses.MISSING else default
    return {"name": name, "summary": summary, "source": cls.source, "family": cls.family, "params": params,
            "needs_oracle": cls.needs_oracle}


def create_scheduler(name: str, **params) -> Scheduler:
    cls, defaults, _ = _lookup(name)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ValueError(f"scheduler {name!r} has no parameter(s) {', '.join(unknown)}; "
                         f"its parameters are: {', '.join(sorted(known)) or '(none)'}")
    sched = cls(**{**defaults, **params})
    sched.name = name  # a variant instance carries its registered name into errors and results
    return sched


def _lookup(name: str):
    _load_builtin()
    if name not in _REGISTRY:
        raise ValueError(f"unknown scheduler {name!r}; known schedulers: {', '.join(sorted(_REGISTRY))} "
                         f"(see `llmsched presets`)")
    return _REGISTRY[name]


def _load_builtin():
    global _loaded
    if not _loaded:
        for module in BUILTIN_MODULES:
            importlib.import_module(module)
        _loaded = True  # only once all imported: a module that failed to import fails every lookup, not one

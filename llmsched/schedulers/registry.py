"""Schedulers by name: the only way configs and the CLI reach a policy (no import paths).

A scheduler module registers its classes when it is imported (``@register``, ``register_variant``). ``BUILTIN``
names the modules that hold the built-in ones and the schedulers each registers; a module is imported when one of
its schedulers is first asked for, so a run loads its own policy and no other. A new built-in scheduler module (or
a new variant) is added to that table (tests/test_schedulers.py and tests/test_startup.py check it against what the
modules register); a helper module beside the policies is simply not listed.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from .base import Scheduler

BUILTIN: dict[str, tuple[str, ...]] = {
    # baselines
    "llmsched.schedulers.fastertransformer": ("fastertransformer",),
    "llmsched.schedulers.fcfs": ("fcfs",),
    "llmsched.schedulers.orca": ("orca",),
    "llmsched.schedulers.sarathi": ("sarathi", "sarathi-spf"),
    "llmsched.schedulers.vllm": ("vllm",),
    "llmsched.schedulers.vllm_chunked": ("vllm-chunked",),
    # the papers' policies
    "llmsched.schedulers.rad_slai.rad": ("rad", "rad-lowtbt"),
    "llmsched.schedulers.rad_slai.slai": ("slai", "slai-fcfs", "slai-priority", "slai-spf-fixed"),
    "llmsched.schedulers.infermax.infermax": (
        "infermax", "infermax-ft", "infermax-ft-ef", "infermax-oracle", "infermax-orca", "infermax-orca-ef",
        "infermax-rank-i", "infermax-rank-o", "infermax-rank-org", "infermax-sarathi", "infermax-sarathi-ef",
        "infermax-sarathi-nocp", "infermax-sarathi-pc", "infermax-sarathi-pc-ef", "infermax-vllm", "infermax-vllm-ef",
        "infermax-vllm-hy"),
    "llmsched.schedulers.fairbatching.fairbatching": ("fairbatching", "fairbatching-fb", "fairbatching-pab",
                                                      "fairbatching-tb"),
    "llmsched.schedulers.wait.wait": ("wait",),
    "llmsched.schedulers.wait.nested_wait": ("nested-wait",),
    "llmsched.schedulers.deferred.deferred_prefill": ("deferred-prefill",),
    # tenants and priorities
    "llmsched.schedulers.fairness.vtc": ("vtc",),
    "llmsched.schedulers.fairness.wfq": ("wfq",),
    "llmsched.schedulers.fairness.priority": ("priority",),
    # beyond the papers: their levers combined (docs/goodput.md)
    "llmsched.schedulers.goodput": ("goodput", "goodput-fixed-budget"),
}
BUILTIN_MODULES = tuple(BUILTIN)
MODULE_OF = {name: module for module, names in BUILTIN.items() for name in names}

_REGISTRY: dict[str, tuple[type[Scheduler], dict[str, Any], str]] = {}


def register(cls: type[Scheduler]) -> type[Scheduler]:
    """Class decorator: register ``cls`` under ``cls.name`` with its own defaults."""
    _add(cls.name, cls, {}, cls.__doc__.strip().splitlines()[0] if cls.__doc__ else "")
    return cls


def register_variant(name: str, cls: type[Scheduler], summary: str, **defaults) -> None:
    """A named setting of a scheduler class (e.g. ``sarathi-spf``)."""
    _add(name, cls, defaults, summary)


def _add(name, cls, defaults, summary):
    builtin = MODULE_OF.get(name)
    if name in _REGISTRY or (builtin is not None and cls.__module__ != builtin):
        raise ValueError(f"scheduler name {name!r} registered twice")
    _REGISTRY[name] = (cls, defaults, summary)


def scheduler_names() -> list[str]:
    """Every scheduler's name, the built-in ones without importing them."""
    return sorted(_REGISTRY.keys() | MODULE_OF.keys())


def builtin_scheduler_names() -> list[str]:
    """The library's schedulers alone: tests and plug-ins may register their own beside them."""
    return sorted(MODULE_OF)


def scheduler_info(name: str) -> dict:
    cls, defaults, summary = _lookup(name)
    params = {}
    for f in dataclasses.fields(cls):
        default = defaults.get(f.name, f.default)
        params[f.name] = None if default is dataclasses.MISSING else default
    return {"name": name, "summary": summary, "source": cls.source, "family": cls.family, "params": params,
            "needs_oracle": cls.needs_oracle, "windowed_kv": getattr(cls, "windowed_kv", False)}


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
    if name not in _REGISTRY:
        module = MODULE_OF.get(name)
        if module is None:
            raise ValueError(f"unknown scheduler {name!r}; known schedulers: {', '.join(scheduler_names())} "
                             f"(see `llmsched presets`)")
        importlib.import_module(module)
        if name not in _REGISTRY:  # the table promised it: a module that no longer registers the name
            raise ValueError(f"scheduler {name!r}: {module} does not register it (fix BUILTIN in "
                             f"llmsched/schedulers/registry.py)")
    return _REGISTRY[name]


"""The kinds of request source a run can have, in the order they are tried: the first whose ``applies(cfg)`` holds
builds the run's source (``generated``, the last, always applies).

Each module named in ``SOURCE_MODULES`` is one kind: it defines ``NAME``, ``applies(cfg) -> bool`` (read from the
RunConfig alone) and ``build(cfg)`` (the source, or a ValueError naming what to change). A new kind of source is
one new module and one line here, placed where its predicate must win over the kinds after it; nothing scans a
folder, and a module is imported only when a run reaches it in the table.
"""
from __future__ import annotations

import importlib

SOURCE_MODULES = (
    "llmsched.sources.trace",          # --trace: a replay (its tenant column named by --tenants)
    "llmsched.sources.shared_prefix",  # --workload shared-prefix (open or closed loop)
    "llmsched.sources.tenants",        # --tenants: one generated stream per tenant
    "llmsched.sources.sessions",       # --concurrency with --turns > 1: closed-loop conversations
    "llmsched.sources.closed_loop",    # --concurrency: a closed loop of single requests
    "llmsched.sources.rate_schedule",  # --rate-schedule: a rate that varies in time
    "llmsched.sources.generated",      # a length preset (or --lengths) at --rate
)


def source_kind(cfg):
    """The module of the first kind that applies to ``cfg``."""
    for name in SOURCE_MODULES:
        kind = importlib.import_module(name)
        if kind.applies(cfg):
            return kind
    raise AssertionError(f"no source kind applies; {SOURCE_MODULES[-1]} must apply to every config")


def build_source(cfg):
    """The run's request source, built by its kind."""
    return source_kind(cfg).build(cfg)

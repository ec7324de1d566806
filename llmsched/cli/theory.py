"""``llmsched theory NAME``: the papers' theory (capacity bounds, fluid optima, renewal throughput, optimal
schedules), one sub-command per module of ``llmsched.theory``."""
from __future__ import annotations

from .package_commands import add_package_commands


def add(sub) -> None:
    add_package_commands(sub, "llmsched.theory", "theory", "the papers' theory: capacity bounds, fluid optima, "
                         "renewal throughput, optimal schedules")

"""``llmsched theory NAME``: the papers' theory (capacity bounds, fluid optima, renewal throughput, optimal
schedules), one sub-command per module of ``llmsched.theory`` named in THEORY_COMMANDS."""
from __future__ import annotations

from .package_commands import add_package_commands

# the modules of llmsched.theory that are sub-commands, in the order --help lists them
THEORY_COMMANDS = ("deferred_prefill", "fluid", "optimal_schedule", "rad_bound", "throughput_bound")


def add(sub) -> None:
    add_package_commands(sub, "llmsched.theory", THEORY_COMMANDS, "theory",
                         "the papers' theory: capacity bounds, fluid optima, renewal throughput, optimal schedules")

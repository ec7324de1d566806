"""``llmsched theory NAME``: the papers' theory (capacity bounds, fluid optima, renewal throughput, optimal
schedules), one sub-command per module of this package named in THEORY_COMMANDS; each calls its library in
``llmsched.theory``."""
from __future__ import annotations

from .package_commands import add_package_commands

# the modules of llmsched.cli that are the sub-commands, in the order --help lists them
THEORY_COMMANDS = ("theory_deferred_prefill", "theory_fluid", "theory_optimal_schedule", "theory_rad_bound",
                   "theory_throughput_bound")


def add(sub) -> None:
    add_package_commands(sub, THEORY_COMMANDS, "theory",
                         "the papers' theory: capacity bounds, fluid optima, renewal throughput, optimal schedules")

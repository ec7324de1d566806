"""``llmsched theory NAME``: the papers' theory (capacity bounds, fluid optima, renewal throughput, optimal
schedules), one sub-command per module of this package named in package_commands.THEORY_COMMANDS; each calls its
library in ``llmsched.theory``."""
from __future__ import annotations

from functools import partial

from .package_commands import THEORY_COMMANDS, add_package_commands

add = partial(add_package_commands, commands=THEORY_COMMANDS, title="theory",
              help_text="the papers' theory: capacity bounds, fluid optima, renewal throughput, optimal schedules")

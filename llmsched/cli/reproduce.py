"""``llmsched reproduce NAME``: a paper's headline experiment with its figures and tables, one sub-command per
module of this package named in package_commands.REPRODUCE_COMMANDS; each runs its library in ``llmsched.reproduce``."""
from __future__ import annotations

from functools import partial

from .package_commands import REPRODUCE_COMMANDS, add_package_commands

add = partial(add_package_commands, commands=REPRODUCE_COMMANDS, title="reproduce",
              help_text="reproduce a paper's headline experiment and write its figures and tables")

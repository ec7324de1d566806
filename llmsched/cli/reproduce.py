"""``llmsched reproduce NAME``: a paper's headline experiment with its figures and tables, one sub-command per
module of ``llmsched.reproduce``."""
from __future__ import annotations

from .package_commands import add_package_commands


def add(sub) -> None:
    add_package_commands(sub, "llmsched.reproduce", "reproduce", "reproduce a paper's headline experiment and "
                         "write its figures and tables")

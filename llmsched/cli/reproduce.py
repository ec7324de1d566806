"""``llmsched reproduce NAME``: a paper's headline experiment with its figures and tables, one sub-command per
module of ``llmsched.reproduce`` named in REPRODUCE_COMMANDS."""
from __future__ import annotations

from .package_commands import add_package_commands

# the modules of llmsched.reproduce that are sub-commands, in the order --help lists them
REPRODUCE_COMMANDS = ("deferred_prefill", "fairbatching", "fairbatching_ablation", "fairness", "infermax", "slai",
                      "wait", "beyond")


def add(sub) -> None:
    add_package_commands(sub, "llmsched.reproduce", REPRODUCE_COMMANDS, "reproduce",
                         "reproduce a paper's headline experiment and write its figures and tables")

"""``llmsched reproduce NAME``: a paper's headline experiment with its figures and tables, one sub-command per
module of this package named in REPRODUCE_COMMANDS; each runs its library in ``llmsched.reproduce``."""
from __future__ import annotations

from .package_commands import add_package_commands

# the modules of llmsched.cli that are the sub-commands, in the order --help lists them
REPRODUCE_COMMANDS = ("reproduce_deferred_prefill", "reproduce_fairbatching", "reproduce_fairbatching_ablation",
                      "reproduce_fairness", "reproduce_infermax", "reproduce_slai", "reproduce_wait",
                      "reproduce_beyond", "reproduce_pd_crossover", "reproduce_splitwise", "reproduce_distserve")


def add(sub) -> None:
    add_package_commands(sub, REPRODUCE_COMMANDS, "reproduce",
                         "reproduce a paper's headline experiment and write its figures and tables")

"""`llmsched theory` and `llmsched reproduce` pass their options to library functions as keyword arguments
(llmsched/cli/package_commands.py ``keywords``): each option is a parameter of the function it feeds, and each
option's default is that parameter's, so a call from Python gets what the command gets."""
import inspect

import pytest

from llmsched.cli.commands import Parser
from llmsched.cli.package_commands import keywords
from llmsched.cli.reproduce import REPRODUCE_COMMANDS
from llmsched.cli.theory import THEORY_COMMANDS

# sub-command module -> (the library function its options feed, the options that only shape the command's output)
CALLS = {
    "theory_deferred_prefill": ("llmsched.theory.deferred_prefill:compute", ("json",)),
    "theory_fluid": ("llmsched.theory.fluid:compute", ("json",)),
    "theory_optimal_schedule": ("llmsched.theory.optimal_schedule:solve", ("json",)),
    "theory_rad_bound": ("llmsched.theory.rad_bound:compute", ("json",)),
    "theory_throughput_bound": ("llmsched.theory.throughput_bound:config", ("json", "served_fraction")),
    "reproduce_deferred_prefill": ("llmsched.reproduce.deferred_prefill:reproduce", ()),
    "reproduce_fairbatching": ("llmsched.reproduce.fairbatching:reproduce", ("out",)),
    "reproduce_fairbatching_ablation": ("llmsched.reproduce.fairbatching_ablation:settings", ("out",)),
    "reproduce_fairness": ("llmsched.reproduce.fairness:reproduce", ()),
    "reproduce_infermax": ("llmsched.reproduce.infermax:reproduce", ()),
    "reproduce_slai": ("llmsched.reproduce.slai:reproduce", ()),
    "reproduce_wait": ("llmsched.reproduce.wait:reproduce", ()),
    "reproduce_beyond": ("llmsched.reproduce.beyond:reproduce", ()),
}


def test_every_sub_command_is_checked():
    assert set(CALLS) == set(THEORY_COMMANDS) | set(REPRODUCE_COMMANDS)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_options_are_the_library_parameters_with_their_defaults(name):
    import importlib
    command = importlib.import_module(f"llmsched.cli.{name}")
    where, cli_only = CALLS[name]
    module, function = where.split(":")
    signature = inspect.signature(getattr(importlib.import_module(module), function))
    parser = Parser()
    command.add_arguments(parser)
    options = keywords(parser.parse_args([]), *cli_only)
    assert set(options) == set(signature.parameters)
    assert all(p.kind is p.KEYWORD_ONLY for p in signature.parameters.values())
    assert options == {k: p.default for k, p in signature.parameters.items()}

"""`llmsched theory` and `llmsched reproduce` pass their options to library functions as keyword arguments
(llmsched/cli/package_commands.py ``keywords``): each option is a parameter of the function it feeds (``FUNCTION``
of its module), and each option's default is that parameter's, so a call from Python gets what the command gets.
A function that takes run fields through ``**run`` gets the run's defaults (RunConfig's declarations)."""
import importlib
import inspect

import pytest

from llmsched.cli.commands import Parser
from llmsched.cli.package_commands import add_options, keywords
from llmsched.cli.reproduce import REPRODUCE_COMMANDS
from llmsched.cli.theory import THEORY_COMMANDS
from llmsched.run_config import DEFAULTS, RUN_FIELDS

# sub-command module -> (the library function its options feed, the options that only shape the command's output)
CALLS = {
    "theory_deferred_prefill": ("llmsched.theory.deferred_prefill:compute", ("json",)),
    "theory_fluid": ("llmsched.theory.fluid:compute", ("json",)),
    "theory_optimal_schedule": ("llmsched.theory.optimal_schedule:solve", ("json",)),
    "theory_rad_bound": ("llmsched.theory.rad_bound:compute", ("json",)),
    "theory_throughput_bound": ("llmsched.theory.throughput_bound:compute", ("json",)),
    "reproduce_deferred_prefill": ("llmsched.reproduce.deferred_prefill:reproduce", ()),
    "reproduce_fairbatching": ("llmsched.reproduce.fairbatching:reproduce", ("out",)),
    "reproduce_fairbatching_ablation": ("llmsched.reproduce.fairbatching_ablation:settings", ("out",)),
    "reproduce_fairness": ("llmsched.reproduce.fairness:reproduce", ()),
    "reproduce_infermax": ("llmsched.reproduce.infermax:reproduce", ()),
    "reproduce_slai": ("llmsched.reproduce.slai:reproduce", ()),
    "reproduce_wait": ("llmsched.reproduce.wait:reproduce", ()),
    "reproduce_beyond": ("llmsched.reproduce.beyond:reproduce", ()),
    "reproduce_pd_crossover": ("llmsched.reproduce.pd_crossover:reproduce", ()),
    "reproduce_splitwise": ("llmsched.reproduce.splitwise:reproduce", ()),
    "reproduce_distserve": ("llmsched.reproduce.distserve:reproduce", ()),
}


def test_every_sub_command_is_checked():
    assert set(CALLS) == set(THEORY_COMMANDS) | set(REPRODUCE_COMMANDS)


def parsed(name):
    command = importlib.import_module(f"llmsched.cli.{name}")
    where, cli_only = CALLS[name]
    module, function = where.split(":")
    assert command.FUNCTION is getattr(importlib.import_module(module), function)
    parser = Parser()
    add_options(command, parser)
    return keywords(parser.parse_args([]), *cli_only), inspect.signature(command.FUNCTION).parameters


@pytest.mark.parametrize("name", sorted(CALLS))
def test_options_are_the_library_parameters_with_their_defaults(name):
    options, params = parsed(name)
    named = {k: p for k, p in params.items() if p.kind is not p.VAR_KEYWORD}
    assert all(p.kind is p.KEYWORD_ONLY for p in named.values())
    assert set(named) <= set(options)
    assert {k: options[k] for k in named} == {k: p.default for k, p in named.items()}
    rest = {k: v for k, v in options.items() if k not in named}
    if len(named) < len(params):  # **run: the rest are run fields, at the run's defaults
        assert set(rest) <= set(RUN_FIELDS) and rest == {k: DEFAULTS[k] for k in rest}
    else:
        assert not rest

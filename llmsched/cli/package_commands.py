"""Sub-commands of ``llmsched theory`` and ``llmsched reproduce``, from an explicit table of modules.

Each module named in the table (in this package) defines ``NAME`` (the sub-command), ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args) -> int``; nothing scans a folder, so a helper module beside them is never
taken for a command.
"""
from __future__ import annotations

import argparse
import importlib

# what argparse adds to every Namespace of a sub-command: not an option of the analysis it runs
PARSER_FIELDS = ("command", "subcommand", "func")


def add_package_commands(sub, modules: tuple[str, ...], title: str, help_text: str) -> None:
    parser = sub.add_parser(title, help=help_text, description=help_text)
    inner = parser.add_subparsers(dest="subcommand", metavar="NAME")
    for name in modules:
        module = importlib.import_module(f"{__package__}.{name}")
        p = inner.add_parser(module.NAME, help=module.HELP, description=module.HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(func=runner(module))
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def runner(module):
    return lambda args: module.run(args)


def keywords(args, *cli_only: str) -> dict:
    """The options of ``args`` as keyword arguments of the library function the sub-command calls: each option's
    dest is that function's parameter, less ``cli_only`` (how the command prints, e.g. ``json``)."""
    return {k: v for k, v in vars(args).items() if k not in PARSER_FIELDS and k not in cli_only}

"""Sub-commands of ``llmsched theory`` and ``llmsched reproduce``, from an explicit table of modules.

Each module named in the table defines ``NAME`` (the sub-command), ``HELP`` (one line), ``add_arguments(parser)``
and ``run(args) -> int``; nothing scans a folder, so a helper module beside them is never taken for a command.
"""
from __future__ import annotations

import argparse
import importlib


def add_package_commands(sub, package: str, modules: tuple[str, ...], title: str, help_text: str) -> None:
    parser = sub.add_parser(title, help=help_text, description=help_text)
    inner = parser.add_subparsers(dest="subcommand", metavar="NAME")
    for name in modules:
        module = importlib.import_module(f"{package}.{name}")
        p = inner.add_parser(module.NAME, help=module.HELP, description=module.HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(func=runner(module))
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def runner(module):
    return lambda args: module.run(args)

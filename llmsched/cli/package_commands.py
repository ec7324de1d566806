"""Sub-commands contributed by modules of a package (``llmsched theory ...``, ``llmsched reproduce ...``).

Each module of such a package defines ``NAME`` (the sub-command), ``HELP`` (one line), ``add_arguments(parser)``
and ``run(args) -> int``. Modules are found by listing the package, so adding a file adds a command; a
subpackage holds a paper's code that the commands use (``reproduce/wait_runs/``, ``theory/infermax/``) and is not
a command. Nothing is ever imported from a path a user gives.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil


def add_package_commands(sub, package: str, title: str, help_text: str) -> None:
    pkg = importlib.import_module(package)
    parser = sub.add_parser(title, help=help_text, description=help_text)
    inner = parser.add_subparsers(dest="subcommand", metavar="NAME")
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        p = inner.add_parser(module.NAME, help=module.HELP, description=module.HELP,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(func=runner(module))
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def runner(module):
    return lambda args: module.run(args)

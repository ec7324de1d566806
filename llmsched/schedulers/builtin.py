"""Importing this module registers every scheduler module of this package (each registers itself)."""
import importlib
import pkgutil

from . import __path__ as _package_path

_INFRASTRUCTURE = {"base", "builtin", "registry", "decode_pass", "whole_prompt", "tunable"}

for _module in sorted(m.name for m in pkgutil.iter_modules(_package_path)):
    if _module not in _INFRASTRUCTURE and not _module.startswith("_"):
        importlib.import_module(f"{__package__}.{_module}")

"""The ``llmsched`` command line: every command in this package, one module per command or command group,
registered in one table (``commands.COMMANDS``); the analyses and the vLLM plug-in below it are libraries."""
from .commands import main

__all__ = ["main"]

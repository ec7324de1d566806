"""``llmsched``: the table of commands, the parser of one command or all, and how a command's error ends."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

# Each command's module (in this package), imported only when that command runs (see build_parser): importing
# them all is most of a short run's start-up. Listed in the order `llmsched --help` shows them; a module adds
# the parsers of all the names it is listed under (``add(sub)``), each with its ``func``.
COMMANDS = {
    "compare": "compare",
    "simulate": "simulate",
    "sweep": "sweep",
    "theory": "theory",
    "reproduce": "reproduce",
    "capacity": "capacity",
    "plan": "plan",
    "plan-day": "plan_day",
    "tune": "tune",
    "validate-timing": "validate_timing",
    "validate-serving": "validate_serving",
    "run": "real_engine",  # a real vLLM engine (llmsched/vllm): its threads are its own
    "profile": "real_engine",
    "fidelity": "real_engine",
    "make-model": "real_engine",
    "pd-proxy": "real_engine",
    "presets": "presets",
}
COMMAND_NAMES = set(COMMANDS)
SIMULATOR_COMMANDS = ("simulate", "compare", "sweep")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv and argv[0] in COMMAND_NAMES else None
    try:
        return run_command(argv, command)
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's status for it, not a traceback
        lead = "\n" if sys.stderr.isatty() else ""  # off the line a terminal's ^C (or a progress bar) is on
        print(f"{lead}llmsched{' ' + command if command else ''}: interrupted", file=sys.stderr)
        return 130


def run_command(argv: list[str], command: str | None) -> int:
    if command in SIMULATOR_COMMANDS and "numpy" not in sys.modules:
        # numpy's OpenBLAS starts a thread per core that spins after start-up and after each BLAS call: CPU time
        # (about 0.1 s a run) for nothing in a simulator of small arrays. Commands that fit or solve (capacity,
        # plan, theory, the real engine) keep it; a user's own setting wins.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = build_parser(command)
    Parser.argv = argv
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse has printed its one-line error (or --help)
        return e.code if isinstance(e.code, int) else 2
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    # a warning is one line on stderr, like an error
    shown, warnings.formatwarning = warnings.formatwarning, lambda message, *_, **__: \
        f"{prog(args)}: warning: {one_line(message)}\n"
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"{prog(args)}: error: {one_line(e)}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"{prog(args)}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = shown


def prog(args) -> str:
    sub = getattr(args, "subcommand", None)
    return f"llmsched {args.command}" + (f" {sub}" if sub else "")


def one_line(e: Exception) -> str:
    return " ".join(str(e).split())


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error: the usage is in --help."""

    argv: list[str] = []  # the arguments being parsed, for a hint that needs them

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)}{self.dash_hint(message)} (see `{self.prog} --help`)\n")

    def dash_hint(self, message: str) -> str:
        """argparse reads a value that starts with '-' and is not a plain number (``--disaggregate -1P1D``) as an
        option, and says only that the option expected an argument: name the value and the way to pass it."""
        if not message.endswith("expected one argument") or not message.startswith("argument "):
            return ""
        for flag in message[len("argument "):].split(":")[0].split("/"):
            for given, value in zip(Parser.argv, Parser.argv[1:]):
                if given == flag and value.startswith("-"):
                    return f"; {value!r} starts with '-', so it was read as an option: write {flag}={value}"
        return ""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, or with ``command`` only that one's: parsing a command's arguments needs no
    other, and the others would import their packages (capacity search, plans, the papers' theory, vLLM)."""
    p = Parser(prog="llmsched", description=(
        "Scheduling for LLM inference: simulate and compare batch schedulers on real model/GPU pairs and "
        "real traces. Times are printed in milliseconds."))
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    modules = [COMMANDS[command]] if command else list(dict.fromkeys(COMMANDS.values()))
    for module in modules:
        importlib.import_module(f"{__package__}.{module}").add(sub)
    return p

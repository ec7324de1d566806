"""No option's default repeats a run field's by hand: each run field's default is declared once (RunConfig,
llmsched/run_config.py, and the replica limits it takes from llmsched/engine/limits.py), and every command's
option for a run field either leaves the default to the run (the run options) or takes it from the library
function it feeds, whose parameter names RunConfig's default or a paper's setting written there with its section
(llmsched/cli/package_commands.py)."""
import argparse
import ast
import importlib
import inspect
import textwrap
from pathlib import Path

import pytest

import llmsched
from llmsched.cli.commands import build_parser
from llmsched.cli.reproduce import REPRODUCE_COMMANDS
from llmsched.cli.theory import THEORY_COMMANDS
from llmsched.engine.limits import MAX_NUM_BATCHED_TOKENS
from llmsched.run_config import DEFAULTS, RUN_FIELDS

PACKAGE = Path(llmsched.__file__).resolve().parent
SUB_COMMANDS = (*THEORY_COMMANDS, *REPRODUCE_COMMANDS)


def actions(parser: argparse.ArgumentParser):
    """Every option of ``parser`` and of its sub-commands, with the command's name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for where, inner in actions(sub):
                    yield f"{name} {where}".strip(), inner
        else:
            yield "", action


def own_default(action) -> bool:
    """Whether the option was given a default where it was declared (a switch's implied one is not)."""
    if action.default is None or action.default == []:
        return False
    return not (action.nargs == 0 and action.const is not None and action.default == (not action.const))


def test_no_command_option_repeats_a_run_field_s_default():
    """The commands leave a run field's default to RunConfig (the run options give none) or give one of their own
    for a reason (the CPU engine's limits of `llmsched profile`); none copies the run's value."""
    copied = [f"llmsched {where}: {action.option_strings[0]} default {action.default!r}"
              for where, action in actions(build_parser())
              if action.dest in RUN_FIELDS and own_default(action) and action.default == DEFAULTS[action.dest]
              and not where.startswith(("theory", "reproduce"))]
    assert not copied, "\n".join(copied)


@pytest.mark.parametrize("name", SUB_COMMANDS)
def test_theory_and_reproduce_options_take_their_defaults_from_the_library(name):
    """A sub-command's option for a parameter of its library function gives no default of its own: the library's
    is filled in (package_commands.library_defaults), so a default is written once."""
    command = importlib.import_module(f"llmsched.cli.{name}")
    params = inspect.signature(command.FUNCTION).parameters
    takes_run = any(p.kind is p.VAR_KEYWORD for p in params.values())
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    written = [f"{action.option_strings[0]} default {action.default!r}" for _, action in actions(parser)
               if (action.dest in params or (takes_run and action.dest in RUN_FIELDS))
               and action.dest in RUN_FIELDS and own_default(action)]
    assert not written, f"llmsched.cli.{name}: " + "; ".join(written)


def signature_defaults(function) -> dict[str, ast.expr]:
    """Each keyword parameter's default as written in ``function``'s source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    args = tree.body[0].args
    out = dict(zip((a.arg for a in args.kwonlyargs), args.kw_defaults))
    out.update(zip((a.arg for a in args.args[len(args.args) - len(args.defaults):]), args.defaults))
    return {k: v for k, v in out.items() if v is not None}


@pytest.mark.parametrize("name", SUB_COMMANDS)
def test_library_parameters_name_the_run_s_defaults(name):
    """A library parameter that is a run field and defaults to the run's value says so (``RunConfig.model``), never
    a copy of the value; a different default is the library's own (a paper's setting, named with its section)."""
    function = importlib.import_module(f"llmsched.cli.{name}").FUNCTION
    copied = [f"{key}={ast.unparse(node)}" for key, node in signature_defaults(function).items()
              if key in RUN_FIELDS and DEFAULTS[key] is not None and isinstance(node, ast.Constant)
              and node.value == DEFAULTS[key]]
    assert not copied, f"{function.__module__}.{function.__name__}: write RunConfig.NAME for " + ", ".join(copied)


def test_a_generated_default_shows_in_help_and_follows_the_declaration(monkeypatch):
    """The help text's default is the one the option takes, read from the declaration at the time the parser is
    built: change the declaration and both change."""
    from llmsched.cli import package_commands
    monkeypatch.setitem(package_commands.DEFAULTS, "max_num_seqs", 96)
    parser = build_parser("theory")
    bound = next(a for w, a in actions(parser) if w == "theory throughput-bound" and a.dest == "max_num_seqs")
    assert bound.default == 96
    sub = parser._subparsers._group_actions[0].choices["theory"]._subparsers._group_actions[0].choices
    assert "engine limit (default 96)" in " ".join(sub["throughput-bound"].format_help().split())


def hand_written_token_caps(path: Path) -> list[int]:
    """Lines of ``path`` that write max_num_batched_tokens's default as a number: a keyword argument, a
    parameter's default, a dict entry, or a constant named after the field."""
    value = MAX_NUM_BATCHED_TOKENS.default
    field = "max_num_batched_tokens"

    def is_value(node):
        return isinstance(node, ast.Constant) and not isinstance(node.value, bool) and node.value == value

    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.keyword) and node.arg == field and is_value(node.value):
            lines.append(node.value.lineno)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            lines += [d.lineno for arg, d in pairs if arg.arg == field and is_value(d)]
        elif isinstance(node, ast.Dict):
            lines += [v.lineno for k, v in zip(node.keys, node.values)
                      if isinstance(k, ast.Constant) and k.value == field and is_value(v)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and is_value(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in targets]
            if any(field in n.lower() for n in names):
                lines.append(node.lineno)
    return sorted(lines)


def test_the_token_cap_default_is_written_once():
    """8192 as max_num_batched_tokens's default appears only in its declaration (engine/limits.py, which RunConfig,
    ReplicaConfig and the vLLM engine's config share); every other module reads it from there."""
    found = {str(path.relative_to(PACKAGE.parent)): hand_written_token_caps(path)
             for path in PACKAGE.rglob("*.py") if path != PACKAGE / "engine" / "limits.py"}
    found = {k: v for k, v in found.items() if v}
    assert not found, f"max_num_batched_tokens={MAX_NUM_BATCHED_TOKENS.default} written by hand: {found}"
    assert DEFAULTS["max_num_batched_tokens"] == MAX_NUM_BATCHED_TOKENS.default


def test_the_scan_finds_a_hand_written_token_cap(tmp_path):
    """The scan above catches each way of writing the default by hand (so its silence means something)."""
    path = tmp_path / "m.py"
    path.write_text("DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192\n"
                    "def f(max_num_batched_tokens=8192): pass\n"
                    "def g(*, max_num_batched_tokens: int = 8192): pass\n"
                    "cfg = dict(max_num_batched_tokens=8192)\n"
                    "limits = {'max_num_batched_tokens': 8192}\n"
                    "ok = dict(max_num_batched_tokens=4096, token_budget=8192)\n")
    assert hand_written_token_caps(path) == [1, 2, 3, 4, 5]

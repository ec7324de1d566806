"""Sub-commands of ``llmsched theory`` and ``llmsched reproduce``, from explicit tables of modules.

Each module named in a table (in this package) is a sub-command, named by the module (``theory_rad_bound`` is
``llmsched theory rad-bound``), its one line of help beside it, so a table reads as the command's listing. The
module defines ``FUNCTION`` (the library function its options feed) and ``add_arguments(parser)``; nothing scans a
folder, so a helper module beside them is never taken for a command. How the command runs is said once, here, for
all: ``FUNCTION`` is called with the options (``keywords``). A module that prints the result defines
``print_text(out, args) -> int`` and gets a ``--json`` option (the result as JSON instead); one that runs otherwise
defines ``run(args) -> int``.

An option that gives no default of its own takes its library parameter's (``library_defaults``), so a default is
written once, in the library: the run's own (``RunConfig.model``) or a paper's setting named there with its
section. A run field's option is declared by ``run_field_option``: its flag and its check come from RunConfig's
declaration (llmsched/run_config.py), its default from the library; help shows it with ``%(default)s``.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json

from ..results_file import write_results
from ..run_config import DEFAULTS, RUN_FIELDS
from ..run_field import API, KINDS

# `llmsched theory`'s sub-commands, in the order --help lists them: each a module of this package (its options,
# the library function they feed, what it prints) and its one line of help
THEORY_COMMANDS = {
    "theory_deferred_prefill": "Mohanty et al.: throughput ρ(K) of refilling after K departures (Theorem 1, Prop. 1) "
                               "and the optimal K*",
    "theory_fluid": "Ao et al.: fluid equilibrium T*, M*, n*_j, Thp* and stability (d1·Σλc < 1); WAIT's feasible "
                    "thresholds for a memory M; Nested WAIT's segments, thresholds, θ*_s and safety buffer for "
                    "overflow probability δ",
    "theory_optimal_schedule": "Kim et al. §3: the optimal offline schedule of a few requests (OR-Tools CP-SAT), its "
                               "total latency and a proof of optimality or the gap, next to vLLM, Sarathi and their "
                               "eviction-free variants",
    "theory_rad_bound": "Bari et al. Theorem 1: mean optimal service time T̄ᴿ and r/T̄ᴿ, RAD's regime (a bound only in "
                        "the paper's cost model), beside the sound throughput bound; Theorem 2's n",
    "theory_throughput_bound": "a sound upper bound on the requests/s any scheduler can serve for a model/GPU/workload "
                               "under the simulator's batch-time model and engine limits (what `llmsched plan` prunes "
                               "with)",
}

# `llmsched reproduce`'s sub-commands, likewise
REPRODUCE_COMMANDS = {
    "reproduce_deferred_prefill": "Mohanty et al. Table 1: throughput and completion time vs K for Granite (C=331) and "
                                  "Llama-3 (C=410) on A100",
    "reproduce_fairbatching": "Lyu et al. FairBatching: single-node and cluster capacity, SLO sweep, ablations "
                              "(simulated)",
    "reproduce_fairbatching_ablation": "Lyu et al. FairBatching: capacity of FB-v, tuned Sarathi and vLLM-vanilla with "
                                       "one factor changed at a time",
    "reproduce_fairness": "tenants: vtc/wfq light-tenant TTFT and throughput, Jain's index, priority TTFT p99 and "
                          "thrown-away work",
    "reproduce_infermax": "Kim et al.: §4 grid (contention, eviction vs eviction-free, memory M, length ranking), §5.1 "
                          "optimal schedules (CP-SAT) and §6 Azure conversation trace with Llama-3-70B/4×A100 (M = "
                          "100K)",
    "reproduce_slai": "Bari et al. Fig. 7/8 and capacities: vLLM, Sarathi and SLAI on Mistral-7B / RTX 6000 Ada, paid "
                      "and free tiers",
    "reproduce_wait": "Ao et al.: Example 2, Thm 1 scaling, Nested WAIT overflow ≤ δ, WAIT/Nested WAIT vs vLLM and "
                      "Sarathi",
    "reproduce_beyond": "every competitor tuned for the same SLOs and traffic (llmsched tune), then its capacity on "
                        "held-out seeds and on a different workload of the same kind: vllm-chunked, sarathi, slai, "
                        "fairbatching, nested-wait, infermax, deferred-prefill, goodput",
    "reproduce_pd_crossover": "colocated x2/x3 vs 1P1D/2P1D (Llama-3-8B, H100) on prompt-heavy, balanced and "
                              "decode-heavy traffic: capacity per GPU and latencies at a common rate",
    "reproduce_splitwise": "Patel et al. (ISCA 2024): Llama-2-70B DGX-H100/DGX-A100 clusters at iso-power and "
                           "iso-cost, colocated vs Splitwise-HH/AA/HA, on the Azure code and conversation traces; the "
                           "batch-time model checked against the paper's DGX step times",
    "reproduce_distserve": "Zhong et al. (OSDI 2024): DistServe's prefill/decode instances vs colocated vLLM "
                           "(OPT-13B/66B, A100-80GB) on the artifact's chatbot and summarization settings: per-GPU "
                           "rate at which 90% of requests meet TTFT and TPOT",
}

# what argparse adds to every Namespace of a sub-command: not an option of the analysis it runs
PARSER_FIELDS = ("command", "subcommand", "func")


def add_package_commands(sub, commands: dict[str, str], title: str, help_text: str) -> None:
    """``llmsched TITLE`` with a sub-command for each module of ``commands`` (module name -> its help)."""
    parser = sub.add_parser(title, help=help_text, description=help_text)
    inner = parser.add_subparsers(dest="subcommand", metavar="NAME")
    for name, help_line in commands.items():
        module = importlib.import_module(f"{__package__}.{name}")
        # a listing's help is a format string (%(default)s ...), a description is printed as written
        p = inner.add_parser(command_name(name, title), help=help_line.replace("%", "%%"), description=help_line,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        add_options(module, p)
        p.set_defaults(func=runner(module))
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def command_name(module: str, title: str) -> str:
    """The sub-command of ``llmsched TITLE`` that module ``module`` defines: its name after ``TITLE_``, dashed."""
    return module.removeprefix(f"{title}_").replace("_", "-")


def runner(module):
    if hasattr(module, "run"):
        return module.run
    if hasattr(module, "print_text"):
        return lambda args: print_result(module, args)
    return lambda args: (module.FUNCTION(**keywords(args)), 0)[1]


def print_result(module, args) -> int:
    """``module.FUNCTION``'s result for ``args``: JSON with --json (numpy scalars as floats), else its text."""
    out = module.FUNCTION(**keywords(args, "json"))
    if args.json:
        print(json.dumps(out, indent=2, default=float))
        return 0
    return module.print_text(out, args)


def print_report(out, report, folder: str | None) -> int:
    """Print ``report(out)``; with a ``folder`` (--out), also write ``out`` there as results.json and say where."""
    print(report(out))
    if folder:
        print(f"wrote {write_results(folder, out)}")
    return 0


def add_options(module, parser: argparse.ArgumentParser) -> None:
    """``module``'s options on ``parser``, each that gives no default of its own with its library parameter's."""
    module.add_arguments(parser)
    if hasattr(module, "print_text"):
        parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(**library_defaults(module.FUNCTION, parser))


def library_defaults(function, parser: argparse.ArgumentParser) -> dict:
    """The defaults of ``parser``'s options that give none of their own: each the default of ``function``'s
    parameter of the same name, or, for a run field that ``function`` takes through ``**run``, the run's."""
    params = inspect.signature(function).parameters
    takes_run = any(p.kind is p.VAR_KEYWORD for p in params.values())
    out = {}
    for action in parser._actions:
        if action.default is not None:
            continue
        param = params.get(action.dest)
        if param is not None and param.default is not param.empty:
            out[action.dest] = param.default
        elif param is None and takes_run and action.dest in RUN_FIELDS:
            out[action.dest] = DEFAULTS[action.dest]
    return out


# the help of a run field's option where a command says no more of it than what it is: one wording for all
PLAIN_HELP = {"model": "model preset (default %(default)s)", "gpu": "GPU preset (default %(default)s)",
              "workload": "length preset (default %(default)s)",
              "batch_time": "batch-time model kind (default %(default)s)"}


def run_field_option(p, name: str, help: str | None = None) -> None:
    """The option of run field ``name`` (RunConfig's): its declared flag, a value checked by its declaration
    (a bad one is a usage error naming the option), no default here (the library's, see ``library_defaults``).
    ``help``: what the option is to this command (default ``PLAIN_HELP``'s, if any)."""
    p.add_argument(RUN_FIELDS[name].flag_of(name), dest=name, type=field_type(name),
                   help=PLAIN_HELP.get(name) if help is None else help)


def run_field_options(p, *names: str) -> None:
    """``run_field_option`` for each of ``names``, each with its plain help."""
    for name in names:
        run_field_option(p, name)


# options several experiments take, in one wording; each has its library parameter's default (``library_defaults``)
EXPERIMENT_OPTIONS = {"out": dict(help="output folder (default %(default)s)"),
                      "resolution": dict(type=float, help="capacity resolution (default %(default)s)"),
                      "jobs": dict(type=int, help="parallel runs (default %(default)s)")}


def experiment_options(p, *names: str) -> None:
    """The options ``--NAME`` of ``names`` (keys of EXPERIMENT_OPTIONS), as ``run_field_options`` gives run fields'."""
    for name in names:
        p.add_argument(f"--{name}", default=None, **EXPERIMENT_OPTIONS[name])


def field_type(name: str):
    """An argparse ``type`` for run field ``name``: the text as the field's kind, within its declared range."""
    spec = RUN_FIELDS[name]

    def convert(text: str):
        try:
            return spec.check(name, text if spec.kind is str else spec.kind(text), API)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {spec.expectation()}, got {text!r}") from None

    convert.__name__ = KINDS[spec.kind]
    return convert


def keywords(args, *cli_only: str) -> dict:
    """The options of ``args`` as keyword arguments of the library function the sub-command calls: each option's
    dest is that function's parameter, less ``cli_only`` (how the command prints, e.g. ``json``)."""
    return {k: v for k, v in vars(args).items() if k not in PARSER_FIELDS and k not in cli_only}

"""The run options every command takes the same way (compare, simulate, sweep, capacity, plan, run, fidelity).

The options are generated from RunConfig's declarations (``llmsched/run_config.py``): one option per field, with
its declared flag, type and help. A --config file and the command line merge (CLI wins); each value is checked
once where it is read, the fields together once; ``--param KEY=VALUE`` is split by scheduler; RunConfigs are made
from the checked values without checking them again.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from ..config_fields import check_combination, conflicts_with, parse_params
from ..run_config import (CLI_FLAGS, RUN_FIELDS, RunConfig, check_batch_time_params, check_field, checked_params,
                          checked_router_params, read_run_config)
from ..run_field import API, Origin

COMMAND_GIVEN = ("scheduler",)  # each command names its scheduler(s) its own way: --scheduler or --schedulers
CLI = Origin("cli", flags=CLI_FLAGS)


def add_run_options(p: argparse.ArgumentParser, exclude=(), defaults: dict | None = None,
                    trace_meta: str | None = None) -> None:
    """The run options on ``p``, except ``exclude`` (options that do not apply to the command: a config file
    that sets one of them is an error too); ``defaults``: the command's own defaults for fields the user leaves
    out (a default that does not apply to the run, such as a rate for a trace replay, is left out).
    ``trace_meta``: a --trace with a real run's meta.json beside it sets the fields the user leaves out to that
    run's (validate/trace_meta.py): "engine" its model, GPU, limits and the rest, "run" its scheduler too."""
    unknown = sorted(set(exclude) - set(RUN_FIELDS))
    if unknown:
        raise ValueError(f"add_run_options: no run option(s) {', '.join(unknown)}")
    g = p.add_argument_group("run options (also settable in --config; CLI wins)")
    g.add_argument("--config", help="TOML or YAML file whose keys are these options (with _ or -)")
    options = [(n, s) for n, s in RUN_FIELDS.items() if n not in exclude and n not in COMMAND_GIVEN]
    for name, spec in options:  # the options that take a value, then the repeatable and the switches
        if not spec.switch and spec.kind is not dict:
            g.add_argument(spec.flag_of(name), dest=name, type=spec.kind, default=None, help=spec.help)
    for name, spec in options:
        if spec.kind is dict:
            g.add_argument(spec.flag_of(name), dest=name, action="append", default=[], metavar=spec.metavar,
                           help=spec.help)
        elif spec.switch:
            g.add_argument(spec.flag_of(name), dest=name, action="store_const", const=not spec.default,
                           default=None, help=spec.help)
    g.add_argument("--tuned", "--params-file", dest="tuned", action="append", default=[], metavar="FILE",
                   help="a best.json from `llmsched tune`: its scheduler's tuned parameters and run fields apply to "
                        "that scheduler's runs (repeatable, one file per scheduler; --param, run options and --config "
                        "given here win)")
    g.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    if trace_meta:
        from .serve_engine import SERVE_COMMAND_HELP, VLLM_VERSION_HELP
        t = p.add_argument_group("the engine of a --trace's run saved without meta.json")
        t.add_argument("--serve-command", metavar="COMMAND",
                       help=SERVE_COMMAND_HELP.format(what="a --trace's run") +
                       "; taken as a meta.json beside the trace is")
        t.add_argument("--vllm-version", metavar="X.Y.Z", help=VLLM_VERSION_HELP.format(what="a --trace's run"))
    p.set_defaults(excluded_run_options=tuple(exclude), run_defaults=dict(defaults or {}), run_options=None,
                   trace_meta=trace_meta, trace_meta_found=None, trace_engine_unknown=None)


def base_config(args) -> dict:
    """The --config file's keys overridden by the options given on the command line, each checked."""
    return config_with_origins(args)[0]


def config_with_origins(args) -> tuple[dict, dict[str, Origin]]:
    """``base_config`` and, per key, where it was written (for errors that name the option or file and line):
    read and checked at the first call, kept on ``args`` for the rest of the command."""
    if args.run_options is None:
        args.run_options = read_options(args)
    return args.run_options


def read_options(args) -> tuple[dict, dict[str, Origin]]:
    data, origins = {}, {}
    if args.config:
        check_own_options(args)
        data, file_origin = read_run_config(args.config)
        origins = dict.fromkeys(data, file_origin)
    command = getattr(args, "command", None) or "this command"
    for key in args.excluded_run_options:
        if key in data:
            raise ValueError(f"{origins[key].name(key)} does not apply to `llmsched {command}`; remove it")
    for name, spec in RUN_FIELDS.items():
        value = getattr(args, name, None)
        if value is not None and spec.kind is not dict and name not in COMMAND_GIVEN:
            data[name] = check_field(name, value, CLI)
            origins[name] = CLI
    if getattr(args, "batch_time_params", None):
        data["batch_time_params"] = {**data.get("batch_time_params", {}),
                                     **parse_params(args.batch_time_params, CLI_FLAGS["batch_time_params"])}
        origins["batch_time_params"] = CLI
    if getattr(args, "workload_params", None):
        data["workload_params"] = {**data.get("workload_params", {}),
                                   **parse_params(args.workload_params, CLI_FLAGS["workload_params"])}
        origins["workload_params"] = CLI
    for name in ("router_params", "autoscaler_params", "cold_start_params",
                 "prefill_pool", "decode_pool", "pd_decider_params"):  # tables given field by field
        if getattr(args, name, None):
            data[name] = {**data.get(name, {}), **parse_params(getattr(args, name), CLI_FLAGS[name])}
            origins[name] = CLI
    if (data.get("trace") or data.get("concurrency") or data.get("tenants")) and "rate" not in data:
        data["rate"] = None  # a trace replays at its own rate; a closed loop has none; tenants have their own
    serve = [f for f in ("serve_command", "vllm_version") if getattr(args, f, None) is not None]
    if serve and not data.get("trace"):
        raise ValueError(f"{' and '.join('--' + f.replace('_', '-') for f in serve)}: the engine arguments of the run "
                         f"a --trace was captured from; give --trace FILE, or set the engine with the run options")
    if getattr(args, "trace_meta", None) and data.get("trace"):
        take_trace_meta(args, data, origins)
    for key, value in args.run_defaults.items():
        if key not in data and not conflicts_with(key, data):
            data[key] = check_field(key, value)
    check_combination(data, lambda key: origins.get(key, API))
    warn_router_of_one(data, origins)
    return data, origins


def take_trace_meta(args, data: dict, origins: dict) -> None:
    """The fields the user left out set to those of the run the trace was captured from (its meta.json), said in
    one line on stderr and kept on ``args`` for the run's summary."""
    from ..validate.trace_meta import trace_meta
    from .serve_engine import serve_engine
    found = trace_meta(data, args.trace_meta == "run" and getattr(args, "scheduler", None) is None,
                       serve_engine(args))
    if found is None:
        from ..validate.trace_meta import client_log_model
        model = client_log_model(data["trace"])
        if model is not None:  # a bench result or GuideLLM report alone: it says which model, nothing of the engine
            args.trace_engine_unknown = (
                f"{data['trace']} names its model ({model}) but no meta.json gives its engine; the run options "
                f"given (or llmsched's defaults) were simulated: give --serve-command 'vllm serve ...' and --gpu to "
                f"simulate the machine that ran it")
        return
    data.update(found.taken)
    origins.update(dict.fromkeys(found.taken, found.origin))
    args.trace_meta_found = found
    print(f"llmsched {getattr(args, 'command', None) or 'run'}: {found.note()}", file=sys.stderr)


INTERNAL = ("config", "func", "command", "run_options", "excluded_run_options", "run_defaults", "trace_meta",
            "trace_meta_found", "trace_engine_unknown")  # no flag of their own


def check_own_options(args) -> None:
    """A --config file holds run fields only: a key that is the command's own option (plan's target_rate,
    capacity's slo) is named as such, with the flag to give it as, rather than as an unknown key."""
    from ..run_config import load_config
    own = [k for k in load_config(args.config) if k not in RUN_FIELDS and k in vars(args) and k not in INTERNAL]
    if own:
        command = getattr(args, "command", None) or "this command"
        origin = Origin.file(args.config, Path(args.config).read_text())
        one = len(own) == 1
        raise ValueError(f"config file {args.config}{origin.line_of(own[0])}: {', '.join(own)} "
                         f"{'is' if one else 'are'} `llmsched {command}`'s own option{'' if one else 's'}, not "
                         f"{'a run field' if one else 'run fields'} a config file holds; give "
                         f"{' '.join('--' + k.replace('_', '-') for k in own)} on the command line")


def warn_router_of_one(data: dict, origins: dict) -> None:
    """A router the user chose for a run of one replica and one DP rank picks nothing (PAB's admission control,
    for one, is the fairbatching-pab scheduler's): said in one line, from the command line and a config file
    alike."""
    from ..routing.registry import router_classes
    router, replicas = data.get("router"), data.get("replicas", RunConfig.replicas)
    dp = data.get("dp", RunConfig.dp)  # a DP group's router picks among its ranks
    if router in router_classes() and replicas == 1 and dp == 1 and not data.get("fleet"):  # a fleet's pools: own sizes
        pab = " (PAB's admission control on one replica: --scheduler fairbatching-pab)" if router == "pab" else ""
        warnings.warn(f"{origins.get('router', API).at('router', router)}: a router picks among replicas and this "
                      f"run has one, so it changes nothing{pab}; give --replicas N (N > 1) or drop it", stacklevel=2)


def scheduler_params(args, names: list[str], base: dict | None = None) -> dict[str, dict]:
    """Per scheduler, its parameters from the --config file's ``scheduler_params`` and from ``--param``.

    Both take the same forms: ``SCHEDULER.KEY=VALUE`` (or a ``[scheduler_params.SCHEDULER]`` table in the file)
    for one scheduler of several, plain ``KEY=VALUE`` when the run has one scheduler. CLI values win. A file's
    table for a scheduler that is not in this run is kept for runs that have it (one file serves every command).
    """
    from ..schedulers.registry import scheduler_names
    if base is None:
        base = base_config(args)
    where = f"scheduler_params (in {args.config})" if args.config else "scheduler_params"
    option = CLI_FLAGS["scheduler_params"]
    per = {n: {} for n in names}
    for source, given_as in ((base.get("scheduler_params") or {}, where),
                             (parse_params(args.scheduler_params, option), option)):
        for key, value in source.items():
            if isinstance(value, dict) and key in per:
                per[key].update(value)
            elif isinstance(value, dict):
                if key not in scheduler_names():
                    raise ValueError(f"{given_as}: [{key}] is not a scheduler (see `llmsched presets`)")
                if given_as == option:
                    raise ValueError(f"{given_as}: [{key}] is not among the schedulers of this run "
                                     f"({', '.join(names)})")
                # a config file's table for another scheduler: it applies to runs of that scheduler
            elif "." in key:
                name, sub = key.split(".", 1)
                if name not in per:
                    raise ValueError(f"{given_as} {name}.{sub}: {name!r} is not among the schedulers of this run "
                                     f"({', '.join(names)})")
                per[name][sub] = value
            elif len(names) == 1:
                per[names[0]][key] = value
            else:
                raise ValueError(f"{given_as} {key}: with several schedulers write SCHEDULER.{key}=VALUE (in a "
                                 f"config file: a [scheduler_params.SCHEDULER] table)")
    return per


def run_configs(args, names: list[str], rates=None) -> list[RunConfig]:
    """One RunConfig per scheduler (and per rate): the command's defaults < --config < CLI options."""
    from ..schedulers.registry import scheduler_info
    base, origins = config_with_origins(args)
    params = scheduler_params(args, names, base)
    params_origin = CLI if args.scheduler_params else origins.get("scheduler_params", API)
    tuned = tuned_settings(args, names)
    configs = []
    for name in names:
        written = origins["scheduler"] if base.get("scheduler") == name and "scheduler" in origins else CLI
        data = {**base, "scheduler": check_field("scheduler", name, written), "scheduler_params": params[name]}
        scheduler_info(name)  # unknown names fail here, before any run starts
        data["scheduler_params"] = checked_params(data, params_origin)
        if name in tuned:
            data = with_tuned(data, tuned[name], lambda key: origins.get(key, API))
        if data.get("router_params"):
            data["router_params"] = checked_router_params(data, origins.get("router_params", API))
        if data.get("batch_time_params"):
            check_batch_time_params(data, origins.get("batch_time_params", API))
        for rate in rates or [None]:
            if rate is not None:
                data = {**data, "rate": check_field("rate", rate)}
                check_combination(data, lambda key: origins.get(key, API))  # the run's own rate with the rest
            configs.append(RunConfig.checked(data))
    return configs


def tuned_names(args) -> list[str]:
    """The schedulers of the --tuned files, in the order given (a command's default when none is named)."""
    paths = getattr(args, "tuned", None) or ()
    if not paths:
        return []
    from ..tune.tuned_file import read_tuned  # only a run given --tuned files loads the tuner's reader
    return list(dict.fromkeys(read_tuned(path)["scheduler"] for path in paths))


def tuned_settings(args, names: list[str]) -> dict[str, dict]:
    """Per scheduler of this run, its --tuned file's record; a file for a scheduler not in the run, or two files
    for one scheduler, is an error."""
    paths = getattr(args, "tuned", None) or ()
    if not paths:
        return {}
    from ..tune.tuned_file import read_tuned  # only a run given --tuned files loads the tuner's reader
    out: dict[str, dict] = {}
    for path in paths:
        record = read_tuned(path)
        name = record["scheduler"]
        if name not in names:
            raise ValueError(f"--tuned {path} is for scheduler {name!r}, which is not among this run's "
                             f"({', '.join(names)}); add it (--scheduler/--schedulers) or drop the file")
        if name in out:
            raise ValueError(f"--tuned: two files for scheduler {name!r} ({out[name]['path']}, {path}); give one")
        out[name] = record
    return out


def with_tuned(data: dict, record: dict, origin_of) -> dict:
    """``data`` (checked) with the tuned record's scheduler parameters and run fields under what the user gave
    (on the command line or in --config): those win. The file's values are checked here, naming the file."""
    where = Origin.file(record["path"])
    mine = {k: v for k, v in record["scheduler_params"].items() if k not in data["scheduler_params"]}
    params = checked_params({"scheduler": data["scheduler"], "scheduler_params": mine}, where)
    out = {**data, "scheduler_params": {**params, **data["scheduler_params"]}}
    for key, value in record["run"].items():
        if key in ("scheduler", "scheduler_params") or key in data:
            continue  # the user's own setting wins
        out[key] = check_field(key, value, where)
    check_combination(out, lambda key: where if key in record["run"] else origin_of(key))
    return out

"""Each run field is declared once (llmsched/run_config.py, engine/limits.py): the command line's options, the
config files' keys, the replica's and the vLLM engine's defaults and arguments all derive from the declarations,
and one value given on the command line is checked once, its text parsed once."""
import argparse
import dataclasses

import pytest

from llmsched.cli import main
from llmsched.cli.commands import COMMANDS, build_parser
from llmsched.cli.real_engine import ENGINE_LIMITS
from llmsched.cli.run_options import COMMAND_GIVEN
from llmsched.engine.replica import ReplicaConfig
from llmsched.hardware.batch_defaults import GpuDefault
from llmsched.run_config import DEFAULTS, RUN_FIELDS, RunConfig, check_field, read_run_config
from llmsched.run_field import API, Parsed, RunField, declared
from llmsched.vllm.launch import ENGINE_SETTINGS, EngineConfig, engine_args, serve_command

NOT_FIELDS = {"--config", "--no-progress", "--help", "--tuned", "--params-file"}  # options about the command, not the run
# (--tuned: files of tuned scheduler parameters, read into --param)


def run_option_actions(parser):
    """The actions of the 'run options' group of a command's parser, by flag."""
    group = next(g for g in parser._action_groups if g.title.startswith("run options"))
    return {flag: a for a in group._group_actions for flag in a.option_strings}


def command_parsers():
    whole = build_parser()
    sub = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub.choices[name] for name in COMMANDS}


def test_every_field_of_a_run_is_declared_and_its_default_passes_its_own_check():
    assert set(RUN_FIELDS) == {f.name for f in dataclasses.fields(RunConfig)}
    for name, spec in RUN_FIELDS.items():
        assert spec.check(name, DEFAULTS[name], API) == DEFAULTS[name], name
        assert spec.help, name


def test_every_declared_field_has_exactly_one_flag_and_every_flag_one_field():
    flags = {name: spec.flag_of(name) for name, spec in RUN_FIELDS.items()}
    assert len(set(flags.values())) == len(flags)
    actions = run_option_actions(command_parsers()["simulate"])
    assert {flag for flag in actions if flag not in NOT_FIELDS} == \
        {flag for name, flag in flags.items() if name not in COMMAND_GIVEN}
    for flag, action in actions.items():
        if flag not in NOT_FIELDS:
            assert action.dest in RUN_FIELDS and flags[action.dest] == flag
            assert action.help == RUN_FIELDS[action.dest].help
    # every command with run options takes them from the same declarations (less the ones it excludes)
    for name, parser in command_parsers().items():
        groups = [g for g in parser._action_groups if g.title.startswith("run options")]
        if groups:
            dests = {a.dest for a in groups[0]._group_actions if a.dest in RUN_FIELDS}
            assert dests == set(RUN_FIELDS) - set(COMMAND_GIVEN) - set(parser.get_default("excluded_run_options"))
    # the fields a command gives its own way: simulate takes --scheduler by its declared flag
    simulate = command_parsers()["simulate"]
    assert any(RUN_FIELDS["scheduler"].flag_of("scheduler") in a.option_strings and a.dest == "scheduler"
               for a in simulate._actions)


def test_a_config_files_keys_are_the_declared_fields(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('rate = 3.0\nmax-num-seqs = 8\nnot_a_field = 1\n')
    with pytest.raises(ValueError, match=f"valid keys: {', '.join(sorted(RUN_FIELDS))}"):
        read_run_config(path)
    path.write_text('rate = 3.0\nmax-num-seqs = 8\ntiers = "a:tbt=0.1"\n')
    data, _ = read_run_config(path)
    assert data["max_num_seqs"] == 8 and isinstance(data["tiers"], Parsed)


def same_field(a: RunField, b: RunField) -> bool:
    """The same field (type, range, choices, flag, vLLM argument) whatever its default and what help says of it."""
    keys = ("kind", "low", "above", "high", "choices", "parse", "flag", "switch", "vllm", "to_vllm")
    return all(getattr(a, k) == getattr(b, k) for k in keys)


def test_the_replica_and_the_vllm_engine_share_the_declarations():
    replica = declared(ReplicaConfig)
    engine = declared(EngineConfig)
    for name, spec in replica.items():
        assert same_field(spec, RUN_FIELDS[name]), name
        # a run's default max_model_len is its model's context length, a replica needs a number; a run's prefix
        # cache is on by default and reaches a replica only when its requests carry content (a bare replica: off);
        # a run's step limits default to its GPU's (hardware/batch_defaults.py), a replica has no GPU
        if name not in ("max_model_len", "prefix_caching", "max_num_seqs", "max_num_batched_tokens"):
            assert spec == RUN_FIELDS[name], name
        elif name.startswith("max_num"):
            assert RUN_FIELDS[name].default == spec.default and isinstance(RUN_FIELDS[name].default, GpuDefault)
    assert set(ENGINE_LIMITS) <= set(engine)
    for name in ENGINE_LIMITS:  # the engine's own defaults (EngineConfig's docstring says why), nothing else
        assert same_field(engine[name], RUN_FIELDS[name]) and engine[name].help == replica[name].help, name


def test_every_vllm_engine_argument_comes_from_a_declared_field_or_a_documented_setting():
    cfg = EngineConfig(model="m", max_num_batched_tokens=512, kv_cache_mb=16)
    args = engine_args(cfg)
    vllm_names = {spec.vllm: name for name, spec in declared(EngineConfig).items()}
    assert None not in vllm_names
    assert set(args) == {"model"} | set(vllm_names) | set(ENGINE_SETTINGS)
    assert args["max_num_batched_tokens"] == 512 and args["kv_cache_memory_bytes"] == 16 << 20
    # the server's command line carries the same arguments
    cmd = serve_command(cfg, 8000)
    for name, value in args.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            assert flag in cmd
        elif value is False:
            assert "--no-" + flag[2:] in cmd
        else:
            assert cmd[cmd.index(flag) + 1] == str(value)


def test_run_field_refuses_a_declaration_without_a_kind():
    with pytest.raises(TypeError):
        RunField(None, "no default, no kind")


def test_one_value_is_checked_once_and_its_text_parsed_once(monkeypatch, tmp_path):
    calls, parsed = [], []
    check, new = RunField.check, Parsed.__new__

    def counting_check(self, name, value, origin):
        calls.append(name)
        return check(self, name, value, origin)

    def counting_new(cls, text, value, parser):
        parsed.append(str(text))
        return new(cls, text, value, parser)

    monkeypatch.setattr(RunField, "check", counting_check)
    monkeypatch.setattr(Parsed, "__new__", counting_new)
    config = tmp_path / "run.toml"
    config.write_text('seed = 3\nnum_requests = 20\n')
    assert main(["simulate", "--config", str(config), "--rate", "3", "--max-num-batched-tokens", "4096",
                 "--tiers", "paid:tbt=0.1:share=0.5,free:tbt=0.5", "--no-progress", "--sketch"]) == 0
    assert sorted(calls) == sorted(["seed", "num_requests", "rate", "max_num_batched_tokens", "tiers",
                                    "keep_gaps", "scheduler"])
    assert parsed == ["paid:tbt=0.1:share=0.5,free:tbt=0.5"]
    # copies keep the parsed text (what meta.json writes stays the text)
    cfg = RunConfig(tiers="a:tbt=0.1")
    again = dataclasses.replace(cfg, rate=3.0)
    assert again.tiers is cfg.tiers and again.tiers == "a:tbt=0.1" and again.tiers.value[0].name == "a"
    assert cfg.with_values(seed=4).tiers is cfg.tiers and dataclasses.asdict(cfg)["tiers"] == "a:tbt=0.1"


def test_with_values_checks_the_changes():
    cfg = RunConfig()
    with pytest.raises(ValueError, match="rate=-1.0"):
        cfg.with_values(rate=-1.0)
    with pytest.raises(ValueError, match="does not apply together with time_scale"):
        cfg.with_values(trace="x.csv", time_scale=2.0, concurrency=4, num_requests=8)
    assert check_field("max_num_seqs", 4) == 4

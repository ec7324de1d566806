"""The command line as a user runs it: smoke runs, outputs, and clear errors for bad input."""
import argparse
import json
import subprocess
import sys

import pytest

from llmsched.cli import main
from llmsched.cli.sweep import parse_rates


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "llmsched.cli", *args], capture_output=True, text=True)


def test_simulate_writes_results(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", "--scheduler", "sarathi", "--workload", "azure-conv", "--rate", "4",
                 "--num-requests", "150", "--out", str(out), "--no-progress", "--plots"]) == 0
    table = capsys.readouterr().out
    assert "sarathi" in table and "ttft_p50 (ms)" in table
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["offered"] == 150
    assert (out / "requests.csv").read_text().count("\n") == 151
    header = (out / "steps.csv").read_text().splitlines()[0]
    assert {"duration", "prefill_tokens", "num_decodes", "context_sum"} <= set(header.split(","))
    assert (out / "latency_cdf.png").stat().st_size > 10_000
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"]["scheduler"] == "sarathi" and meta["scheduler"]["params"]["token_budget"] == 512


def test_compare_with_config_file_and_params(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text('model = "llama-2-7b"\ngpu = "h100"\nnum_requests = 120\nrate = 3.0\n')
    out = tmp_path / "cmp"
    assert main(["compare", "--schedulers", "vllm,sarathi", "--config", str(cfg), "--jobs", "1",
                 "--param", "sarathi.token_budget=256", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "llama-2-7b on h100" in printed
    rows = json.loads((out / "results.json").read_text())
    assert [r["scheduler"] for r in rows] == ["vllm", "sarathi"]
    assert all(r["offered"] == 120 for r in rows)
    assert (out / "kv_usage.png").exists()


def test_sweep_runs_each_scheduler_at_each_rate(tmp_path, capsys):
    out = tmp_path / "sw"
    assert main(["sweep", "--schedulers", "vllm,sarathi", "--rates", "1:3:1", "--workload", "sharegpt",
                 "--num-requests", "80", "--jobs", "1", "--out", str(out), "--no-progress"]) == 0
    rows = json.loads((out / "sweep.json").read_text())
    assert [(r["scheduler"], r["rate"]) for r in rows] == [
        ("vllm", 1.0), ("vllm", 2.0), ("vllm", 3.0), ("sarathi", 1.0), ("sarathi", 2.0), ("sarathi", 3.0)]
    assert (out / "sweep.png").exists()


def test_presets_lists_everything_with_sources(capsys):
    assert main(["presets", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"llama-3-8b", "mistral-7b", "qwen3-14b", "granite-3.1-8b", "llama-3-70b-tp4"} <= set(data["models"])
    assert {"a100", "h100", "h200", "rtx-6000-ada", "a800", "h20", "l20"} <= set(data["gpus"])
    assert {"sharegpt", "azure-conv", "azure-code", "arxiv-summarization", "lmsys"} <= set(data["workloads"])
    assert {"vllm", "vllm-chunked", "sarathi", "orca", "fastertransformer"} <= set(data["schedulers"])
    assert {"random", "round-robin", "least-outstanding", "least-load"} <= set(data["routers"])
    assert all(s["source"] for s in data["schedulers"].values())


@pytest.mark.parametrize("args, message", [
    (["simulate", "--scheduler", "nosuch"], "unknown scheduler 'nosuch'"),
    (["simulate", "--rate", "-1"], "--rate -1.0: must be a positive number"),
    (["simulate", "--trace", "/no/such/trace.csv"], "trace.csv"),
    (["simulate", "--model", "gpt-9"], "gpt-9"),
    (["simulate", "--workload", "nope"], "unknown length preset 'nope'"),
    (["sweep", "--rates", "5:1:1"], "--rates '5:1:1'"),
    (["simulate", "--param", "budget"], "expected KEY=VALUE"),
    (["simulate", "--scheduler", "sarathi", "--param", "chunk=3"], "has no parameter"),
])
def test_bad_input_gets_a_clear_error_and_exit_code_2(args, message):
    res = run_cli(*args, "--no-progress")
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr


def test_unreadable_trace_row_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                   "2023-11-16 18:15:50.9951690,abc,109\n")
    res = run_cli("simulate", "--trace", str(bad), "--no-progress")
    assert res.returncode == 2 and "bad.csv" in res.stderr and "bad.csv:3:" in res.stderr


def test_config_file_cannot_execute_code(tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("scheduler: !!python/object/apply:os.system ['echo pwned']\n")
    res = run_cli("simulate", "--config", str(evil), "--no-progress")
    assert res.returncode == 2 and "not valid YAML" in res.stderr and "pwned" not in res.stdout
    unknown = tmp_path / "typo.toml"
    unknown.write_text('schedular = "vllm"\n')
    res = run_cli("simulate", "--config", str(unknown), "--no-progress")
    assert res.returncode == 2 and "unknown key(s) schedular" in res.stderr


def test_help_explains_every_option():
    res = run_cli("simulate", "--help")
    assert res.returncode == 0
    for opt in ("--max-num-seqs", "--preemption-mode", "--tiers", "--trace", "--warmup", "--sketch"):
        assert opt in res.stdout


def test_parser_of_one_command_is_that_of_all():
    """main builds only the named command's parser (the others' modules are not imported): every command has
    an entry in COMMANDS, and its parser alone parses as the whole one does."""
    from llmsched.cli.commands import COMMAND_NAMES, build_parser
    whole = build_parser()
    choices = next(a.choices for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    assert set(choices) == COMMAND_NAMES
    argv = ["simulate", "--scheduler", "vllm", "--rate", "3", "--tiers", "a:tbt=0.1"]
    assert vars(build_parser("simulate").parse_args(argv)).keys() == vars(whole.parse_args(argv)).keys()
    assert str(build_parser("simulate").parse_args(argv)) == str(whole.parse_args(argv))


def test_parse_rates():
    assert parse_rates("1:8:1") == [1, 2, 3, 4, 5, 6, 7, 8]
    assert parse_rates("0.5:1.5:0.5") == [0.5, 1.0, 1.5]
    assert parse_rates("1,2,4") == [1, 2, 4]


def test_simulate_draws_plots_only_when_asked(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", "--workload", "azure-conv", "--rate", "4", "--num-requests", "30", "--out", str(out),
                 "--no-progress"]) == 0
    assert (out / "requests.csv").exists() and not (out / "latency_cdf.png").exists()
    assert main(["simulate", "--workload", "azure-conv", "--rate", "4", "--num-requests", "30", "--plots",
                 "--no-progress"]) == 2
    assert "--plots draws into --out" in capsys.readouterr().err


def test_the_theory_and_reproduce_tables_name_every_command_module():
    """The sub-commands come from explicit tables: a module of llmsched/cli/ that defines a theory or reproduce
    sub-command (``FUNCTION`` and ``add_arguments``) but is missing from its table would never be offered."""
    import ast
    from pathlib import Path
    import llmsched
    from llmsched.cli.reproduce import REPRODUCE_COMMANDS
    from llmsched.cli.theory import THEORY_COMMANDS
    root = Path(llmsched.__file__).parent / "cli"
    for package, table in (("theory", THEORY_COMMANDS), ("reproduce", REPRODUCE_COMMANDS)):
        commands = set()
        for path in root.glob(f"{package}_*.py"):
            body = ast.parse(path.read_text()).body
            names = {t.id for node in body if isinstance(node, ast.Assign) for t in node.targets
                     if isinstance(t, ast.Name)} | {node.name for node in body if isinstance(node, ast.FunctionDef)}
            if {"FUNCTION", "add_arguments"} <= names:
                commands.add(path.stem)
        assert commands, package
        assert set(table) == commands, package

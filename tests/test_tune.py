"""`llmsched tune`: the search over a scheduler's declared ranges, its files, and the --tuned files other commands
read. Small probes (60 s of arrivals, coarse resolution) keep each search to seconds."""
import json
import os
import subprocess
import sys

import pytest

from llmsched.capacity import ProbeCache, parse_slos
from llmsched.executors import make_executor
from llmsched.run_config import RunConfig
from llmsched.tune.space import parse_ranges, search_space
from llmsched.tune.study import tune

optuna = pytest.importorskip("optuna", reason="llmsched tune needs Optuna (pip install 'llmsched[tune]')")

SLOS = "ttft_p90<=2s,tbt_p99<=100ms"
BASE = RunConfig(scheduler="sarathi", rate=2.0, duration=60.0)


def run_cli(*args, cwd=None):
    env = {**os.environ}
    return subprocess.run([sys.executable, "-c", "import sys; from llmsched.cli import main; sys.exit(main())",
                           *args], capture_output=True, text=True, env=env, cwd=cwd)


def summary(result):
    return [(t.number, t.values, t.capacity, t.probes) for t in result.trials]


def test_trial_zero_is_the_untuned_setting_and_a_seed_gives_one_answer():
    params = search_space(BASE, ["token_budget"])
    assert params[0].start == 512 and not params[0].run_field
    slos = parse_slos(SLOS)
    a = tune(BASE, slos, params, budget=4, seed=3, resolution=0.1)
    b = tune(BASE, slos, params, budget=4, seed=3, resolution=0.1)
    assert summary(a) == summary(b)
    assert a.trials[0].origin == "untuned" and a.trials[0].values == {"token_budget": 512}
    assert len({t.values["token_budget"] for t in a.trials}) > 1  # TPE proposed other budgets
    assert a.best.capacity >= a.untuned.capacity > 0


def test_local_pool_and_ray_give_the_same_answer(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed")
    params = search_space(BASE, None, parse_ranges(["token_budget=128:2048", "max_num_seqs=64:512"]))
    assert {p.name for p in params} == {"token_budget", "max_num_seqs"}
    assert [p.run_field for p in params] == [False, True]
    slos = parse_slos(SLOS)
    answers = []
    for kind in ("local", "ray"):
        with make_executor(kind, jobs=2) as ex:  # no cache: each executor runs every probe itself
            answers.append(summary(tune(BASE, slos, params, budget=4, seed=1, resolution=0.1, executor=ex)))
    assert answers[0] == answers[1]


def test_cli_writes_best_history_and_plot_and_other_commands_read_the_best(tmp_path):
    out = tmp_path / "t"
    cache = tmp_path / "cache"
    p = run_cli("tune", "--scheduler", "sarathi", "--slo", SLOS, "--duration", "60", "--budget", "3",
                "--resolution", "0.1", "--params", "token_budget", "--out", str(out), "--cache", str(cache),
                "--check-on", "seed=5", "--no-progress", "--jobs", "1")
    assert p.returncode == 0, p.stderr
    best = json.loads((out / "best.json").read_text())
    history = json.loads((out / "history.json").read_text())
    assert best["scheduler"] == "sarathi" and set(best["scheduler_params"]) == {"token_budget"}
    assert best["capacity"] == max(t["capacity"] or 0 for t in history["trials"])
    assert history["trials"][0]["origin"] == "untuned" and len(history["trials"]) == 3
    assert history["checks"][0]["check_on"] == "seed=5" and history["checks"][0]["seeds"] == [5]
    assert (out / "tune.png").stat().st_size > 0  # drawn with the readability check on (conftest)
    # capacity with --tuned measures the tuned setting: its probes are the tune's best trial's, from the cache
    budget = best["scheduler_params"]["token_budget"]
    c = run_cli("capacity", "--tuned", str(out / "best.json"), "--slo", SLOS, "--duration", "60",
                "--resolution", "0.1", "--cache", str(cache), "--no-progress", "--jobs", "1", "--out",
                str(tmp_path / "c"))
    assert c.returncode == 0, c.stderr
    cap = json.loads((tmp_path / "c" / "capacity.json").read_text())
    used = cap["base_configs"]["sarathi"]["scheduler_params"]["token_budget"]
    assert used == budget
    # in compare, the file applies to its scheduler only, and --param on the command line wins over it
    from llmsched.cli.commands import build_parser
    from llmsched.cli.run_options import run_configs
    args = build_parser("compare").parse_args(["compare", "--schedulers", "sarathi,vllm", "--tuned",
                                               str(out / "best.json"), "--param", "sarathi.watermark=0.02"])
    cfgs = {c.scheduler: c for c in run_configs(args, ["sarathi", "vllm"])}
    assert cfgs["sarathi"].scheduler_params == {"token_budget": budget, "watermark": 0.02}
    assert cfgs["vllm"].scheduler_params == {}
    args = build_parser("compare").parse_args(["compare", "--schedulers", "sarathi", "--tuned",
                                               str(out / "best.json"), "--param", "token_budget=77"])
    assert run_configs(args, ["sarathi"])[0].scheduler_params["token_budget"] == 77


@pytest.mark.parametrize("args, message", [
    (["--budget", "0"], "--budget 0: give at least 1"),
    (["--params", "watermark"], "'watermark' is a parameter of 'sarathi' but not a tunable one"),
    (["--params", "bogus"], "'bogus' is not a parameter of 'sarathi' nor a run field"),
    (["--range", "token_budget=0:100"], "0 is not a valid token_budget for 'sarathi'"),
    (["--range", "token_budget=abc"], "write NAME=LOW:HIGH"),
    (["--check-on", "seed"], "write KEY=VALUE pairs"),
    (["--check-on", "bogus=1"], "unknown key(s) bogus"),
])
def test_bad_input_is_one_line_naming_the_fix(args, message):
    p = run_cli("tune", "--scheduler", "sarathi", "--duration", "60", "--no-cache", *args)
    assert p.returncode == 2
    assert message in p.stderr and p.stderr.count("\n") == 1, p.stderr


def test_a_scheduler_without_tunable_parameters_is_refused():
    p = run_cli("tune", "--scheduler", "orca", "--no-cache")
    assert p.returncode == 2 and "declares no tunable parameters" in p.stderr and "sarathi" in p.stderr


def test_slos_no_rate_meets_say_so_with_the_closest_probe(tmp_path):
    p = run_cli("tune", "--scheduler", "sarathi", "--slo", "ttft_p50<=1ms", "--duration", "60", "--budget", "2",
                "--params", "token_budget", "--resolution", "0.2", "--out", str(tmp_path), "--no-cache",
                "--no-progress", "--jobs", "1")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "no setting of sarathi meets the SLOs" in p.stderr and "closest probe: trial" in p.stderr
    assert "ttft_p50" in p.stderr and (tmp_path / "history.json").exists()


def test_a_tuned_file_for_another_scheduler_or_not_a_tuned_file_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    p = run_cli("capacity", "--tuned", str(bad), "--duration", "60", "--no-cache")
    assert p.returncode == 2 and "not a tuned-parameters file" in p.stderr
    good = tmp_path / "best.json"
    good.write_text(json.dumps({"kind": "llmsched-tuned", "version": 1, "scheduler": "sarathi",
                                "scheduler_params": {"token_budget": 256}, "run": {}}))
    p = run_cli("capacity", "--tuned", str(good), "--scheduler", "vllm", "--duration", "60", "--no-cache")
    assert p.returncode == 2 and "is for scheduler 'sarathi', which is not among this run's (vllm)" in p.stderr


def test_the_probe_cache_serves_a_repeated_search(tmp_path):
    params = search_space(BASE, ["token_budget"])
    slos = parse_slos(SLOS)
    cache = ProbeCache(tmp_path)
    first = tune(BASE, slos, params, budget=2, seed=0, resolution=0.1, cache=cache)
    again = tune(BASE, slos, params, budget=2, seed=0, resolution=0.1, cache=cache)
    assert summary(first) == summary(again) and again.probe_runs == sum(t.probes for t in again.trials)

"""What the command line says at the limits: warnings and refusals in one line, before any run, as a
user sees them (a subprocess: stderr exactly as printed)."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def llmsched(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "llmsched", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("where", ["cli", "config"])
def test_a_router_for_one_replica_is_said_to_change_nothing(where, tmp_path):
    if where == "cli":
        args = ["--router", "pab"]
    else:
        (tmp_path / "run.yaml").write_text("router: pab\n")
        args = ["--config", str(tmp_path / "run.yaml")]
    p = llmsched("simulate", *args, "--num-requests", "10", "--no-progress")
    assert p.returncode == 0, p.stderr
    named = "--router pab" if where == "cli" else f"{tmp_path / 'run.yaml'}:1: router = \"pab\""
    assert p.stderr.strip().splitlines() == [
        f"llmsched simulate: warning: {named}: a router picks among replicas and this run has one, so it changes "
        f"nothing (PAB's admission control on one replica: --scheduler fairbatching-pab); give --replicas N (N > 1) "
        f"or drop it"]
    p = llmsched("simulate", *args, "--replicas", "2", "--num-requests", "10", "--no-progress")
    assert p.returncode == 0 and p.stderr == ""


def test_a_plan_with_no_feasible_candidate_exits_non_zero(tmp_path):
    p = llmsched("plan", "--tp", "3", "--target-rate", "2", "--gpus", "a100,h100", "--num-requests", "50",
                 "--no-progress", "--no-cache")
    assert p.returncode == 1, p.stderr
    assert "no candidate can run: all 2 were pruned before any probe (tp; see the table)" in p.stdout
    assert "tp=3 must divide the 32 attention heads" in p.stdout


def test_capacity_runs_the_config_files_scheduler(tmp_path):
    (tmp_path / "run.toml").write_text('scheduler = "vllm"\n')
    p = llmsched("capacity", "--config", str(tmp_path / "run.toml"), "--duration", "20", "--resolution", "0.5",
                 "--max-rate", "2", "--rate", "1", "--jobs", "1", "--no-cache", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "vllm" in p.stdout and "sarathi" not in p.stdout


@pytest.mark.parametrize("command", [["simulate"], ["compare", "--schedulers", "vllm"], ["sweep", "--rates", "1"],
                                     ["capacity"]])
def test_an_output_folder_that_is_a_file_is_refused_before_any_run(command, tmp_path, monkeypatch, capsys):
    import llmsched.experiment
    from llmsched.cli import main

    def no_run(*args, **kwargs):
        raise AssertionError("a run started")
    monkeypatch.setattr(llmsched.experiment, "run", no_run)
    monkeypatch.setattr(llmsched.experiment, "build_replicas", no_run)
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    for out, what in ((taken, "a file"), (taken / "sub", f"{taken} is a file")):
        assert main([*command, "--out", str(out), "--num-requests", "20", "--no-progress"]) == 2
        assert capsys.readouterr().err == f"llmsched {command[0]}: error: --out {out}: {what}, not a folder; give a " \
                                          f"folder (made if missing)\n"
    assert taken.read_text() == "mine\n"


def test_ctrl_c_in_capacity_ends_in_one_line_and_status_130(tmp_path):
    """Probes of 10 simulated hours, so the Ctrl-C lands mid-search: with 600 s probes the whole search took 3.8 s on
    a quiet machine and the Ctrl-C, sent 3 s after the pool started, raced the command's own exit (status 0, -2 or
    1 by where it landed)."""
    # Ctrl-C at its default, as for a terminal's foreground command: a runner that ignores SIGINT (CI's did) passes
    # that on, and a command that ignores Ctrl-C rightly goes on (tests/test_executor_interrupt.py)
    proc = subprocess.Popen([sys.executable, "-m", "llmsched", "capacity", "--schedulers", "sarathi,vllm",
                             "--duration", "36000", "--jobs", "2", "--no-cache", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not children.read_text().split():
        time.sleep(0.2)  # until the probes' process pool runs
    assert proc.poll() is None and children.read_text().split(), "the probes never started in their pool"
    time.sleep(3)  # the pool's workers past their imports (under load a worker still importing dies with a traceback)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends: the command and its workers
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err  # what it printed instead, to tell a race from a failure
    assert err.splitlines() == ["llmsched capacity: interrupted"]


@pytest.mark.parametrize("package", ["tokenizers", "transformers"])
def test_make_model_without_its_optional_packages_says_what_to_install(package, tmp_path, monkeypatch, capsys):
    from llmsched.cli import main
    monkeypatch.setitem(sys.modules, package, None)  # as if not installed: importing it fails
    assert main(["make-model", "--out", str(tmp_path / "tiny")]) == 2
    assert capsys.readouterr().err == (f"llmsched make-model: error: make-model needs the {package!r} package, which "
                                       f"comes with vLLM: install it with scripts/install.sh (or pip install "
                                       f"tokenizers transformers)\n")


def test_a_horizon_accounts_every_offered_request(tmp_path):
    """--horizon 1e-9 wrote 1 row of 20 offered requests and said nothing of the other 19."""
    import json
    out = tmp_path / "run"
    p = llmsched("simulate", "--num-requests", "20", "--horizon", "1e-9", "--out", str(out), "--no-progress",
                 "--latency-boundary", "engine")  # at the client, the first request reaches the engine after 1e-9 s
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip().splitlines() == [
        "llmsched simulate: warning: horizon 1e-09 s: 19 of 20 requests arrive after it and were not run (meta.json: "
        "after_horizon); the 1 that entered are in requests.csv, those in flight as unfinished"]
    meta = json.loads((out / "meta.json").read_text())
    rows = (out / "requests.csv").read_text().splitlines()[1:]
    assert (meta["offered"], meta["after_horizon"], len(rows)) == (20, 19, 1)


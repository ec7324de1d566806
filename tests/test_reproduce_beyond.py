"""`llmsched reproduce beyond --fast`: competitors tuned, then measured on held-out seeds and another workload;
the table, JSON, CSV and figure written, goodput's ablation measured; a second run reusing the first's tuned
settings skips the tuning."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("optuna", reason="reproduce beyond tunes with Optuna (pip install 'llmsched[tune]')")


def run_cli(*args):
    return subprocess.run([sys.executable, "-c", "import sys; from llmsched.cli import main; sys.exit(main())",
                           *args], capture_output=True, text=True, env={**os.environ})


def test_fast_run_tunes_measures_and_reports(tmp_path):
    out, cache = tmp_path / "b", tmp_path / "cache"
    p = run_cli("reproduce", "beyond", "--fast", "--schedulers", "sarathi,goodput", "--out", str(out), "--cache",
                str(cache), "--jobs", "2", "--ablation")
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "beyond.json").read_text())
    rows = {r["scheduler"]: r for r in data["rows"]}
    assert set(rows) == {"sarathi", "goodput"}
    for r in rows.values():
        assert r["tuned_on"]["tuned"] >= r["tuned_on"]["untuned"] > 0  # trial 0 is the untuned setting
        assert r["held_out"]["tuned"] > 0 and r["other"]["tuned"] > 0
    assert rows["goodput"]["best_values"]["ttft_target"] > 0
    ablation = rows["goodput"]["ablation"]  # goodput with each lever removed, measured on the held-out seeds
    assert len(ablation) == 7 and all(c is None or c > 0 for c in ablation.values()) and not rows["sarathi"]["ablation"]
    assert "| lever removed | sharegpt-a100 |" in (out / "beyond.md").read_text()
    assert data["bounds"]["sharegpt-a100"] > rows["sarathi"]["tuned_on"]["tuned"]  # the sound bound is above
    assert "goodput / best tuned competitor (sarathi) on the held-out seeds" in p.stdout
    for name in ("beyond.csv", "beyond.md", "beyond.png"):
        assert (out / name).stat().st_size > 0
    again = run_cli("reproduce", "beyond", "--fast", "--schedulers", "sarathi,goodput", "--out", str(tmp_path / "c"),
                    "--cache", str(cache), "--reuse", str(out / "beyond.json"), "--no-untuned-checks")
    assert again.returncode == 0, again.stderr
    assert again.stdout.count(", reused)") == 2
    rerun = {r["scheduler"]: r for r in json.loads((tmp_path / "c" / "beyond.json").read_text())["rows"]}
    assert rerun["goodput"]["held_out"] == {"tuned": rows["goodput"]["held_out"]["tuned"]}


def test_unknown_setting_is_one_line():
    p = run_cli("reproduce", "beyond", "--settings", "nowhere")
    assert p.returncode == 2 and "unknown setting(s) nowhere" in p.stderr and p.stderr.count("\n") == 1


def test_a_non_positive_other_duration_is_one_line():
    p = run_cli("reproduce", "beyond", "--other-duration", "0")
    assert p.returncode == 2 and "--other-duration 0: give seconds > 0" in p.stderr and p.stderr.count("\n") == 1

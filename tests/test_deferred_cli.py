"""`llmsched theory deferred-prefill` and `llmsched reproduce deferred-prefill --fast`."""
import json

import pytest

from llmsched.cli import main
from llmsched.metrics.writers import _write_steps
from llmsched.reproduce.deferred_prefill_runs.closed_loop import run_closed_loop
from llmsched.reproduce.deferred_prefill_runs.request_model import DecodeGeometric

from test_deferred_scheduler import SPEC, linear_cfg


@pytest.mark.parametrize("preset,K_star,rho", [("g-exact", 26, 13.090), ("l-exact", 58, 21.040)])
def test_theory_reproduces_table1_predictions_from_appendix_a(capsys, preset, K_star, rho):
    assert main(["theory", "deferred-prefill", "--preset", preset, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["K_star"] == K_star and round(out["rho_K_star"], 2) == pytest.approx(rho, abs=0.005)


def test_theory_fits_a_preset_pair_and_prints_a_table(capsys):
    assert main(["theory", "deferred-prefill", "--model", "granite-3.1-8b", "--C", "331", "--K", "1,26"]) == 0
    text = capsys.readouterr().out
    assert "K* =" in text and "fit R²" in text and "<- K*" in text


def test_theory_fits_measured_steps(tmp_path, capsys):
    res = run_closed_loop(linear_cfg(32, scheduler="deferred-prefill", scheduler_params={"K": 6}),
                          DecodeGeometric(285, 20), 400)
    _write_steps(res.steps, tmp_path / "steps.csv")
    assert main(["theory", "deferred-prefill", "--steps", str(tmp_path / "steps.csv"), "--C", "32",
                 "--mean-output", "21", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for name, value in SPEC.as_dict().items():
        assert out["timing"][name] == pytest.approx(value, rel=1e-3, abs=1e-7)
    assert out["fit"]["prefill"]["r2"] > 0.999


@pytest.mark.parametrize("argv,match", [
    (["--timing", "1,2"], "four numbers"),
    (["--preset", "g-exact", "--timing", "1,1,1,1"], "one timing source"),
    (["--mean-output", "0.5"], "mean_output"),
    (["--C", "10", "--K", "11"], "1..C"),
])
def test_theory_bad_input_exits_2(capsys, argv, match):
    assert main(["theory", "deferred-prefill", *argv]) == 2
    assert match in capsys.readouterr().err


def test_reproduce_fast(tmp_path, capsys):
    assert main(["reproduce", "deferred-prefill", "--fast", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())["results"]
    paper = next(r for r in results if r["timing"] == "paper")
    assert paper["K_star_predicted"] == 26
    for row in paper["rows"]:                       # Theorem 1 holds in the simulator for the paper's constants
        assert row["throughput"] == pytest.approx(row["predicted"], rel=0.03)
    assert paper["rho_measured_at_predicted"] > 1.1 * paper["rho_measured_1"]
    roof = next(r for r in results if r["timing"] == "roofline")
    assert roof["rho_measured_at_predicted"] > roof["rho_measured_1"]
    assert (tmp_path / "results.csv").read_text().count("\n") == sum(len(r["rows"]) for r in results) + 1
    assert "paper (ShareGPT)" in capsys.readouterr().out


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_reproduce_with_K_grid_without_1_keeps_the_baseline(tmp_path, capsys):
    """`reproduce deferred-prefill --K 5` crashed with KeyError: 1: K = 1 is always run."""
    assert main(["reproduce", "deferred-prefill", "--models", "granite", "--timings", "paper", "--workloads",
                 "synthetic", "--K", "5", "--requests", "1013", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text())["results"][0]
    assert {r["K"] for r in result["rows"]} == {1, 5, result["K_star_predicted"]}
    assert result["rho_measured_1"] > 0

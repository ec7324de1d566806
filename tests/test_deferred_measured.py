"""Mohanty et al. Table 1 from measured step times: Vidur's A100 operator profile + roofline attention + vLLM's public
per-step host cost (llmsched/reproduce/deferred_prefill_runs/measured_step_time.py), and `reproduce deferred-prefill
--parts sensitivity`."""
import csv
import json

import numpy as np
import pytest

from llmsched.batchtime.base import Batch
from llmsched.batchtime.profiled import LAYER_OPS
from llmsched.cli import main
from llmsched.reproduce.deferred_prefill_runs.measured_step_time import (HOST_PER_SEQ, HOST_STEP, PROFILE,
                                                                         MeasuredVLLMStepTime, layer_profile)
from llmsched.schedulers.deferred.timing_constants import timing_from_batch_time


@pytest.fixture
def profile(shared_data):
    path = shared_data / "profiles" / PROFILE
    if not path.exists():
        pytest.skip(f"{PROFILE} is absent from ../shared/data/profiles")
    return path


def test_layer_time_is_the_profile_and_granite_rescales_only_the_mlp(profile):
    with profile.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["num_tensor_parallel_workers"] == "1"]
    row = next(r for r in rows if r["num_tokens"] == "256")
    ops = {op: float(row[f"time_stats.{op}.median"]) / 1e3 for op in LAYER_OPS}
    assert layer_profile(str(profile), "llama-3-8b")(256) == pytest.approx(sum(ops.values()), rel=1e-9)
    mlp = sum(ops[op] for op in ("mlp_up_proj", "mlp_act", "mlp_down_proj"))
    granite = layer_profile(str(profile), "granite-3.1-8b")(256)
    assert granite == pytest.approx(sum(ops.values()) - mlp * (1 - 12800 / 14336), rel=1e-9)
    with pytest.raises(ValueError, match="same hidden size and heads"):
        layer_profile(str(profile), "llama-2-7b")


def test_step_time_adds_host_cost_per_step_and_sequence(profile):
    on = MeasuredVLLMStepTime("granite-3.1-8b", profile)
    off = MeasuredVLLMStepTime("granite-3.1-8b", profile, host_scale=0.0)
    for batch in (Batch([285] * 3, [0] * 3, []), Batch([], [], [500] * 300)):
        rows = len(batch.prefill_new) + len(batch.decode_ctx)
        assert on.step_time(batch) - off.step_time(batch) == pytest.approx(HOST_STEP + rows * HOST_PER_SEQ)
    # decode grows with context (attention reads the KV cache), prefill with prompt tokens
    assert off.step_time(Batch([], [], [900] * 100)) > off.step_time(Batch([], [], [300] * 100))
    assert off.step_time(Batch([570], [0], [])) > off.step_time(Batch([285], [0], []))


def test_fitted_constants_are_affine_like_figs_2_3_and_give_a_positive_K_star(profile):
    from llmsched.schedulers.deferred.throughput import exact_throughput, optimal_K
    fit = timing_from_batch_time(MeasuredVLLMStepTime("granite-3.1-8b", profile), 331, 285, 1 / 201, 331 * 1024)
    assert fit.prefill.r2 > 0.999 and fit.decode.r2 > 0.98      # the paper: affine in batch size (§4.4)
    t = fit.timing
    assert t.c_p > 0.005 and t.c_d > 0.005 and t.t_d > 0
    rho = exact_throughput(331, 1 / 201, t)
    assert 1 < optimal_K(rho) < 331 and rho[optimal_K(rho)] > 1.03 * rho[1]


def test_reproduce_sensitivity_separates_timing_shape_from_length_distribution(profile, tmp_path, capsys):
    """The linear model of the fitted constants is Theorem 1's own model: on geometric outputs its simulated
    throughput matches Theorem 1; the measured step times and non-geometric outputs both move away from it."""
    assert main(["reproduce", "deferred-prefill", "--parts", "sensitivity", "--fast", "--profile", str(profile),
                 "--out", str(tmp_path)]) == 0
    sens = json.loads((tmp_path / "results.json").read_text())["sensitivity"]
    control = next(h for h in sens["held_out"] if h["workload"] == "synthetic")
    for row in control["rows"]:
        assert row["linear_throughput"] == pytest.approx(row["predicted"], rel=0.02)
    assert {h["workload"] for h in sens["held_out"]} == {"synthetic", "sharegpt", "lmsys", "azure-conv"}
    quantities = {s["quantity"] for s in sens["sweeps"]}
    assert {"c_p ×", "C", "mean output", "host cost ×", "prompt d_0"} == quantities
    assert sens["most_sensitive"] in quantities
    cp = next(s for s in sens["sweeps"] if s["key"] == "cp_scale")
    gains = [r["gain"] for r in cp["rows"]]
    assert gains == sorted(gains)                                # more fixed prefill cost, more to gain
    need = sens["paper_gain_needs"]
    assert need["gain"] == pytest.approx(0.135, abs=1e-3)
    assert "most sensitive" in capsys.readouterr().out


def test_reproduce_measured_table_rows(profile, tmp_path):
    assert main(["reproduce", "deferred-prefill", "--parts", "table", "--models", "granite", "--timings",
                 "measured", "--workloads", "synthetic", "--K", "1,26", "--requests", "1013", "--profile",
                 str(profile), "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "results.json").read_text())["results"][0]
    assert result["timing"] == "measured" and result["constants"]["c_p"] > 0
    assert all(np.isfinite(r["predicted_prop1"]) for r in result["rows"])

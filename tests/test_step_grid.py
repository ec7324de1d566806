"""The roofline's GPU part against our own H200 step grid (tests/data/gpu_runs/h200-step-grid.csv, see its
README): one engine step of Llama-3.1-8B and Qwen3-30B-A3B, as CUDA graphs, per kind of step, with and without
attention. Nothing is fitted to the grid (efficiencies: Vidur's H100 profiles, chip family of the H200); the
bounds are today's errors (docs/batch-time.md, "Against our own H200 step grid"), so a change that worsens them
fails here."""
from pathlib import Path

import pytest

from llmsched.validate.step_grid import gpu_part, grid_errors, load_grid, predict_grid

RUNS = Path(__file__).parent / "data" / "gpu_runs"
# (model, kind, mode) -> (median |error| %, max |error| %) not to be exceeded
DENSE = (13.0, 25.0)
MOE = (58.0, 65.0)


@pytest.fixture(scope="module")
def rows():
    points = load_grid(RUNS / "h200-step-grid.csv")
    models = {"llama-3.1-8b": gpu_part(RUNS / "h200-llama-3.1-8b", "h200"),
              "qwen3-30b-a3b": gpu_part(RUNS / "h200-qwen3-30b-a3b", "h200")}
    return grid_errors(points, predict_grid(points, models))


def test_every_kind_and_mode_is_checked(rows):
    assert {(r["model"], r["kind"], r["mode"]) for r in rows} == {
        (m, k, mode) for m in ("llama-3.1-8b", "qwen3-30b-a3b") for k in ("prefill", "chunk", "decode", "mixed")
        for mode in ("full", "noattn")}
    assert sum(r["points"] for r in rows) == 196


@pytest.mark.parametrize("model, bound", [("llama-3.1-8b", DENSE), ("qwen3-30b-a3b", MOE)])
def test_errors_stay_within_todays_bounds(rows, model, bound):
    for r in rows:
        if r["model"] == model:
            assert r["median_abs_pct"] <= bound[0] and r["max_abs_pct"] <= bound[1], r


def test_the_dense_decode_without_attention_is_within_ten_percent(rows):
    r = next(r for r in rows if (r["model"], r["kind"], r["mode"]) == ("llama-3.1-8b", "decode", "noattn"))
    assert r["median_abs_pct"] <= 10 and r["max_abs_pct"] <= 10


def test_a_grid_with_a_missing_column_is_refused(tmp_path):
    bad = tmp_path / "grid.csv"
    bad.write_text("model,kind,mode,chunks,decodes,median_s\nx,decode,full,,1,0.1\n")
    with pytest.raises(ValueError, match=r"grid.csv: missing column\(s\) context"):
        load_grid(bad)
    bad.write_text("model,kind,mode,chunks,decodes,context,median_s\nx,decode,full,,1,256,-1\n")
    with pytest.raises(ValueError, match="grid.csv line 2: median_s must be positive"):
        load_grid(bad)

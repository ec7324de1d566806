"""The roofline's GPU part against our own H200 and H100 step grids (tests/data/gpu_runs/{h200,h100}-step-grid.csv,
see their README): one engine step of Llama-3.1-8B and Qwen3-30B-A3B, as CUDA graphs, per kind of step, with and
without attention. Nothing is fitted to the grids (efficiencies: Vidur's H100 profiles, the chip family of both);
the bounds are each GPU's errors today (docs/batch-time.md, "Against our own H200 and H100 step grids"), so a
change that worsens them fails here."""
from pathlib import Path

import pytest

from llmsched.validate.step_grid import gpu_part, grid_errors, load_grid, predict_grid

RUNS = Path(__file__).parent / "data" / "gpu_runs"
# gpu -> the runs whose config.json build the models, and per model (median |error| %, max |error| %) of every
# (kind, mode) row not to be exceeded
GRIDS = {
    "h200": {"runs": {"llama-3.1-8b": "h200-llama-3.1-8b", "qwen3-30b-a3b": "h200-qwen3-30b-a3b"},
             "bounds": {"llama-3.1-8b": (13.0, 25.0), "qwen3-30b-a3b": (58.0, 65.0)}},
    "h100": {"runs": {"llama-3.1-8b": "h100-llama-3.1-8b", "qwen3-30b-a3b": "h100-qwen3-30b-a3b-warm"},
             "bounds": {"llama-3.1-8b": (12.0, 20.0), "qwen3-30b-a3b": (50.0, 62.0)}},
}


@pytest.fixture(scope="module", params=list(GRIDS))
def gpu(request):
    return request.param


@pytest.fixture(scope="module")
def rows(gpu):
    points = load_grid(RUNS / f"{gpu}-step-grid.csv")
    models = {name: gpu_part(RUNS / run, gpu) for name, run in GRIDS[gpu]["runs"].items()}
    return grid_errors(points, predict_grid(points, models))


def test_every_kind_and_mode_is_checked(rows):
    assert {(r["model"], r["kind"], r["mode"]) for r in rows} == {
        (m, k, mode) for m in ("llama-3.1-8b", "qwen3-30b-a3b") for k in ("prefill", "chunk", "decode", "mixed")
        for mode in ("full", "noattn")}
    assert sum(r["points"] for r in rows) == 196


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen3-30b-a3b"])
def test_errors_stay_within_todays_bounds(gpu, rows, model):
    median, most = GRIDS[gpu]["bounds"][model]
    for r in rows:
        if r["model"] == model:
            assert r["median_abs_pct"] <= median and r["max_abs_pct"] <= most, r


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

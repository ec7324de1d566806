import csv

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmsched.batchtime import (BASE_TERMS, BATCH_TIME_MODELS, Batch, LinearBatchTime, RooflineBatchTime,
                                make_batch_time_model)
from llmsched.batchtime.linear import INFERMAX_COEFFICIENTS, batch_columns, composition_grid, nnls
from llmsched.batchtime.profiled import FIG6A_MISTRAL_RTX6000ADA, chunked_prefill_mean_time
from llmsched.metrics.steps import STEP_FIELDS

MS = 1e-3


# --- realistic magnitudes --------------------------------------------------------------------------------------
@pytest.mark.parametrize("calibration", ["auto", "off"])
def test_llama3_8b_on_a100_matches_public_magnitudes(calibration):
    rt = RooflineBatchTime("llama-3-8b", "a100", calibration=calibration)
    assert 15 * MS <= rt.decode_time(32, 1024) <= 25 * MS
    assert 40 * MS <= rt.prefill_time(512) <= 60 * MS


def test_fig6a_mistral_rtx6000ada():
    """Bari et al. §1.6: mean batch time of 2048-token prompts in chunks of c, 22.7 ms (c=64) to 74.7 ms (c=1024)."""
    rt = RooflineBatchTime("mistral-7b", "rtx-6000-ada")
    for chunk, measured_ms in FIG6A_MISTRAL_RTX6000ADA:
        assert chunked_prefill_mean_time(rt, 2048, chunk) / MS == pytest.approx(measured_ms, rel=0.12)


def test_infermax_vectors_reproduced():
    """Kim et al. §2.2 worked values (ms) from InferMax's Vidur-fitted coefficients."""
    seven = LinearBatchTime.from_infermax(**INFERMAX_COEFFICIENTS["llama-2-7b/a100"])
    cases = [(Batch([4096], [0], []), 345.48), (Batch([512] * 8, [0] * 8, []), 267.04),
             (Batch([512], [3584], []), 58.54), (Batch([], [], [1000] * 100), 38.41), (Batch([], [], [1]), 2.775),
             (Batch([512], [0], [1000] * 100), 74.12)]
    for batch, expected in cases:
        assert seven.step_time(batch) / MS == pytest.approx(expected, abs=0.01)
    seventy = LinearBatchTime.from_infermax(**INFERMAX_COEFFICIENTS["llama-3-70b-tp4/a100"])
    assert seventy.step_time(Batch([16384], [0], [])) / MS == pytest.approx(3576.5, abs=0.1)
    assert seventy.step_time(Batch([], [], [1000] * 100)) / MS == pytest.approx(48.11, abs=0.01)


def test_tensor_parallel_speeds_up_and_pays_all_reduce():
    tp1 = RooflineBatchTime("llama-3-70b", "a100")
    tp4 = RooflineBatchTime("llama-3-70b-tp4", "a100")
    assert tp4.prefill_time(2048) < tp1.prefill_time(2048) / 2
    no_comm = RooflineBatchTime("llama-3-70b-tp4", "a100", allreduce_latency=0.0, comm_eff=1.0)
    assert tp4.prefill_time(2048) > no_comm.prefill_time(2048)


def test_empty_batch_takes_no_time():
    for kind in ("roofline", "roofline-staircase"):
        assert make_batch_time_model(kind, "llama-3-8b", "a100").step_time(Batch()) == 0.0
    assert LinearBatchTime(0.01, 1e-4).step_time(Batch()) == 0.0


# --- monotonicity (hypothesis) ---------------------------------------------------------------------------------
MODELS_UNDER_TEST = [
    RooflineBatchTime("llama-3-8b", "a100"),
    RooflineBatchTime("llama-3-70b-tp4", "h100", staircase=True),
    RooflineBatchTime("mistral-7b", "rtx-6000-ada", sharpness=float("inf")),
    RooflineBatchTime("qwen3-14b", "h20", sharpness=3.0),
    LinearBatchTime.from_infermax(**INFERMAX_COEFFICIENTS["llama-2-7b/a100"]),
    LinearBatchTime.from_rad(18.4 * MS, 0.0346 * MS, 13.4e-9, 0.15e-6, 0.0, staircase_t_col=128),
]

@st.composite
def random_batch(draw):
    prefill_new = draw(st.lists(st.integers(1, 4096), max_size=4))
    prefill_ctx = [draw(st.integers(0, 16384)) for _ in prefill_new]
    decode_ctx = draw(st.lists(st.integers(1, 16384), max_size=64))
    if not prefill_new and not decode_ctx:
        decode_ctx = [1]
    return Batch(prefill_new, prefill_ctx, decode_ctx)


@settings(max_examples=60, deadline=None)
@given(batch=random_batch(), which=st.integers(0, len(MODELS_UNDER_TEST) - 1), extra=st.integers(1, 300),
       data=st.data())
def test_monotone_in_tokens_and_context(batch, which, extra, data):
    bt = MODELS_UNDER_TEST[which]
    base = bt.step_time(batch)
    assert base > 0
    grown = []
    if batch.prefill_new:
        i = data.draw(st.integers(0, len(batch.prefill_new) - 1))
        more_new = list(batch.prefill_new)
        more_new[i] += extra
        more_ctx = list(batch.prefill_ctx)
        more_ctx[i] += extra
        grown += [Batch(more_new, batch.prefill_ctx, batch.decode_ctx),
                  Batch(batch.prefill_new, more_ctx, batch.decode_ctx)]
    if batch.decode_ctx:
        j = data.draw(st.integers(0, len(batch.decode_ctx) - 1))
        longer = list(batch.decode_ctx)
        longer[j] += extra
        grown.append(Batch(batch.prefill_new, batch.prefill_ctx, longer))
    grown += [Batch(batch.prefill_new, batch.prefill_ctx, batch.decode_ctx + [extra]),
              Batch(batch.prefill_new + [extra], batch.prefill_ctx + [0], batch.decode_ctx)]
    for bigger in grown:
        assert bt.step_time(bigger) >= base * (1 - 1e-12)


# --- staircase ---------------------------------------------------------------------------------------------------
def test_staircase_steps_at_t_col_multiples():
    rt = RooflineBatchTime("llama-3-8b", "a100", staircase=True)
    t_col = rt.t_col
    assert t_col == 128
    for k in range(1, 8):
        lo, hi = k * t_col, (k + 1) * t_col
        compute = [rt.layer_components(n)[0] for n in (lo + 1, lo + t_col // 2, hi)]
        assert compute[0] == compute[1] == compute[2]                      # flat inside the tile
        assert rt.layer_components(lo + 1)[0] > rt.layer_components(lo)[0]  # a step just past the multiple
    # On whole steps, in the compute-bound regime: the jump at a multiple dwarfs the slope inside a tile.
    jump = rt.prefill_time(1025) - rt.prefill_time(1024)
    inside = rt.prefill_time(1152) - rt.prefill_time(1025)
    assert jump > 5 * inside
    plain = RooflineBatchTime("llama-3-8b", "a100")
    assert plain.prefill_time(1025) - plain.prefill_time(1024) < jump / 10


def test_linear_staircase_term():
    lin = LinearBatchTime.from_rad(0.0, 1.0, staircase_t_col=64)
    assert lin.prefill_time(1) == lin.prefill_time(64) == 64
    assert lin.prefill_time(65) == 128


# --- speed -------------------------------------------------------------------------------------------------------
# --- linear fits -------------------------------------------------------------------------------------------------
def _synthetic_steps(rng, n=400):
    batches = []
    for _ in range(n):
        prefills = rng.integers(0, 3)
        decodes = int(rng.integers(0 if prefills else 1, 128))
        pn = [int(v) for v in rng.integers(16, 2048, size=prefills)]
        pc = [int(v) for v in rng.integers(0, 4096, size=prefills)]
        batches.append(Batch(pn, pc, [int(v) for v in rng.integers(16, 8192, size=decodes)]))
    return batches


def test_fit_recovers_known_coefficients_from_noisy_data():
    rng = np.random.default_rng(7)
    truth = LinearBatchTime(const=12 * MS, per_token=0.06 * MS, per_context=0.15e-6, per_prefill=3 * MS)
    batches = _synthetic_steps(rng)
    cols = batch_columns(batches)
    cols["duration"] = np.array([truth.step_time(b) for b in batches]) * rng.normal(1.0, 0.01, len(batches))
    fitted, report = LinearBatchTime.fit(cols)
    tolerance = {"const": 0.02, "per_token": 0.02, "per_context": 0.02, "per_prefill": 0.1}  # #prefills ∈ {0,1,2}
    for term in BASE_TERMS:
        assert fitted.coefficients[term] == pytest.approx(truth.coefficients[term], rel=tolerance[term]), term
    assert report.r2 > 0.99 and report.mape < 2.0 and report.n == len(batches)
    assert report.max_abs_error >= report.mae > 0


def test_fit_with_extra_terms_and_absolute_loss():
    rng = np.random.default_rng(3)
    truth = LinearBatchTime(const=8 * MS, per_token=0.05 * MS,
                            extra={"decode_context": 0.2e-6, "prefill_attention": 1e-8, "per_decode": 20e-6})
    batches = _synthetic_steps(rng)
    cols = batch_columns(batches)
    cols["duration"] = np.array([truth.step_time(b) for b in batches]) * rng.normal(1.0, 0.005, len(batches))
    terms = ("const", "per_token", "decode_context", "prefill_attention", "per_decode")
    for loss in ("relative", "absolute"):
        fitted, report = LinearBatchTime.fit(cols, terms, loss=loss)
        for term in ("const", "per_token", "decode_context", "prefill_attention"):
            assert fitted.coefficients[term] == pytest.approx(truth.coefficients[term], rel=0.1), (loss, term)
        assert report.r2 > 0.99


def _write_steps_csv(path, batches, durations):
    cols = batch_columns(batches)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(STEP_FIELDS)
        for i, d in enumerate(durations):
            row = {"replica": 0, "start": i * 0.1, "duration": d, "kv_used_blocks": 10, "kv_total_blocks": 100,
                   "num_waiting": 0, "num_running": 5, "num_preempted": 0,
                   **{k: int(cols[k][i]) for k in ("prefill_tokens", "num_prefills", "num_decodes", "context_sum")}}
            w.writerow([row[k] for k in STEP_FIELDS])


def test_fit_reads_the_simulators_steps_csv(tmp_path):
    rng = np.random.default_rng(11)
    truth = LinearBatchTime.from_fairbatching(10 * MS, 0.08 * MS, 8e-8)
    batches = _synthetic_steps(rng, 200)
    path = tmp_path / "steps.csv"
    _write_steps_csv(path, batches, [truth.step_time(b) for b in batches])
    fitted, report = LinearBatchTime.fit(path, ("const", "per_token", "per_context"))
    assert fitted.coefficients["per_token"] == pytest.approx(0.08 * MS, rel=1e-6)
    assert report.mape < 1e-6
    # Extra terms derived from steps.csv's own columns work; those needing their own column fail clearly.
    LinearBatchTime.fit(path, ("const", "per_decode", "has_prefill", "staircase_tokens"))
    with pytest.raises(ValueError, match="column 'decode_context' is missing"):
        LinearBatchTime.fit(path, ("const", "decode_context"))
    # Saved and loaded, and through the registry.
    fitted.save(tmp_path / "fit.json", report)
    loaded = LinearBatchTime.load(tmp_path / "fit.json")
    assert loaded.coefficients == fitted.coefficients
    b = batches[0]
    assert make_batch_time_model("linear", file=tmp_path / "fit.json").step_time(b) == fitted.step_time(b)
    assert make_batch_time_model("linear", steps_csv=path, terms=("const", "per_token", "per_context")) \
        .step_time(b) == pytest.approx(fitted.step_time(b))


def test_fit_bad_input(tmp_path):
    good = {"duration": [0.01, 0.02], "prefill_tokens": [0, 10], "num_prefills": [0, 1], "num_decodes": [4, 0],
            "context_sum": [100, 50]}
    with pytest.raises(ValueError, match="unknown linear term"):
        LinearBatchTime.fit(good, ("const", "per_banana"))
    with pytest.raises(ValueError, match="loss"):
        LinearBatchTime.fit(good, loss="huber")
    with pytest.raises(ValueError, match="duration must be > 0"):
        LinearBatchTime.fit({**good, "duration": [0.01, -1.0]})
    with pytest.raises(ValueError, match="'context_sum' is missing"):
        LinearBatchTime.fit({k: v for k, v in good.items() if k != "context_sum"})
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("duration,prefill_tokens,num_prefills,num_decodes,context_sum\n0.01,x,0,4,100\n")
    with pytest.raises(ValueError, match="non-numeric value at row 1"):
        LinearBatchTime.fit(bad_csv)
    with pytest.raises(FileNotFoundError):
        LinearBatchTime.fit(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match=">= 0"):
        LinearBatchTime(const=-1.0)
    with pytest.raises(ValueError, match="unknown linear term"):
        LinearBatchTime(extra={"per_banana": 1.0})


def test_nnls_matches_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(50):
        A, b = rng.normal(size=(20, 3)), rng.normal(size=20)
        x = nnls(A, b)
        assert np.all(x >= 0)
        # Brute force over the 8 active sets.
        best = np.inf
        for mask in range(8):
            cols = [j for j in range(3) if mask >> j & 1]
            z = np.zeros(3)
            if cols:
                z[cols] = np.linalg.lstsq(A[:, cols], b, rcond=None)[0]
            if np.all(z >= 0):
                best = min(best, np.linalg.norm(A @ z - b))
        assert np.linalg.norm(A @ x - b) == pytest.approx(best, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("pair", [("llama-3-8b", "a100"), ("qwen3-14b", "h20"), ("llama-3-70b-tp4", "h100")])
def test_approximate_roofline(pair):
    rt = RooflineBatchTime(*pair)
    lin, report = LinearBatchTime.approximate(rt)
    assert report.mape < 10 and report.r2 > 0.95
    richer, richer_report = LinearBatchTime.approximate(
        rt, BASE_TERMS + ("per_decode", "decode_context", "prefill_attention"))
    assert richer_report.mape <= report.mape
    assert lin.decode_time(32, 1024) == pytest.approx(rt.decode_time(32, 1024), rel=0.25)
    assert "roofline" in lin.source


def test_composition_grid_covers_all_shapes():
    grid = list(composition_grid(max_tokens=512, max_context=2048, max_decodes=32))
    assert any(b.num_prefills == 0 for b in grid) and any(b.num_decodes == 0 for b in grid)
    assert any(b.num_prefills and b.num_decodes for b in grid)
    assert max(b.num_decodes for b in grid) == 32


def test_paper_forms():
    b = Batch([100], [50], [10, 20])
    assert LinearBatchTime.from_wait(1.0, 0.5).step_time(b) == 1.0 + 0.5 * (150 + 30)
    assert LinearBatchTime.from_fairbatching(1.0, 2.0, 3.0).step_time(b) == 1.0 + 2.0 * 102 + 3.0 * 180
    rad = LinearBatchTime.from_rad(1.0, 2.0, 3.0, 4.0, 5.0)
    assert rad.step_time(b) == 1.0 + 2.0 * 102 + 3.0 * 100 * 150 + 4.0 * 30 + 5.0 * 2
    dp = LinearBatchTime.from_deferred_prefill(c_p=0.027, c_d=0.037, t_d=0.001, s_p=0.02, t_p_per_token=1e-5)
    assert dp.step_time(Batch([285] * 3, [0] * 3, [])) == pytest.approx(0.027 + 3 * 0.02 + 855e-5)
    assert dp.step_time(Batch([], [], [300] * 10)) == pytest.approx(0.037 + 10 * 0.001)


# --- registry ----------------------------------------------------------------------------------------------------
def test_registry_kinds():
    for kind, info in BATCH_TIME_MODELS.items():
        assert info["summary"] and callable(info["factory"])
        bt = make_batch_time_model(kind, "llama-3-8b", "a100")
        assert bt.step_time(Batch([128], [0], [512] * 8)) > 0
        assert bt.describe()["name"]
    assert make_batch_time_model("calibrated", "llama-3.1-8b", "a800").efficiency_source.startswith("fitted")
    assert make_batch_time_model("roofline-staircase", "llama-3-8b", "a100").staircase
    lin = make_batch_time_model("linear", const=0.01, per_token=1e-4)
    assert lin.decode_time(10, 100) == pytest.approx(0.01 + 1e-3)


def test_registry_errors():
    with pytest.raises(ValueError, match="valid kinds: roofline, roofline-staircase, calibrated, engine, linear"):
        make_batch_time_model("vidur", "llama-3-8b", "a100")
    with pytest.raises(ValueError, match="unknown parameter.*warp_speed.*valid: compute_eff"):
        make_batch_time_model("roofline", "llama-3-8b", "a100", warp_speed=9)
    with pytest.raises(ValueError, match="needs model= and gpu="):
        make_batch_time_model("roofline")
    with pytest.raises(ValueError, match="no calibration for GPU 'l20'"):
        make_batch_time_model("calibrated", "llama-2-7b", "l20")
    with pytest.raises(ValueError, match="not file= and coefficients|give one of"):
        make_batch_time_model("linear", file="x.json", const=1.0)
    with pytest.raises(ValueError, match="needs coefficients"):
        make_batch_time_model("linear")
    with pytest.raises(ValueError, match="compute_eff"):
        RooflineBatchTime("llama-3-8b", "a100", compute_eff=1.5)
    with pytest.raises(ValueError, match="sharpness"):
        RooflineBatchTime("llama-3-8b", "a100", sharpness=0.5)


def test_describe_cites_sources():
    d = RooflineBatchTime("qwen3-14b", "h20").describe()
    assert "Qwen/Qwen3-14B" in d["model_source"] and "H20" in d["gpu_source"]
    assert d["efficiency_source"] == "documented defaults"
    assert "fitted" in RooflineBatchTime("llama-3-8b", "a100").describe()["efficiency_source"]

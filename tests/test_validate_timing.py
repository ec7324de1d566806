import csv
import json
import math
from pathlib import Path

import pytest

from llmsched.batchtime import Batch, RooflineBatchTime, make_batch_time_model
from llmsched.batchtime.serving_engine import engine_params
from llmsched.cli import main
from llmsched.hardware import gpu, model
from llmsched.validate.calibrate import fit_engine, is_calibration
from llmsched.validate.datasets import load
from llmsched.validate.prediction_errors import predict, summarise

HEADER = ["model", "hardware", "prompt_size", "batch_size", "token_size", "peak_power", "average_power",
          "prompt_time", "token_time", "e2e_time", "tensor_parallel"]


def _splitwise_file(path: Path, rows) -> Path:
    """A Splitwise-format file whose times are what ``truth`` predicts (so the right model has ~0 error)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        for r in rows:
            w.writerow(r)
    return path


def _rows_from(truth_by_tp, hardware="a100-80gb"):
    rows = []
    for tp, truth in truth_by_tp.items():
        for prompt, batch in ((128, 1), (512, 1), (2048, 1), (512, 8)):
            pre = truth.step_time(Batch([prompt] * batch, [0] * batch, [])) * 1e3
            dec = truth.step_time(Batch([], [], [prompt + 64] * batch)) * 1e3
            for _ in range(3):
                rows.append(["llama2-70b", hardware, prompt, batch, 128, 1.0, 0.7, pre, dec, pre + 128 * dec, tp])
    return rows


def test_presets_for_the_measured_models():
    l70 = model("llama-2-70b")
    assert (l70.layers, l70.hidden, l70.kv_heads, l70.vocab) == (80, 8192, 8, 32000)
    bloom = model("bloom-176b-tp8")
    assert bloom.tp == 8 and not bloom.gated_mlp and bloom.kv_heads == 112
    pcie, sxm = gpu("a100-pcie"), gpu("a100")
    assert pcie.mem_bw < sxm.mem_bw and pcie.interconnect_bw < sxm.interconnect_bw
    assert pcie.link_latency > sxm.link_latency and pcie.family == "a100"
    # the PCIe part is slower for a memory-bound decode and much slower for a tensor-parallel prefill
    assert RooflineBatchTime("llama-3-8b", "a100-pcie").decode_time(32, 1024) > \
        RooflineBatchTime("llama-3-8b", "a100").decode_time(32, 1024)
    assert RooflineBatchTime("llama-2-70b-tp4", "a100-pcie").prefill_time(2048) > \
        1.2 * RooflineBatchTime("llama-2-70b-tp4", "a100").prefill_time(2048)


def test_engine_terms_behave_as_documented():
    base = RooflineBatchTime("llama-2-70b-tp8", "a100")
    floor = RooflineBatchTime("llama-2-70b-tp8", "a100", host_layer=500e-6)
    # a host launch floor above the GPU time sets a decode step's time, and hides under a big prefill
    assert floor.decode_time(1, 600) == pytest.approx(80 * 500e-6 + base.step_overhead)
    assert floor.prefill_time(8192) == pytest.approx(base.prefill_time(8192))
    serial = RooflineBatchTime("llama-2-70b-tp8", "a100", host_step=3e-3, host_per_seq=1e-4)
    assert serial.decode_time(10, 600) == pytest.approx(base.decode_time(10, 600) + 3e-3 + 10 * 1e-4)
    hops = RooflineBatchTime("llama-2-70b-tp8", "a100", allreduce_hop_latency=1e-6)
    assert hops.decode_time(1, 600) - base.decode_time(1, 600) == pytest.approx(2 * 80 * 2 * 7 * 1e-6)
    # an engine that repeats grouped KV heads reads heads/kv_heads = 8 times the KV bytes in decode
    expand = RooflineBatchTime("llama-2-70b-tp2", "a100", decode_gqa=False)
    gqa = RooflineBatchTime("llama-2-70b-tp2", "a100")
    extra = lambda m: m.decode_time(1, 4097) - m.decode_time(1, 1)
    assert extra(expand) == pytest.approx(8 * extra(gqa), rel=1e-6)
    smooth = RooflineBatchTime("llama-2-70b-tp8", "a100", host_layer=500e-6, host_sharpness=2.0)
    assert smooth.decode_time(1, 600) > floor.decode_time(1, 600)
    slow_link = RooflineBatchTime("llama-2-70b-tp8", "a100", comm_eff=0.2)
    assert slow_link.prefill_time(4096) > base.prefill_time(4096)
    with pytest.raises(ValueError, match="host_layer"):
        RooflineBatchTime("llama-3-8b", "a100", host_layer=-1.0)


def test_engine_kind_uses_fitted_terms_and_falls_back_for_other_gpus():
    bt = make_batch_time_model("engine", "llama-2-70b-tp4", "h100")
    fitted, source = engine_params("h100")
    assert bt.host_layer == fitted["host_layer"] and "h100" in source
    _, other = engine_params("rtx-6000-ada")
    assert "mean of" in other
    with pytest.raises(ValueError, match="unknown engine"):
        make_batch_time_model("engine", "llama-3-8b", "a100", engine="nope")


def test_reader_formats_and_exclusions(tmp_path):
    truth = RooflineBatchTime("llama-2-70b-tp2", "a100")
    rows = _rows_from({2: truth})
    rows.append(["llama2-70b", "a100-80gb", 512, 64, 128, 1.0, 0.7, 10.0, 50.0, 100.0, 2])   # impossibly fast
    rows.append(["llama2-70b", "h100-80gb-pcap", 512, 1, 128, 0.7, 0.5, 90.0, 40.0, 100.0, 2])
    data = load(_splitwise_file(tmp_path / "perf.csv", rows))
    assert data.name == "splitwise" and len(data.points) == 8
    assert any("peak FLOP/s" in e for e in data.excluded) and any("power" in e for e in data.excluded)
    decode = [p for p in data.points if p.phase == "decode"][0]
    assert decode.batch.decode_ctx == [128 + 64]     # mean context over 128 generated tokens after the prompt
    steps = tmp_path / "steps.csv"
    steps.write_text("replica,start,duration,prefill_tokens,num_prefills,num_decodes,context_sum\n"
                     "0,0,0.05,512,1,0,512\n0,0.05,0.02,0,0,4,2052\n0,0.07,0.03,256,1,2,1800\n")
    with pytest.raises(ValueError, match="--model and --gpu"):
        load(steps)
    sd = load(steps, "llama-3-8b", "a100")
    assert [p.phase for p in sd.points] == ["prefill", "decode", "mixed"]
    assert all(p.batch.context_sum == c for p, c in zip(sd.points, (512, 2052, 1800)))
    (tmp_path / "x.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="not a Splitwise"):
        load(tmp_path / "x.csv")


def test_errors_are_zero_for_the_generating_model_and_split_is_labelled(tmp_path):
    truth = {tp: make_batch_time_model("engine", f"llama-2-70b-tp{tp}", "a100") for tp in (2, 8)}
    data = load(_splitwise_file(tmp_path / "perf.csv", _rows_from(truth)))
    rows = summarise(data.points, predict(data.points, "engine"), "engine")
    assert {(r["tp"], r["split"]) for r in rows} == {(2, "calibration"), (8, "held-out")}
    assert all(r["median_abs_pct"] < 1e-6 and r["p90_abs_pct"] < 1e-6 for r in rows)
    roof = summarise(data.points, predict(data.points, "roofline"), "roofline")
    assert any(r["median_pct"] < -5 for r in roof)     # the plain roofline misses the engine terms
    assert is_calibration("vidur", "llama-2-7b", 4) and not is_calibration("splitwise", "bloom-176b", 8)


def test_fit_recovers_known_engine_terms(tmp_path):
    """Fit on data generated with known host/all-reduce figures: the fit finds them again."""
    known = dict(comm_eff=0.3, host_layer=300e-6, host_prefill_layer=100e-6, host_per_seq=200e-6, host_step=3e-3,
                 allreduce_hop_latency=gpu("a100").link_latency)
    truth = RooflineBatchTime("llama-2-70b-tp2", "a100", **known)
    rows = []
    for prompt, batch in ((128, 1), (256, 1), (512, 1), (1024, 1), (2048, 1), (512, 4), (512, 16), (512, 32)):
        pre = truth.step_time(Batch([prompt] * batch, [0] * batch, [])) * 1e3
        dec = truth.step_time(Batch([], [], [prompt + 64] * batch)) * 1e3
        rows.append(["llama2-70b", "a100-80gb", prompt, batch, 128, 1, 1, pre, dec, 0, 2])
    points = load(_splitwise_file(tmp_path / "perf.csv", rows)).points
    fit = fit_engine(points, "a100")
    assert fit["rms_log_error"] < 0.01
    assert fit["comm_eff"] == pytest.approx(0.3, rel=0.15)


def test_command_writes_json_and_plot(tmp_path, capsys):
    truth = {tp: make_batch_time_model("engine", f"llama-2-70b-tp{tp}", "h100") for tp in (2, 4)}
    data = _splitwise_file(tmp_path / "perf.csv", _rows_from(truth, "h100-80gb"))
    assert main(["validate-timing", "--data", str(data), "--batch-time", "engine", "--batch-time", "roofline",
                 "--out", str(tmp_path / "out")]) == 0
    payload = json.loads((tmp_path / "out" / "validation.json").read_text())
    assert payload["batch_time"] == ["engine", "roofline"] and len(payload["cells"]) == 8
    assert (tmp_path / "out" / "predicted_vs_measured.png").stat().st_size > 1000
    assert "| splitwise | llama-2-70b | h100 | 4 | decode | held-out |" in capsys.readouterr().out
    assert main(["validate-timing", "--data", str(data), "--batch-time", "nope", "--out", str(tmp_path)]) == 2


@pytest.mark.shared_data
def test_engine_beats_roofline_on_held_out_splitwise_cells(shared_data):
    data = load(shared_data / "profiles" / "splitwise_dgx_perf_model.csv")
    held = [p for p in data.points if not is_calibration(p.dataset, p.model, p.tp)]
    rows = {k: summarise(held, predict(held, k), k) for k in ("roofline", "engine")}
    median = {k: sorted(r["median_abs_pct"] for r in v)[len(v) // 2] for k, v in rows.items()}
    assert median["engine"] < median["roofline"] / 2
    assert not math.isnan(median["engine"])


def test_steps_csv_round_trip_through_the_simulator(tmp_path):
    """A simulator's steps.csv, validated against the model that produced it: decode-only and prefill-only steps
    are rebuilt exactly (0% error); mixed steps only approximately (the cached context's split is not logged)."""
    sim = tmp_path / "sim"
    assert main(["simulate", "--model", "llama-3-8b", "--gpu", "a100", "--rate", "5", "--num-requests", "120",
                 "--batch-time", "roofline", "--out", str(sim), "--no-progress"]) == 0
    assert main(["validate-timing", "--data", str(sim / "steps.csv"), "--model", "llama-3-8b", "--gpu", "a100",
                 "--batch-time", "roofline", "--out", str(tmp_path / "val")]) == 0
    cells = {r["phase"]: r for r in json.loads((tmp_path / "val" / "validation.json").read_text())["cells"]}
    assert cells["decode"]["p90_abs_pct"] < 1e-6 and cells["prefill"]["p90_abs_pct"] < 1e-6
    assert cells["mixed"]["median_abs_pct"] < 10

import json
from pathlib import Path

import numpy as np
import pytest

from llmsched.batchtime.profiled import (LAYER_OPS, fit_efficiencies, load_vidur_profile, predict,
                                         profile_errors)
from llmsched.batchtime.roofline import CALIBRATION_PATH, DEFAULT_EFFICIENCY, RooflineBatchTime, load_calibration


@pytest.fixture
def profiles(shared_data):
    """../shared/data/profiles (or $LLMSCHED_DATA/profiles); the conftest fixture skips when absent."""
    path = shared_data / "profiles"
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


SHAPE = {"n_head": 32, "n_kv_head": 8, "n_embd": 4096, "n_expanded_embd": 14336, "vocab_size": 128256,
         "use_gated_mlp": True}


def _write_profile(path: Path, seconds_by_tokens: dict[int, float], tp: int = 1, drop: str | None = None):
    """A Vidur-format profile whose nine operators sum to the given per-layer seconds."""
    columns = [f"time_stats.{op}.{stat}" for op in (*LAYER_OPS, "emb") for stat in
               ("min", "max", "mean", "median", "std")] + [*SHAPE, "num_tokens", "num_tensor_parallel_workers"]
    columns = [c for c in columns if c != drop]
    lines = [",".join(columns)]
    for tokens, seconds in seconds_by_tokens.items():
        share = seconds * 1e3 / len(LAYER_OPS)
        row = {c: share for c in columns if c.startswith("time_stats.")}
        row.update(SHAPE, num_tokens=tokens, num_tensor_parallel_workers=tp)
        lines.append(",".join(str(row[c]) for c in columns))
    path.write_text("\n".join(lines) + "\n")


def test_fit_recovers_efficiencies_of_a_synthetic_profile(tmp_path):
    truth = RooflineBatchTime("llama-3-8b", "a100", compute_eff=0.62, mem_eff=0.81, layer_overhead=25e-6,
                              calibration="off")
    tokens = [1, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
    path = tmp_path / "vidur_a100_synthetic_mlp.csv"
    _write_profile(path, {n: float(truth.layer_nonattention_time(n)) for n in tokens})
    profile = load_vidur_profile(path)
    assert profile.gpu.name == "a100" and profile.model.name == "llama-3-8b"
    fit = fit_efficiencies([profile])
    assert fit["compute_eff"] == pytest.approx(0.62, abs=0.005)
    assert fit["mem_eff"] == pytest.approx(0.81, abs=0.005)
    assert fit["layer_overhead"] == pytest.approx(25e-6, abs=1e-6)
    assert profile_errors(profile, compute_eff=fit["compute_eff"], mem_eff=fit["mem_eff"],
                          layer_overhead=fit["layer_overhead"])[0]["max_abs_pct"] < 0.5


def test_profile_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_vidur_profile(tmp_path / "vidur_a100_missing.csv")
    path = tmp_path / "vidur_a100_broken_mlp.csv"
    _write_profile(path, {1: 1e-4}, drop="time_stats.mlp_act.median")
    with pytest.raises(ValueError, match="missing columns time_stats.mlp_act.median"):
        load_vidur_profile(path)
    unnamed = tmp_path / "profile.csv"
    _write_profile(unnamed, {1: 1e-4})
    with pytest.raises(ValueError, match="pass gpu="):
        load_vidur_profile(unnamed)
    assert load_vidur_profile(unnamed, gpu="h100").gpu.name == "h100"
    other = tmp_path / "vidur_a100_ok_mlp.csv"
    _write_profile(other, {1: 1e-4})
    with pytest.raises(ValueError, match="one GPU at a time"):
        fit_efficiencies([load_vidur_profile(unnamed, gpu="h100"), load_vidur_profile(other)])
    with pytest.raises(ValueError, match="at least one profile"):
        fit_efficiencies([])


def test_calibration_json_is_small_and_used():
    data = load_calibration()
    assert CALIBRATION_PATH.stat().st_size < 20_000        # fitted figures only, no profile data
    for gpu_name, variants in data["gpus"].items():
        for variant, fit in variants.items():
            assert 0.3 < fit["compute_eff"] <= 1 and 0.3 < fit["mem_eff"] <= 1
            rt = RooflineBatchTime("llama-2-7b", gpu_name, staircase=variant == "roofline-staircase")
            assert (rt.compute_eff, rt.mem_eff) == (fit["compute_eff"], fit["mem_eff"])
    assert RooflineBatchTime("llama-2-7b", "l20").compute_eff == DEFAULT_EFFICIENCY["compute_eff"]


@pytest.mark.shared_data
def test_vidur_profiles_load(profiles):
    files = sorted(profiles.glob("vidur_*_mlp.csv"))
    assert len(files) >= 3
    by_name = {f.name: load_vidur_profile(f) for f in files}
    llama2 = by_name["vidur_a100_meta-llama_Llama-2-7b-hf_mlp.csv"]
    assert llama2.model.name == "llama-2-7b" and llama2.gpu.name == "a100"
    assert by_name["vidur_h100_meta-llama_Llama-2-7b-hf_mlp.csv"].gpu.name == "h100"
    assert by_name["vidur_a100_meta-llama_Meta-Llama-3-8B_mlp.csv"].model.name == "llama-3-8b"
    assert set(np.unique(llama2.tp)) == {1, 2, 4, 8}
    assert np.all(llama2.seconds > 0)


@pytest.mark.shared_data
def test_calibration_improves_on_defaults_and_matches_the_committed_file(profiles):
    group = [load_vidur_profile(f) for f in sorted(profiles.glob("vidur_a100_*_mlp.csv"))]
    fit = fit_efficiencies(group)
    committed = load_calibration()["gpus"]["a100"]["roofline"]
    for key in ("compute_eff", "mem_eff"):
        assert fit[key] == pytest.approx(committed[key], abs=0.01)
    params = {k: fit[k] for k in ("compute_eff", "mem_eff", "layer_overhead")}
    for profile in group:
        before = profile_errors(profile, per_tp=False, **{k: DEFAULT_EFFICIENCY[k] for k in params})[0]
        after = profile_errors(profile, per_tp=False, **params)[0]
        assert after["median_abs_pct"] < before["median_abs_pct"]
        assert after["median_abs_pct"] < 5 and after["max_abs_pct"] < 30


@pytest.mark.shared_data
def test_roofline_tracks_measured_scaling(profiles):
    profile = load_vidur_profile(profiles / "vidur_a100_meta-llama_Meta-Llama-3-8B_mlp.csv")
    fit = load_calibration()["gpus"]["a100"]["roofline"]
    predicted = predict(profile, fit["compute_eff"], fit["mem_eff"], fit["layer_overhead"])
    tp1 = (profile.tp == 1) & (profile.num_tokens >= 1024)
    ratio = predicted[tp1] / profile.seconds[tp1]
    assert 0.9 < np.median(ratio) < 1.1               # compute-bound rows
    small = (profile.tp == 1) & (profile.num_tokens <= 32)
    assert 0.85 < np.median(predicted[small] / profile.seconds[small]) < 1.15   # weight-streaming rows


@pytest.mark.shared_data
def test_script_writes_json_and_docs(profiles, tmp_path, capsys):
    import importlib.util
    script = Path(__file__).resolve().parents[1] / "scripts" / "calibrate_profiles.py"
    spec = importlib.util.spec_from_file_location("calibrate_profiles", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out, docs = tmp_path / "calibration.json", tmp_path / "doc.md"
    docs.write_text(f"intro\n{module.BEGIN}\nold\n{module.END}\noutro\n")
    assert module.main([str(profiles / "vidur_h100_meta-llama_Llama-2-7b-hf_mlp.csv"), "--out", str(out),
                        "--docs", str(docs)]) == 0
    data = json.loads(out.read_text())
    assert set(data["gpus"]) == {"h100"} and "roofline-staircase" in data["gpus"]["h100"]
    text = docs.read_text()
    assert text.startswith("intro") and text.rstrip().endswith("outro") and "old" not in text
    assert "| vidur_h100_meta-llama_Llama-2-7b-hf_mlp.csv | all |" in text
    assert "Fig. 6a" in capsys.readouterr().out


def test_a_profile_used_on_a_gpu_it_was_not_fitted_on_says_so():
    import warnings
    from llmsched.batchtime.registry import make_batch_time_model
    with pytest.warns(UserWarning, match="'h200-vllm' was calibrated on h200, not a100"):
        make_batch_time_model("h200-vllm", "llama-3-8b", "a100")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_batch_time_model("h200-vllm", "llama-3-8b", "h200")

"""Decode attention reads the KV cache at the card's measured copy rate (GPUSpec.copy_bw), where a card or its
family was measured; the fitted kinds keep the mem_eff they were fitted with."""
import csv
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from llmsched.batchtime.registry import make_batch_time_model
from llmsched.batchtime.roofline import RooflineBatchTime
from llmsched.hardware.gpus import gpu
from llmsched.hardware.models import model

RUNS = Path(__file__).parent / "data" / "gpu_runs"
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@pytest.mark.parametrize("name, fraction", [("h100", 3.01 / 3.35), ("h200", 4.26 / 4.8)])
def test_a_measured_card_reads_its_kv_at_its_copy_rate(name, fraction):
    roofline = RooflineBatchTime("llama-3.1-8b", name)
    assert roofline.decode_attn_eff == pytest.approx(fraction)
    assert "step-grid.json" in roofline.decode_attn_source
    assert roofline.describe()["decode_attn_source"] == roofline.decode_attn_source


def test_an_unmeasured_card_takes_its_familys_fraction_or_mem_eff():
    assert gpu("h100-pcie").family == "h100"
    assert RooflineBatchTime("llama-3.1-8b", "h100-pcie").decode_attn_eff == pytest.approx(3.01 / 3.35)
    a100 = RooflineBatchTime("llama-3.1-8b", "a100")
    assert a100.decode_attn_eff == a100.mem_eff and "no copy rate measured" in a100.decode_attn_source


def test_fitted_kinds_keep_the_attention_they_were_fitted_with():
    engine = make_batch_time_model("engine", "llama-3.1-8b", "h100")
    assert engine.decode_attn_eff == engine.mem_eff
    profile = make_batch_time_model("h100-vllm", "llama-3.1-8b", "h100").gpu_model
    assert profile.decode_attn_eff == profile.mem_eff  # stored before the copy rate: no measured_stream key
    given = RooflineBatchTime("llama-3.1-8b", "h100", decode_attn_eff=0.5)
    assert given.decode_attn_eff == 0.5 and given.decode_attn_source == "given"


def test_a_decode_step_is_faster_where_the_kv_read_dominates():
    """Llama-3.1-8B on an H100, 128 sequences of 4,096 tokens: the KV read is most of the step, and reading it at
    0.90 of the datasheet instead of mem_eff's 0.76 takes that share down by their ratio."""
    measured = RooflineBatchTime("llama-3.1-8b", "h100")
    fitted = RooflineBatchTime("llama-3.1-8b", "h100", measured_stream=False)
    long_kv, short_kv = (measured.decode_sum_time(128, 128 * 4096), fitted.decode_sum_time(128, 128 * 4096)), \
        (measured.decode_sum_time(1, 16), fitted.decode_sum_time(1, 16))
    assert long_kv[0] < 0.9 * long_kv[1]
    assert short_kv[0] == pytest.approx(short_kv[1], rel=0.01)  # the weights' read is unchanged


@pytest.mark.parametrize("card", ["h100", "h200"])
def test_the_step_grids_decode_attention_reaches_the_copy_rate(card):
    """The PyTorch step grid's decode attention (a step with attention less the same without) once the KV read
    dominates (64 or more sequences of 4,096 tokens) runs within 12% of the card's measured copy rate: the figure
    the model now reads the KV cache at."""
    rows = [r for r in csv.DictReader(open(RUNS / f"{card}-step-grid.csv"))
            if r["kind"] == "decode" and r["model"] == "llama-3.1-8b"]
    times = defaultdict(dict)
    for r in rows:
        times[int(r["decodes"]), int(r["context"])][r["mode"]] = float(r["median_s"])
    spec = model("llama-3.1-8b")
    for (decodes, context), t in times.items():
        if decodes >= 64 and context == 4096:
            rate = decodes * context * spec.kv_bytes_per_token_per_gpu / (t["full"] - t["noattn"])
            assert rate == pytest.approx(gpu(card).copy_bw, rel=0.12), (decodes, rate)


def test_decode_steps_of_the_serve_capture_are_within_a_few_percent():
    """scripts/decode_step_errors.py on the H200 vllm serve capture: the median pure decode step within 3%."""
    sys.path.insert(0, str(SCRIPTS))
    from decode_step_errors import decode_steps
    run = RUNS / "h200-llama-3.1-8b-serve-sharegpt-8"
    import json
    meta = json.loads((run / "meta.json").read_text())
    batch_time = make_batch_time_model("vllm-v1", str(run / "config.json"), "h200",
                                       capture_sizes=meta["engine_defaults_seen"]["cudagraph_capture_sizes"],
                                       max_num_seqs=1024, max_num_batched_tokens=8192)
    overall = decode_steps(run, batch_time)["rows"][0]
    assert overall["steps"] > 2000 and abs(overall["error_pct"]) < 3, overall

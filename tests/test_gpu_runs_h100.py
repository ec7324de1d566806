"""Our real H100 runs (tests/data/gpu_runs/h100-*, vLLM 0.26.0; docs/fidelity.md, "H100, vLLM 0.26.0"): the
replay's errors per run and batch-time model may not grow past today's (plus a small margin), the targets they
meet today stay met, and the prefix cache hits what vLLM's hit on the Mooncake window."""
from pathlib import Path

import pytest

from llmsched.validate.serving import validate
from llmsched.validate.serving_run import load_run

RUNS = Path(__file__).parent / "data" / "gpu_runs"
LLAMA, MOE, MOONCAKE = "h100-llama-3.1-8b", "h100-qwen3-30b-a3b-warm", "h100-llama-3.1-8b-mooncake"
METRICS = ("ttft p50", "tpot p50", "e2e p50", "throughput output_tps", "ttft p90")
MARGIN = 1.0  # points of % error a change may add before it fails here
# (run, batch time) -> today's signed % errors in METRICS order (docs/fidelity.md's three H100 tables)
TODAY = {
    # vllm-v1's rows since decode attention reads at the H100's measured copy rate (docs/fidelity.md)
    (LLAMA, "vllm-v1"): (1.8, 6.3, 6.9, -1.5, 0.6),
    # the MoE rows since a request preempted by recompute finds its own cached blocks (docs/fidelity.md)
    (MOE, "vllm-v1"): (-6.9, 0.4, -1.1, -1.2, -5.9),
    (MOONCAKE, "vllm-v1"): (5.3, 8.9, 6.7, -1.7, -1.0),
    (LLAMA, "h200-vllm"): (-3.3, 5.3, 5.3, -0.9, -2.8),
    (MOE, "h200-vllm"): (-14.9, -3.2, -6.2, 2.5, -14.7),
    (MOONCAKE, "h200-vllm"): (1.2, 5.9, 4.2, -1.1, -4.7),
    (LLAMA, "h100-vllm"): (0.1, 0.2, 0.0, 0.8, -1.7),
    (MOE, "h100-vllm"): (-25.9, -8.2, -13.2, 7.8, -25.5),
    (MOONCAKE, "h100-vllm"): (6.7, 3.6, 1.8, 0.1, 1.2),
}
# (run, batch time) -> the targets it meets today (the findings of docs/fidelity.md)
MEETS = {
    (MOE, "vllm-v1"): METRICS,
    (LLAMA, "vllm-v1"): ("ttft p50", "throughput output_tps", "ttft p90"),
    (MOONCAKE, "vllm-v1"): ("ttft p50", "throughput output_tps", "ttft p90"),
    (MOONCAKE, "h100-vllm"): METRICS,
    (LLAMA, "h100-vllm"): METRICS,
}
_rows: dict = {}


def row(run: str, batch_time: str) -> dict:
    if (run, batch_time) not in _rows:
        if batch_time == "h200-vllm":  # held out: the H200's profile on an H100, which the replay says
            with pytest.warns(UserWarning, match="'h200-vllm' was calibrated on h200, not h100"):
                _rows[run, batch_time] = validate(load_run(RUNS / run), batch_time=batch_time)
        else:
            _rows[run, batch_time] = validate(load_run(RUNS / run), batch_time=batch_time)
    return _rows[run, batch_time]


@pytest.mark.parametrize("run, batch_time", list(TODAY))
def test_errors_stay_within_todays(run, batch_time):
    targets = row(run, batch_time)["targets"]
    for metric, today in zip(METRICS, TODAY[run, batch_time]):
        assert abs(targets[metric]["error_pct"]) <= abs(today) + MARGIN, (metric, targets[metric], today)


@pytest.mark.parametrize("run, batch_time", list(MEETS))
def test_the_targets_met_today_stay_met(run, batch_time):
    targets = row(run, batch_time)["targets"]
    assert [m for m in MEETS[run, batch_time] if not targets[m]["met"]] == []


def test_the_prefix_cache_hits_what_vllms_hit_on_the_mooncake_window():
    cache = row(MOONCAKE, "h100-vllm")["prefix_cache"]
    assert cache["real"]["cached_tokens"] == 181_344 and cache["real"]["prompt_tokens"] == 1_014_065
    assert cache["simulated"]["prompt_tokens"] == 1_014_065
    assert abs(cache["error_points"]) <= 0.5, cache


def test_the_profile_fitted_on_llama_closes_its_decode_gap():
    """vLLM's compiled decode streams weights at ~0.88 of the datasheet; with the preset's 0.76 for weights and KV
    alike TPOT was +18%; decode attention at the card's measured copy rate (0.90) leaves +6%, which the profile
    fitted on this run (weights at 0.88) closes."""
    preset, fitted = row(LLAMA, "vllm-v1")["targets"], row(LLAMA, "h100-vllm")["targets"]
    assert 0 < preset["tpot p50"]["error_pct"] < 10 and abs(fitted["tpot p50"]["error_pct"]) < 1

"""The theory's claims on settings the papers' tests do not list: the sound throughput bound with an fp8 KV cache
and fp8 weights, the optimal offline schedule with prompts longer than a batch and against every registered
scheduler (scripts/theory_truths.py and scripts/optimal_truths.py run the randomized versions)."""
from __future__ import annotations

import json
import warnings

import pytest

from llmsched.batchtime.linear import INFERMAX_COEFFICIENTS, LinearBatchTime
from llmsched.experiment import RunConfig, build_replicas, run
from llmsched.request import Status
from llmsched.theory.infermax.offline import offline_replica, run_offline
from llmsched.theory.infermax.optimal import optimal_schedule
from llmsched.theory.infermax.schedule import Instance
from llmsched.theory.optimal_schedule import solve
from llmsched.theory.throughput_bound import bound_for_config, engine_limits, throughput_bound
from tests.cli_support import one_line_error

COST = LinearBatchTime.from_infermax(**INFERMAX_COEFFICIENTS["llama-2-7b/a100"])


def saturated_margin(cfg: RunConfig) -> float:
    """busy time / the bound's least GPU time of the finished requests, at 1000 req/s run to the end (>= 1)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run(cfg)
    log = result.requests
    done = log.column("status") == int(Status.FINISHED)
    assert done.all()
    least = throughput_bound(build_replicas(cfg)[0].batch_time, log.column("prompt_len")[done],
                             log.column("output_len")[done], engine_limits(cfg))
    return sum(s["busy_time"] for s in result.replica_stats) / (least.seconds_per_request * done.sum())


@pytest.mark.parametrize("gpu", ["h100", "l40s"])
def test_the_bound_covers_an_fp8_kv_cache_under_the_engine_model(gpu):
    """The engine model's fit reads a KV copy per query head in decode (decode_gqa off on these cards) at the KV
    cache's dtype; the bound priced it at the activations' two bytes, so its decomposition came out above the step
    time and it refused ('no longer matches'): plan pruned nothing and capacity checked nothing with fp8 KV."""
    cfg = RunConfig(model="llama-3-8b", gpu=gpu, batch_time="engine", kv_cache_dtype="fp8", scheduler="vllm-chunked",
                    rate=1000.0, num_requests=150, workload="azure-conv")
    assert bound_for_config(cfg).requests_per_s > 0
    assert saturated_margin(cfg) >= 1 - 1e-9


@pytest.mark.parametrize("batch_time", ["roofline", "vllm-v1", "engine"])
def test_the_bound_covers_fp8_weights(tmp_path, batch_time):
    """A dense fp8 checkpoint (quantization_config fp8): the roofline streams its weights at one byte and multiplies
    at the FP8 rate; the bound's decomposition now does too, instead of refusing every batch-time model."""
    config = json.loads(open("tests/data/gpu_runs/h200-llama-3.1-8b/config.json").read())
    config["quantization_config"] = {"quant_method": "fp8"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    cfg = RunConfig(model=str(tmp_path / "config.json"), gpu="h100", batch_time=batch_time, scheduler="vllm-chunked",
                    rate=1000.0, num_requests=150, workload="azure-conv")
    assert bound_for_config(cfg).requests_per_s > 0
    assert saturated_margin(cfg) >= 1 - 1e-9


def test_optimal_schedule_chunks_a_prompt_longer_than_a_batch():
    """A prompt of 10 tokens with C = 8: only chunked schedules finish it. The whole-pass search found none and
    the command stopped with 'no schedule finishes every request', though Sarathi and the CSP both do."""
    report = solve(requests="10:2,3:2", batch_tokens=8, time_limit=5.0)
    assert report.csp.status == "optimal" and report.whole_pass is None
    assert any("no whole-pass schedule" in note for note in report.notes)
    assert report.csp.latency <= min(h.latency for h in report.heuristics) * (1 + 1e-9)


def test_no_chunking_with_a_prompt_longer_than_a_batch_is_one_line(capsys):
    line = one_line_error(["theory", "optimal-schedule", "--requests", "10:2,3:2", "--batch-tokens", "8",
                           "--no-chunking"], capsys)
    assert "--no-chunking" in line and "drop --no-chunking or raise --batch-tokens" in line


@pytest.mark.parametrize("scheduler", ["goodput", "goodput-fixed-budget", "sarathi", "fairbatching", "vllm-chunked"])
def test_no_scheduler_beats_a_proven_optimum(scheduler):
    """Kim et al. §3's optimum against a scheduler outside InferMax's heuristics, offline on the same replica and
    cost: goodput's token budget (2048) was never lowered to C = 16 offline (a run lowers it), so it planned 94
    tokens and failed with PlanError instead of running."""
    inst = Instance((54, 6, 34), (8, 7, 5), 122, 16)
    report = optimal_schedule(inst, COST, time_limit=10.0, workers=1)
    assert report.csp.status == "optimal"
    res = run_offline(offline_replica(scheduler, COST, inst.kv_slots, inst.batch_tokens, oracle=True),
                      inst.requests())
    assert res.rejected == 0
    assert res.latency >= report.csp.latency * (1 - 1e-9)


@pytest.mark.parametrize("args, names", [
    (["theory", "fluid", "--types", "1:100:100", "--model", "llama-2-70b", "--gpu", "l4"], "does not fit on l4"),
    (["theory", "deferred-prefill", "--model", "llama-2-70b", "--gpu", "l4"], "does not fit on l4"),
    (["theory", "deferred-prefill", "--model", "llama-2-7b", "--gpu", "l4"], "lower --C to at most"),
])
def test_theory_refuses_a_deployment_that_cannot_hold_its_model_or_batch(args, names, capsys):
    """rad-bound refused a model too large for the card; fluid and deferred-prefill fitted their timing to it and
    printed ρ(K) and an equilibrium for llama-2-70b on a 24 GiB card, and ρ(K) for 331 running requests where the
    card's KV cache holds 30."""
    assert names in one_line_error(args, capsys)


@pytest.mark.parametrize("args, names", [(["--model", "nonexistent-model"], "unknown model 'nonexistent-model'"),
                                         (["--model", "llama-2-70b", "--gpu", "l4"], "does not fit on l4")])
def test_reproduce_wait_refuses_its_model_before_any_run(args, names, capsys):
    """It ran the toy, the scaling and the overflow parts first (minutes at full size) and failed only at §6."""
    assert names in one_line_error(["reproduce", "wait", *args], capsys)


def test_throughput_bound_takes_the_engine_options_that_change_it(capsys):
    """--kv-cache-dtype, --max-model-len and --dp change a run's bound (KV tokens, step time, servable requests,
    replicas); the command refused them, so an fp8 or DP deployment could not be bounded from the CLI."""
    from llmsched.cli import main
    args = ["theory", "throughput-bound", "--model", "llama-3-8b", "--gpu", "l40s", "--batch-time", "engine",
            "--workload", "azure-conv", "--num-requests", "300", "--json"]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(args + ["--kv-cache-dtype", "fp8", "--dp", "2", "--max-model-len", "2048"]) == 0
    fp8 = json.loads(capsys.readouterr().out)
    cfg = RunConfig(model="llama-3-8b", gpu="l40s", batch_time="engine", workload="azure-conv", num_requests=300,
                    kv_cache_dtype="fp8", dp=2, max_model_len=2048)
    assert fp8["requests_per_s"] == pytest.approx(bound_for_config(cfg).requests_per_s, rel=1e-12)
    assert fp8["replicas"] == 2 and fp8["limits"]["kv_tokens"] > plain["limits"]["kv_tokens"]


def test_fluid_names_the_rates_its_fit_calls_stable_that_no_scheduler_serves(capsys):
    """LMSYS lengths, Llama-2-7B on an A100: eq. (1) fitted to the vllm-v1 steps (R² 0.87, no prefill compute) gives
    ρ < 1 up to 47.4 req/s, but the sound bound of the same steps is 31.3 req/s (sarathi's capacity: 26.6). The
    fluid command now prints the bound beside ρ and says when the rate is above it."""
    from llmsched.cli import main
    from llmsched.theory.fluid import compute
    above = compute(workload="lmsys", rate=40.0)
    assert above["equilibrium"]["rho"] < 1 and above["sound_bound"]["above"]
    assert above["sound_bound"]["requests_per_s"] < 40.0
    assert not compute(workload="lmsys", rate=10.0)["sound_bound"]["above"]
    assert "sound_bound" not in compute(types="20:10:10,10:10:20", d0=0.01, d1=1e-5)   # given d0, d1: no card
    assert main(["theory", "fluid", "--workload", "lmsys", "--rate", "40"]) == 0
    assert "ABOVE it: no scheduler keeps up" in capsys.readouterr().out


def test_fluid_refuses_a_trace_with_no_requests(tmp_path, capsys):
    """A trace with a header and no rows stopped `theory fluid` with IndexError and a traceback."""
    trace = tmp_path / "empty.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n")
    line = one_line_error(["theory", "fluid", "--workload", str(trace), "--rate", "1"], capsys)
    assert f"{trace}: the trace has no requests" in line


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_a_probe_above_the_sound_bound_is_not_stable():
    """300 requests of the Azure code trace rescaled to 64-1024 req/s (Mistral-7B TP2 on a B200, vtc, 1024-token
    steps, fp8 KV): the bursty arrivals leave the trend's t-statistic under 3, so every probe up to the search's
    1024 req/s ceiling was judged stable, and the search ended in SoundBoundViolation (bound 64.7 req/s); then a
    probe above its own requests' bound was failed with that reason, and the search ended at the bound. The
    admitted share (capacity/stability.py) now fails those probes on their own evidence, well below the bound
    (none is overruled), and a rate above the bound still has that reason ready."""
    from llmsched.capacity.rate_search import find_capacity
    from llmsched.capacity.sound_bound import SERVED_FRACTION, above_bound
    from llmsched.capacity.probe import probe_config
    base = RunConfig(model="mistral-7b", gpu="b200", tp=2, scheduler="vtc", kv_cache_dtype="fp8",
                     trace="../shared/data/traces/AzureLLMInferenceTrace_code.csv", max_num_batched_tokens=1024,
                     max_num_seqs=128, num_requests=300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = find_capacity(base, [], resolution=0.05)
    bound = bound_for_config(probe_config(base, result.capacity, 0), SERVED_FRACTION).requests_per_s
    assert result.capacity <= 0.5 * bound
    assert "sound throughput bound" not in result.note
    failed = [p for p in result.probes if not p.meets]
    assert failed and all(p.rate > result.capacity and p.verdict != "stable" for p in failed)
    assert above_bound(base, 2 * bound, (0,)) and above_bound(base, result.capacity, (0,)) is None


def load_script(name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, f"scripts/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
@pytest.mark.parametrize("seed", [11, 12])
def test_random_settings_keep_the_bound(seed):
    """A slice of scripts/theory_truths.py (random model, GPU, TP, batch time, scheduler, trace, limits, prefix
    cache, fp8, pools) at fixed seeds: every case either refuses in one line or keeps the bound."""
    truths = load_script("theory_truths")
    import random
    rng = random.Random(seed)
    verdicts, checked = [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while checked < 4 and len(verdicts) < 40:   # four cases that ran (the others refuse in one line)
            try:
                cfg = truths.draw(rng, 150)
            except ValueError:
                continue
            verdicts.append(truths.check(cfg))
            checked += "busy_margin" in verdicts[-1]
    assert checked == 4, verdicts
    assert not [v for v in verdicts if v["verdict"].startswith(("VIOLATION", "CRASH"))], verdicts
    assert all(v["verdict"] in ("ok", "refused", "unfit") for v in verdicts), verdicts


def test_fluid_warns_when_its_fitted_line_misdescribes_the_steps():
    """Mixtral-8x7B at TP 2 on an H100: the d0 + d1·KV line fitted to vllm-v1's step times has R² -0.38 (the
    experts' loads, not the KV, set a step's time), so eq. (1) and everything after it rest on a line that
    explains nothing; the output says so. A dense model's fit (Llama-2-7B, R² above 0.8) has no warning."""
    from llmsched.theory.fluid import compute
    poor = compute(workload="sharegpt", rate=2.0, model="mixtral-8x7b-tp2", gpu="h100")
    assert "R² -0.38" in poor["timing"]["warning"] and "--d0/--d1" in poor["timing"]["warning"]
    good = compute(workload="sharegpt", rate=0.5)
    assert "warning" not in good["timing"]

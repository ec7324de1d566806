"""The sound throughput bound: no registered scheduler's saturated throughput exceeds it, in the simulator."""
import dataclasses
import math

import numpy as np
import pytest

from llmsched.batchtime.base import Batch
from llmsched.batchtime.registry import make_batch_time_model
from llmsched.cli import main
from llmsched.experiment import RunConfig, build_replicas, run
from llmsched.metrics.summary import summarize
from llmsched.request import Status
from llmsched.schedulers.registry import scheduler_info, scheduler_names
from llmsched.theory.throughput_bound import (EngineLimits, bound_for_config, busy_time_form, engine_limits,
                                               least_total, roofline_terms, throughput_bound)
from tests.conftest import AffineStepTime

PAIRS = {
    "llama-3-8b/a100/sharegpt": dict(model="llama-3-8b", gpu="a100", workload="sharegpt"),
    "mistral-7b/rtx-6000-ada/azure-conv": dict(model="mistral-7b", gpu="rtx-6000-ada", workload="azure-conv",
                                               batch_time="roofline-staircase"),
}
SCHEDULERS = [n for n in scheduler_names() if not n.startswith("test-")]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("pair", PAIRS)
def test_no_scheduler_exceeds_the_bound_at_saturation(pair):
    """Every scheduler at 1000 req/s (far above capacity), run until every request leaves: its throughput is
    at most the bound over the requests it finished, and over all of them when it finished all."""
    ratios = {}
    for name in SCHEDULERS:
        cfg = RunConfig(scheduler=name, rate=1000.0, num_requests=200, oracle=scheduler_info(name)["needs_oracle"],
                        **PAIRS[pair])
        result = run(cfg)
        throughput = summarize(result)["throughput"]["requests_per_s"]
        log = result.requests
        done = log.column("status") == int(Status.FINISHED)
        bt = build_replicas(cfg)[0].batch_time
        finished_bound = throughput_bound(bt, log.column("prompt_len")[done], log.column("output_len")[done],
                                          engine_limits(cfg))
        assert throughput <= finished_bound.requests_per_s * (1 + 1e-9), (name, throughput, finished_bound)
        # busy time itself is at least the least GPU time of the finished requests
        busy = sum(s["busy_time"] for s in result.replica_stats)
        assert busy >= finished_bound.seconds_per_request * done.sum() * (1 - 1e-9), name
        if done.all():
            assert throughput <= bound_for_config(cfg).requests_per_s * (1 + 1e-9), name
            ratios[name] = throughput / bound_for_config(cfg).requests_per_s
    # the bound is not vacuous: the best schedulers reach 70% of it even with the ramp-up and drain of 200
    # requests (0.73 on the Mistral pair, 0.90 on the Llama pair, measured)
    assert max(ratios.values()) > 0.7, ratios


def test_bound_holds_with_replicas_and_a_linear_model():
    """Two replicas behind a router, the linear batch time: r replicas serve at most r x the bound."""
    cfg = RunConfig(scheduler="sarathi", rate=500.0, num_requests=200, replicas=2, router="least-outstanding",
                    batch_time="linear", batch_time_params={"const": 0.010, "per_token": 5e-5, "per_context": 2e-8},
                    model="llama-3-8b", gpu="a100", workload="azure-conv")
    result = run(cfg)
    bound = bound_for_config(cfg)
    assert bound.replicas == 2 and math.isclose(bound.requests_per_s, 2 * bound.per_replica_rps)
    throughput = summarize(result)["throughput"]["requests_per_s"]
    assert throughput <= bound.requests_per_s
    assert throughput > 0.5 * bound.requests_per_s


@pytest.mark.parametrize("kind", ["roofline", "roofline-staircase", "calibrated"])
@pytest.mark.parametrize("model,gpu", [("llama-3-8b", "a100"), ("llama-3-70b-tp4", "h100"),
                                       ("llama-2-7b", "rtx-6000-ada"), ("qwen3-14b-tp2", "h20")])
def test_roofline_decomposition_matches_step_time(kind, model, gpu):
    """The bound's terms rebuild the roofline's step time exactly on random batches (else it would be unsound)."""
    try:
        bt = make_batch_time_model(kind, model, gpu)
    except ValueError:
        pytest.skip(f"no {kind} model for {gpu}")
    terms = roofline_terms(bt)
    rng = np.random.default_rng(1)
    for _ in range(200):
        k, d = int(rng.integers(0, 4)), int(rng.integers(0, 60))
        batch = Batch([int(x) for x in rng.integers(1, 2000, k)], [int(x) for x in rng.integers(0, 4000, k)],
                      [int(x) for x in rng.integers(1, 8000, d)])
        assert math.isclose(terms.step_time(batch), bt.step_time(batch), rel_tol=1e-9, abs_tol=1e-15)


def test_a_changed_roofline_turns_the_bound_off():
    bt = make_batch_time_model("roofline", "llama-3-8b", "a100")
    bt.step_overhead = 0.5     # the bound's decomposition no longer matches what step_time computes
    with pytest.raises(ValueError, match="no longer matches"):
        busy_time_form(bt)


def test_single_request_alone_is_never_faster_than_the_bound():
    bt = AffineStepTime()
    limits = EngineLimits(8192, 256, 100_000, 8192, 16)
    bound = throughput_bound(bt, [100], [5], limits)
    # served alone: one prefill of 100 tokens, then 4 decodes at contexts 101..104
    alone = bt.step_time(Batch([100], [0], [])) + sum(bt.step_time(Batch([], [], [c])) for c in range(101, 105))
    assert bound.seconds_per_request <= alone
    # with no fixed cost per step the bound is exact for a request served alone
    no_fixed = make_batch_time_model("linear", per_token=5e-5, per_context=2e-8)
    assert math.isclose(throughput_bound(no_fixed, [100], [5], limits).seconds_per_request,
                        no_fixed.step_time(Batch([100], [0], []))
                        + sum(no_fixed.step_time(Batch([], [], [c])) for c in range(101, 105)))


def test_least_total_is_a_fractional_knapsack():
    values, weights = np.array([1.0, 10.0, 3.0]), np.array([1.0, 1.0, 1.0])
    assert least_total(values, weights, 3.0) == 14.0
    assert least_total(values, weights, 2.0) == 4.0
    assert least_total(values, weights, 1.5) == 1.0 + 1.5


def test_unservable_requests_are_never_served():
    bt = AffineStepTime()
    limits = EngineLimits(8192, 256, 1000, 8192, 16)
    assert throughput_bound(bt, [100, 5000], [10, 10], limits).unservable == 1
    assert throughput_bound(bt, [100, 5000], [10, 10], limits).requests_per_s == 0.0     # must serve all work
    assert throughput_bound(bt, [100, 5000], [10, 10], limits, served_fraction=0.02).requests_per_s > 0


def test_unknown_batch_time_model_has_no_bound():
    class Other:
        name = "other"
    with pytest.raises(ValueError, match="no sound throughput bound"):
        busy_time_form(Other())


@pytest.mark.parametrize("model,gpu", [("llama-3-8b", "a100"), ("llama-2-70b", "a100"), ("llama-3-70b-tp4", "h100"),
                                       ("qwen3-14b-tp2", "h20")])
def test_engine_decomposition_never_exceeds_its_step_time(model, gpu):
    """The engine model's host launches overlap the GPU's work as a smoothed maximum; the bound drops them, so its
    step time is a lower bound on every batch, tight for small batches only where the launches dominate."""
    try:
        bt = make_batch_time_model("engine", model, gpu)
    except ValueError:
        pytest.skip(f"no engine model for {model} on {gpu}")
    terms = busy_time_form(bt)
    rng = np.random.default_rng(2)
    gaps = []
    for _ in range(300):
        k, d = int(rng.integers(0, 4)), int(rng.integers(0, 200))
        batch = Batch([int(x) for x in rng.integers(1, 4000, k)], [int(x) for x in rng.integers(0, 4000, k)],
                      [int(x) for x in rng.integers(1, 8000, d)])
        if batch.num_tokens == 0:
            continue
        lower, exact = terms.step_time(batch), bt.step_time(batch)
        assert lower <= exact * (1 + 1e-12)
        gaps.append(1 - lower / exact)
    assert max(gaps) > 0            # the launch term is really dropped somewhere ...
    assert np.median(gaps) < 0.5    # ... and the bound is not vacuous


def test_engine_model_bound_holds_against_a_run():
    cfg = RunConfig(scheduler="sarathi", batch_time="engine", workload="sharegpt", rate=200.0, num_requests=300,
                    seed=3)
    try:
        result = run(cfg)
    except ValueError as e:
        pytest.skip(str(e))
    bound = bound_for_config(cfg)
    assert summarize(result)["throughput"]["requests_per_s"] <= bound.requests_per_s


def test_theory_commands(capsys):
    assert main(["theory", "throughput-bound", "--num-requests", "2000"]) == 0
    out = capsys.readouterr().out
    assert "sound throughput bound" in out and "KV memory" in out
    assert main(["theory", "rad-bound", "--samples", "2000"]) == 0
    out = capsys.readouterr().out
    assert "RAD's regime r/T̄ᴿ" in out and "only in the paper's cost model" in out and "sound bound" in out
    assert main(["theory", "throughput-bound", "--gpu", "b300"]) == 2
    assert "valid GPUs" in capsys.readouterr().err


def test_rad_regime_is_below_the_sound_bound_where_sarathi_beats_it():
    """The capacity-gaming case: Mistral-7B on RTX 6000 Ada, azure-conv, roofline: RAD's r/T̄ᴿ (about 3 req/s) is below
    what Sarathi serves, while the sound bound is above both."""
    from llmsched.theory.rad_bound import compute
    out = compute(workload="azure-conv", batch_time="roofline", samples=4000)
    assert out["capacity_rps"] < out["sound_bound_rps"]
    cfg = RunConfig(scheduler="sarathi", model="mistral-7b", gpu="rtx-6000-ada", workload="azure-conv",
                    rate=1000.0, num_requests=300)
    served = summarize(run(cfg))["throughput"]["requests_per_s"]
    assert out["capacity_rps"] < served <= bound_for_config(cfg).requests_per_s


@pytest.mark.parametrize("scheduler", ["slai-spf-fixed", "sarathi-spf"])
def test_starving_schedulers_are_never_stable_above_the_bound(scheduler):
    """The capacity-gaming case (shortest prompt first, azure-conv lengths, Mistral-7B on an RTX 6000 Ada):
    5% above the sound bound a probe is never stable, so a capacity cannot exceed the bound and the plan's
    pruning never removes a deployment that a probe would have accepted."""
    from llmsched.capacity import parse_slos, run_probe
    from llmsched.plan.prune import SERVED_FRACTION
    base = RunConfig(scheduler=scheduler, model="mistral-7b", gpu="rtx-6000-ada", workload="azure-conv",
                     duration=240.0, rate=6.0)
    bound = bound_for_config(base, SERVED_FRACTION).requests_per_s
    rate = round(1.05 * bound, 3)
    probe = run_probe(dataclasses.replace(base, rate=rate), parse_slos(""))
    assert probe.verdict != "stable" and not probe.meets
    assert probe.throughput_rps <= bound

"""Autoscalers as their sources compute them, and replicas that cold-start: each policy's decision rule checked on
real replicas with queues set up by hand, each policy run on a day-like step of traffic, the cold-start model's
arithmetic, and the registry's table."""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_source
from llmsched.fleet.autoscaler import ScalingContext
from llmsched.fleet.autoscalers import AUTOSCALER_MODULES, AUTOSCALER_NAMES, autoscaler_class, make_autoscaler
from llmsched.fleet.cold_start import (CAPTURES, LOADER_BW, PROVISIONING_S, STORAGE, ColdStart, cold_start_model,
                                       storage)
from llmsched.fleet.fleet import Fleet, ScaleEvent
from llmsched.fleet.lifecycle import LOADING, PROVISIONING, SERVING, WARM, PhaseTimes
from llmsched.fleet.load_predictor import Predictor
from llmsched.fleet.pool import Pool
from llmsched.fleet.replica_sizing import decode, prefill, request_rate
from llmsched.fleet_setup import build_fleet, pool_configs, simulate_fleet_config
from llmsched.hardware.models import model
from llmsched.metrics.steps import StepLog
from llmsched.request import Request, Status
from llmsched.run_config import RUN_FIELDS

ENGINE = {"latency_boundary": "engine", "batch_time": "roofline", "gpu": "h100", "workload": "azure-conv"}


# --- the registry ---------------------------------------------------------------------------------------------------
def test_the_table_names_each_policy_by_its_own_name():
    for name, module in AUTOSCALER_MODULES.items():
        policy = importlib.import_module(module).POLICY
        assert policy.name == name and policy.source and policy.summary
        assert autoscaler_class(name) is policy
    assert RUN_FIELDS["autoscaler"].choices == AUTOSCALER_NAMES
    with pytest.raises(ValueError, match="unknown autoscaler 'knative'; valid: hpa, kpa"):
        autoscaler_class("knative")


# --- the cold-start model ---------------------------------------------------------------------------------------------
def test_the_default_cold_start_is_its_phases_with_their_sources():
    spec = model("llama-3-8b")
    cs = cold_start_model(spec, "h100")
    remote = STORAGE["remote"].bandwidth
    assert remote == pytest.approx(141e9 / 990)
    assert cs.provisioning == PROVISIONING_S and cs.image_pull == 0.0
    assert cs.weight_load == pytest.approx(spec.weight_bytes / remote)  # the store, not the loader, bounds it
    h100 = [c for c in CAPTURES if c.model == "llama-3.1-8b" and c.gpu == "h100"]  # llama-3-8b: the same weights
    assert cs.engine_start == pytest.approx(np.mean([c.engine_start for c in h100]))
    assert cs.warmup == pytest.approx(np.mean([c.warmup for c in h100]))
    assert cs.seconds(PROVISIONING) == cs.provisioning
    assert cs.seconds(LOADING) == pytest.approx(cs.image_pull + cs.weight_load)
    assert cs.seconds(WARM) == pytest.approx(cs.engine_start + cs.warmup)
    assert cs.cold_start == pytest.approx(sum(cs.seconds(s) for s in (PROVISIONING, LOADING, WARM)))
    assert 100 < cs.cold_start < 200  # the 2-8 minutes reported for a vLLM pod, at its short end
    assert all(cs.sources[p] for p in ("provisioning", "image_pull", "weight_load", "engine_start", "warmup"))


def test_storage_tensor_parallelism_and_overrides():
    spec = model("llama-3-8b")
    cached = cold_start_model(spec, "h100", {"storage": "page-cache"})
    assert cached.weight_load == pytest.approx(spec.weight_bytes / LOADER_BW)
    nvme = cold_start_model(spec, "h100", {"storage": "nvme"})  # 13 GB/s drive: the loader's 4 GB/s a rank bounds it
    assert storage("nvme").bandwidth > LOADER_BW and nvme.weight_load == pytest.approx(cached.weight_load)
    two = cold_start_model(spec.with_tp(2), "h100", {"storage": "nvme"})  # two ranks load half each
    assert two.weight_load == pytest.approx(spec.weight_bytes / 2 / LOADER_BW)
    given = cold_start_model(spec, "h100", {"provisioning": 240.0, "image_pull": 60})
    assert given.provisioning == 240.0 and given.image_pull == 60.0 and "given" in given.sources["provisioning"]
    with pytest.raises(ValueError, match="--cold-start-param boot: no such phase"):
        cold_start_model(spec, "h100", {"boot": 3})
    with pytest.raises(ValueError, match="unknown storage 'tape'"):
        cold_start_model(spec, "h100", {"storage": "tape"})


def test_cold_start_seconds_scales_the_whole_path_in_its_proportions():
    base = cold_start_model(model("llama-3-8b"), "h200")
    scaled = cold_start_model(model("llama-3-8b"), "h200", total=60.0)
    assert scaled.cold_start == pytest.approx(60.0)
    for phase in ("provisioning", "weight_load", "engine_start", "warmup"):
        assert getattr(scaled, phase) / 60.0 == pytest.approx(getattr(base, phase) / base.cold_start)
    assert cold_start_model(model("llama-3-8b"), "h200", total=0.0).cold_start == 0.0


def test_a_model_without_a_capture_takes_the_nearest_weights():
    a100 = cold_start_model(model("qwen3-14b"), "a100")  # no A100 capture: 29.5 GB is nearest the 16 GB Llamas
    llamas = [c.engine_start for c in CAPTURES if c.model == "llama-3.1-8b"]
    assert a100.engine_start == pytest.approx(np.mean(llamas))
    h200 = cold_start_model(model("qwen3-32b"), "h200")
    assert h200.engine_start == 90.3  # its own capture


# --- helpers: a fleet with replicas whose queues are set by hand -------------------------------------------------------
class Clock:
    """The fleet loop's ``schedule`` as a list: actions are run by the test, in time order."""

    def __init__(self):
        self.actions = []

    def __call__(self, t, action):
        self.actions.append((t, action))

    def run_until(self, end):
        while True:
            due = sorted((a for a in self.actions if a[0] <= end), key=lambda a: a[0])
            if not due:
                return
            t, action = due[0]
            self.actions.remove(due[0])
            action(t)


def fleet_with(policy: str, replicas: int, params=None, phases=PhaseTimes(), lo=1, hi=16, **fields):
    cfg = RunConfig(rate=2.0, num_requests=20, **{**ENGINE, **fields})
    fleet = Fleet((Pool("main", replicas, phases=phases),))
    scaler = make_autoscaler(policy, "main", lo, hi, params, ScalingContext())
    state = build_fleet(cfg, fleet, build_source(cfg), StepLog(), pool_configs(cfg, fleet), [scaler])
    clock = Clock()
    state.begin(clock)
    return state, scaler, clock


def queue(rep, n, start=0):
    for i in range(n):
        rep.add(Request(start + i, 0.0, 100, 10), 0.0)


# --- hpa --------------------------------------------------------------------------------------------------------------
def test_hpa_computes_ceil_of_replicas_times_metric_over_target():
    state, hpa, clock = fleet_with("hpa", 2)
    queue(state.replicas[0], 12)
    queue(state.replicas[1], 8, 100)  # 10 waiting on average, target 5: twice the target
    hpa.scrape(0.0)
    assert hpa.replicas_for(2) == 4
    hpa.tick(15.0)
    assert hpa.size == 4 and hpa.history == [(15.0, 4)]


def test_hpa_keeps_its_size_within_the_tolerance_and_counts_starting_pods_as_idle():
    state, hpa, clock = fleet_with("hpa", 2, phases=PhaseTimes(provisioning=100.0))
    queue(state.replicas[0], 5)
    queue(state.replicas[1], 5, 100)  # 5 a pod: at the target
    hpa.scrape(0.0)
    assert hpa.replicas_for(2) == 2
    queue(state.replicas[1], 5, 200)  # 5 + 10 = 15 over two ready pods: 1.5 x target
    hpa.scrape(1.0)
    state.scale("main", 3, 1.0)  # a third pod starting: counted at 0 on a scale-up
    assert hpa.replicas_for(3) == math.ceil(15 / 3 / 5 * 3)
    queue(state.replicas[0], 1, 300)  # 16 over three: 1.07 x target, within the tolerance once the starting pod counts
    hpa.scrape(2.0)
    assert hpa.replicas_for(3) == 3


def test_hpa_scales_down_only_to_the_highest_recommendation_of_its_window():
    state, hpa, clock = fleet_with("hpa", 4, params={"down_window": 60.0})
    queue(state.replicas[0], 20)  # 20 over four pods: 5 a pod, at target
    hpa.scrape(0.0)
    hpa.tick(15.0)
    assert hpa.size == 4
    for rep in state.replicas:
        rep.waiting.clear()
    queue(state.replicas[0], 2, 100)  # 0.5 a pod: it would want 1
    hpa.scrape(16.0)
    hpa.tick(30.0)
    assert hpa.size == 4  # the recommendation of 15 s (4) is in the window
    hpa.tick(76.0)
    assert hpa.size == 1  # past 60 s: the window holds only recommendations of 1


def test_hpa_scale_up_is_limited_to_double_or_four_more_a_period():
    state, hpa, clock = fleet_with("hpa", 1)
    queue(state.replicas[0], 100)  # 20 x target: it would want 20
    hpa.scrape(0.0)
    hpa.tick(15.0)
    assert hpa.size == 5  # max(2 x 1, 1 + 4)


# --- kpa --------------------------------------------------------------------------------------------------------------
def test_kpa_panics_on_a_burst_and_never_scales_down_while_panicking():
    state, kpa, clock = fleet_with("kpa", 1, params={"target": 10.0, "utilization": 1.0}, hi=20)
    for t in range(0, 60):
        kpa.scrape(float(t))  # 1 s samples of an idle pool: stable at 0
    queue(state.replicas[0], 50)  # 50 in flight from t = 60
    for t in range(60, 64):
        kpa.scrape(float(t))
    # panic window (the last 6 s): 0, 0, 50, 50, 50, 50, mean 33.3: 4 pods, 4 times the 1 ready: panic; the stable
    # window (the last 60 s) averages 3.3: 1 pod. In panic the larger: 4
    assert kpa.decide(63.0) == 4 and kpa.panic_since == 63.0
    state.replicas[0].waiting.clear()
    for t in range(64, 100):
        kpa.scrape(float(t))
    assert kpa.decide(99.0) == 4  # the burst is gone, but within a stable window of the panic: no scale-down
    for t in range(100, 130):
        kpa.scrape(float(t))
    assert kpa.decide(129.0) == 0 and kpa.panic_since is None  # 66 s without crossing the threshold: stable again
    kpa.tick(129.0)
    assert kpa.size == 1  # 0 pods wanted: the pool keeps its --min-replicas


def test_kpa_averages_its_windows_as_knative():
    state, kpa, clock = fleet_with("kpa", 2, params={"target": 10.0, "utilization": 0.5})
    queue(state.replicas[0], 12)
    for t in range(0, 30):
        kpa.scrape(float(t))
    # 12 in flight throughout; target 10 x 0.5 = 5: stable pods 3, panic pods 3 of 2 ready (1.5 < 2: not over the
    # threshold); the decider started over 2 ready pods, so in panic since t = 0 (Knative's newAutoscaler)
    assert kpa.decide(30.0) == 3 and kpa.panic_since == 0.0


# --- dynamo-sla -------------------------------------------------------------------------------------------------------
def test_the_load_predictors():
    constant, arima = Predictor("constant"), Predictor("arima")
    for v in (10, 20, 30, 40, 50, 60):
        constant.add(v)
        arima.add(v)
    assert constant.predict() == 60
    assert arima.predict() == pytest.approx(70)  # a linear trend is its own ARIMA(2,1,0) forecast
    short = Predictor("arima")
    for v in (5, 9):
        short.add(v)
    assert short.predict() == 9  # below 5 points: the last value, as Dynamo's


def test_dynamo_sizes_prefill_and_decode_load_from_the_replica():
    state, dyn, clock = fleet_with("dynamo-sla", 1, params={"predictor": "constant", "interval": 100.0,
                                                            "itl": 0.03})
    load = state.role_load["serve"]
    load.arrived, load.prompt_tokens, load.finished, load.output_tokens = 3000, 3000 * 1000, 2900, 2900 * 200
    rep = state.replicas[0]
    p_tps, _ = prefill(rep, 1000)
    d = decode(rep, 1000 + 100, 0.03)
    want = math.ceil(30 * 1000 / p_tps + 30 * 200 / d.tokens_per_s - 1e-9)
    assert dyn.decide(100.0) == want and want > 1
    assert dyn.decide(200.0) is None  # no request in the interval: skipped


def test_replica_sizing_finds_the_largest_batch_within_the_itl():
    cfg = RunConfig(rate=2.0, num_requests=10, **ENGINE)
    state, *_ = fleet_with("hpa", 1)
    rep = state.replicas[0]
    d = decode(rep, 2000, 0.03)
    assert d.itl <= 0.03 and rep.batch_time.decode_time(d.batch + 1, 2000) > 0.03
    assert request_rate(rep, 1000, 200, 0.03) > 0
    assert cfg.gpu == "h100"


# --- saturation -------------------------------------------------------------------------------------------------------
def test_saturation_adds_one_when_headroom_runs_low_and_removes_one_when_safe():
    state, sat, clock = fleet_with("saturation", 3)
    queue(state.replicas[0], 4)
    queue(state.replicas[1], 3, 100)  # spare queue (1 + 2 + 5) / 3 = 2.7 < 3: scale up
    sat.scrape(30.0)  # within the last minute at 60 s
    assert sat.decide(60.0) == 4
    for rep in state.replicas:
        rep.waiting.clear()
    sat2_state, sat2, _ = fleet_with("saturation", 3)
    sat2.scrape(30.0)  # all idle: spare 5 each; with two: 5 - 0 x 1.5 = 5 >= 3: safe
    assert sat2.decide(60.0) == 2


def test_saturation_does_not_scale_while_a_replica_starts():
    state, sat, clock = fleet_with("saturation", 1, phases=PhaseTimes(provisioning=100.0))
    queue(state.replicas[0], 10)
    sat.scrape(30.0)
    assert sat.decide(60.0) == 2
    state.scale("main", 2, 60.0)
    assert sat.decide(61.0) is None


# --- parameters -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, params, message", [
    ("hpa", {"metric": "latency"}, "autoscaler 'hpa' knows no metric 'latency'; give one of queue, running, kv"),
    ("kpa", {"stable_window": 0}, "stable_window=0: the stable_window of autoscaler 'kpa' is a window"),
    ("kpa", {"stable_window": -60}, "stable_window=-60"),
    ("hpa", {"sync": 0.0}, "sync=0.0"),
    ("saturation", {"window": -1.0}, "window=-1.0"),
    ("dynamo-sla", {"predictor": "prophet"}, "knows no predictor 'prophet'"),
    ("hpa", {"target_value": 3}, "autoscaler 'hpa' has no parameter 'target_value'"),
    ("kpa", {"target": "high"}, "target='high': the target of autoscaler 'kpa' must be a finite number"),
])
def test_bad_parameters_are_named(name, params, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_autoscaler(name, "main", 1, 4, params, ScalingContext(forecast=1.0))


# --- whole runs -------------------------------------------------------------------------------------------------------
STEP = "0:4,150:50,450:6"


def day_step(policy: str, **fields):
    cfg = RunConfig(rate_schedule=STEP, duration=600.0, autoscaler=policy, max_replicas=6, cold_start=40.0,
                    **{**ENGINE, **fields})
    result, state = simulate_fleet_config(cfg, build_source(cfg))
    return cfg, result, state


@pytest.mark.parametrize("policy", AUTOSCALER_NAMES)
def test_every_policy_scales_up_for_the_step_and_accounts_for_every_request(policy):
    cfg, result, state = day_step(policy)
    log = result.requests
    status = log.column("status")
    n = len(build_source(cfg))
    assert len(log) == n and set(status) <= {int(Status.FINISHED), int(Status.REJECTED)}
    assert all(log.reasons[i] for i in log.column("id")[status == int(Status.REJECTED)].tolist())
    assert max(len([1 for life in state.lives if life.state != "gone"]), *[
        r["serving"] for r in result.fleet["pools"]["main" if "main" in result.fleet["pools"] else "default"][
            "timeline"]]) >= 2
    for life in state.lives[1:]:  # every replica an autoscaler added started cold: 40 s from provisioning to serving
        when = dict(life.entered)
        if SERVING in when:
            assert when[SERVING] - when[PROVISIONING] == pytest.approx(40.0)
    a = result.fleet["autoscalers"]["default"]
    assert a["policy"] == policy and a["scale_ups"] >= 1


def test_predictive_has_the_replicas_serving_before_the_step():
    cfg, result, state = day_step("predictive")
    serving_at_step = sum(1 for life in state.lives if dict(life.entered).get(SERVING, math.inf) <= 150.0
                          and dict(life.entered).get("draining", math.inf) > 150.0)
    assert serving_at_step >= 3  # asked for a cold start and more ahead of the step at 150 s
    reactive = day_step("hpa")[2]
    first = min(dict(life.entered).get(SERVING, math.inf) for life in reactive.lives[1:])
    assert first > 150.0  # a reactive policy's first new replica serves only after the step


# --- fleets: each pool its own autoscaler, the cold-start model where a pool gives no phases -------------------------
def test_each_pool_gets_its_own_autoscaler_and_the_cold_start_model_only_without_phases_of_its_own():
    cfg = RunConfig(rate_schedule="0:4,100:30", duration=300.0, autoscaler="hpa", max_replicas=4, cold_start=20.0,
                    **ENGINE)
    fleet = Fleet((Pool("fast", 1, phases=PhaseTimes(provisioning=3.0)),
                   Pool("big", 1, fields={"gpu": "h200", "autoscaler": "kpa", "max_replicas": 3,
                                          "autoscaler_params": {"target": 20.0}})))
    result, state = simulate_fleet_config(cfg, build_source(cfg), fleet=fleet)
    scalers = {a.pool: a for a in state.autoscalers}
    assert scalers["fast"].name == "hpa" and scalers["fast"].max_replicas == 4
    assert scalers["big"].name == "kpa" and scalers["big"].max_replicas == 3
    assert scalers["big"].params["target"] == 20.0
    assert state.pools["fast"].spec.durations == PhaseTimes(provisioning=3.0)  # the file's figures win
    big = state.pools["big"].spec.durations
    assert isinstance(big, ColdStart) and big.cold_start == pytest.approx(20.0)
    assert set(result.fleet["autoscalers"]) == {"fast", "big"}
    assert len(result.requests) == len(build_source(cfg))


def test_a_run_without_the_new_options_has_no_cold_start_and_no_cost():
    cfg = RunConfig(rate=4.0, num_requests=200, **ENGINE)
    fleet = Fleet((Pool("main", 1),), scale=(ScaleEvent(5.0, "main", 2),))
    result, state = simulate_fleet_config(cfg, build_source(cfg), fleet=fleet)
    assert state.pools["main"].spec.durations == PhaseTimes()
    assert "cost" not in result.fleet and "autoscalers" not in result.fleet

"""Each autoscaler against its source, on cases derived by hand: Kubernetes' HPA (kubernetes/kubernetes,
pkg/controller/podautoscaler: replica_calculator.go ``calcPlainMetricReplicas`` and ``groupPods``, horizontal.go
``stabilizeRecommendationWithBehaviors`` and ``calculateScaleUpLimitWithScalingRules``), Knative's KPA
(knative/serving, pkg/autoscaler/scaling/autoscaler.go ``newAutoscaler`` and ``Scale``), NVIDIA Dynamo's SLA planner
(ai-dynamo/dynamo, components/planner, planner_core.py and load_predictor.py) and llm-d's saturation analyzer
(llm-d/llm-d-workload-variant-autoscaler, internal/saturation/analyzer.go), then a replica's lifecycle in an
autoscaled run. Every expected figure is worked out in the comment beside it from the source's rule."""
from __future__ import annotations

import math

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_source
from llmsched.fleet.autoscaler import ScalingContext
from llmsched.fleet.autoscalers import make_autoscaler
from llmsched.fleet.cold_start import LOADER_BW, STORAGE
from llmsched.fleet.fleet import Fleet
from llmsched.fleet.hpa import milli
from llmsched.fleet.lifecycle import DRAINING, GONE, PROVISIONING, SERVING, PhaseTimes
from llmsched.fleet.load_predictor import Predictor
from llmsched.fleet.pool import Pool
from llmsched.fleet_setup import build_fleet, pool_configs, simulate_fleet_config
from llmsched.metrics.steps import StepLog
from llmsched.request import Request, Status

ENGINE = {"latency_boundary": "engine", "batch_time": "roofline", "gpu": "h100", "workload": "azure-conv"}


class Clock:
    """The fleet loop's ``schedule`` as a list; the test runs what is due itself."""

    def __init__(self):
        self.actions = []

    def __call__(self, t, action):
        self.actions.append((t, action))


def fleet_with(policy: str, replicas: int, params=None, phases=PhaseTimes(), lo=1, hi=64):
    cfg = RunConfig(rate=2.0, num_requests=20, **ENGINE)
    fleet = Fleet((Pool("main", replicas, phases=phases),))
    scaler = make_autoscaler(policy, "main", lo, hi, params, ScalingContext())
    state = build_fleet(cfg, fleet, build_source(cfg), StepLog(), pool_configs(cfg, fleet), [scaler])
    state.begin(Clock())
    return state, scaler


def wait(rep, n, start=0):
    for i in range(n):
        rep.add(Request(start + i, 0.0, 100, 10), 0.0)


# --- hpa: groupPods ---------------------------------------------------------------------------------------------------
def test_hpa_counts_a_loading_pod_as_missing_on_a_scale_down():
    """A pod whose container runs but whose engine is not up yet serves no /metrics: ``groupPods`` calls it missing,
    and on a scale-down a missing pod counts as using the target. Two ready pods with 1 waiting each (target 5:
    1000 milli each, ratio 0.2) and two loading: 1000 + 1000 + 5000 + 5000 over 4 = 3000, ratio 0.6, outside the
    tolerance and the same direction: ceil(0.6 x 4) = 3, not ceil(0.2 x 2) = 1."""
    state, hpa = fleet_with("hpa", 2, phases=PhaseTimes(loading=100.0))
    state.scale("main", 4, 0.0)  # no provisioning time: both loading at once
    assert [life.state for life in state.lives] == [SERVING, SERVING, "loading", "loading"]
    wait(state.replicas[0], 1)
    wait(state.replicas[1], 1, 10)
    hpa.take_sample(0.0)
    assert hpa.replicas_for(4) == 3


def test_hpa_leaves_a_pending_pod_out_of_a_scale_down_and_counts_it_idle_on_a_scale_up():
    """A pod still being placed is Pending: ``groupPods`` calls it unready, left out on a scale-down (two ready pods
    at ratio 0.2: ceil(0.2 x 2) = 1) and counted as 0 on a scale-up (ready pods at 10 and 20 waiting: 15000 milli,
    ratio 3; with the two Pending at 0: 30000 / 4 = 7500, ratio 1.5: ceil(1.5 x 4) = 6)."""
    state, hpa = fleet_with("hpa", 2, phases=PhaseTimes(provisioning=100.0))
    state.scale("main", 4, 0.0)
    assert [life.state for life in state.lives][2:] == [PROVISIONING, PROVISIONING]
    wait(state.replicas[0], 1)
    wait(state.replicas[1], 1, 10)
    hpa.take_sample(0.0)
    assert hpa.replicas_for(4) == 1
    wait(state.replicas[0], 9, 100)
    wait(state.replicas[1], 19, 200)
    hpa.take_sample(1.0)
    assert hpa.replicas_for(4) == 6


def test_hpa_takes_a_serving_pod_not_yet_scraped_as_missing():
    """A pod that became ready after the last scrape has no sample: missing. On a scale-up it counts as 0: one pod
    at 20 waiting (ratio 4) and one unsampled: 20000 / 2 = 10000, ratio 2: ceil(2 x 2) = 4."""
    state, hpa = fleet_with("hpa", 1)
    wait(state.replicas[0], 20)
    hpa.take_sample(0.0)
    state.scale("main", 2, 1.0)  # no start-up phases: serving at once, after the scrape
    assert hpa.replicas_for(2) == 4


def test_hpa_averages_in_milli_units_as_the_controller():
    """``MilliValue`` rounds a quantity up and ``GetMetricUsageRatio`` divides the milli sum by the pod count as
    integers: three KV readings of 0.8123, 0.8 and 0.9 are 813 + 800 + 900 = 2513 milli, mean 837 (integer
    division), against a target of 800: 1.04625, within the tolerance."""
    assert milli(0.8123) == 813 and milli(0.8) == 800 and milli(5) == 5000
    state, hpa = fleet_with("hpa", 3, params={"metric": "kv"})
    hpa.sample = {0: 0.8123, 1: 0.8, 2: 0.9}
    assert hpa.replicas_for(3) == 3
    hpa.sample = {0: 0.95, 1: 0.95, 2: 0.95}  # 950 / 800 = 1.1875: ceil(1.1875 x 3) = ceil(3.5625) = 4
    assert hpa.replicas_for(3) == 4


# --- hpa: the behaviour over time -------------------------------------------------------------------------------------
def test_hpa_scale_up_policies_count_the_replicas_added_within_their_15_s_period():
    """The default scale-up policies (4 pods, 100 %, each per 15 s) limit the replicas added within any 15 s, not
    per sync: with a 5-s sync one pod at 200 waiting (ratio 40) asks for 40. t = 5: from 1, at most
    max(1 x 2, 1 + 4) = 5. t = 10: the pod at 200 and four Pending pods at 0: 200000 / 5 = 40000, ratio 8, 40 again;
    the +4 at t = 5 is within 15 s, so the period started at 1: at most 5, stays 5. t = 15: still within (5 > 0).
    t = 20: the +4 at t = 5 is 15 s old, out of the period (``After(cutoff)`` is strict): from 5, at most
    max(10, 9) = 10."""
    state, hpa = fleet_with("hpa", 1, params={"sync": 5.0, "scrape": 5.0}, phases=PhaseTimes(provisioning=1000.0))
    wait(state.replicas[0], 200)
    sizes = []
    for t in (5.0, 10.0, 15.0, 20.0):
        hpa.take_sample(t)
        hpa.act(hpa.decide(t), t)
        sizes.append(hpa.size)
    assert sizes == [5, 5, 5, 10]
    assert hpa.history == [(5.0, 5), (20.0, 10)]


def test_hpa_step_down_waits_out_its_window_from_the_size_it_started_with():
    """A step down in load: three pods, none waiting (ratio 0: ceil(0 x 3) = 0, the pool's minimum 1). The
    replicas found at the start (3, recorded at t = 0) and each 0 since are in the 300-s scale-down window: the
    highest is 3 while the t = 0 one is in the window (a recommendation at t counts while t > now - 300, horizontal.go's
    strict ``After(cutoff)``): 3 at t = 285, 1 at t = 300."""
    state, hpa = fleet_with("hpa", 3)
    sizes = {}
    for k in range(1, 22):
        t = 15.0 * k
        hpa.take_sample(t)
        hpa.act(hpa.decide(t), t)
        sizes[t] = hpa.size
    assert sizes[285.0] == 3 and sizes[300.0] == 1


# --- kpa --------------------------------------------------------------------------------------------------------------
def test_kpa_starts_in_panic_over_more_than_one_ready_pod_and_holds_them_a_stable_window():
    """Knative's ``newAutoscaler``: over 3 ready pods it starts in panic with maxPanicPods = 3. An idle pool
    (stable and panic pods 0, kept at least floor(3 / 2) = 1) is held at 3 while the panic lasts; it ends once
    panicTime + 60 s is before now: still 3 at t = 60, then 1 at t = 62 (the next 2-s tick)."""
    state, kpa = fleet_with("kpa", 3)
    assert kpa.panic_since == 0.0 and kpa.max_panic_pods == 3
    sizes = {}
    for t in range(0, 63):
        kpa.take_sample(float(t))
        if t and t % 2 == 0:
            kpa.act(kpa.decide(float(t)), float(t))
            sizes[t] = kpa.size
    assert sizes[2] == 3 and sizes[60] == 3 and sizes[62] == 1
    _, kpa1 = fleet_with("kpa", 1)
    assert kpa1.panic_since is None  # over one pod the decider starts stable


def test_kpa_a_spike_is_capped_by_the_scale_up_rate():
    """A spike of 100 in flight on one pod, target 10 at 100 %: stable and panic pods ceil(100 / 10) = 10, 10 / 1
    ready >= 2: panic; both kept within ceil(max_scale_up_rate 2 x 1) = 2: 2."""
    state, kpa = fleet_with("kpa", 1, params={"target": 10.0, "utilization": 1.0, "max_scale_up_rate": 2.0})
    wait(state.replicas[0], 100)
    for t in range(0, 10):
        kpa.take_sample(float(t))
    assert kpa.decide(10.0) == 2 and kpa.panic_since == 10.0


def test_kpa_does_not_count_a_draining_replicas_requests():
    """Knative scrapes only running, ready pods not being deleted (pkg/resources/pods.go ``podRunning``,
    ``podReady``): the 30 requests a replica still holds while it drains are not the pool's concurrency."""
    state, kpa = fleet_with("kpa", 2)
    wait(state.replicas[0], 4)
    wait(state.replicas[1], 30, 100)
    kpa.take_sample(0.0)
    state.scale("main", 1, 1.0)  # the newest serving replica drains, holding its 30
    assert state.lives[1].state == DRAINING and state.replicas[1].num_outstanding == 30
    kpa.take_sample(1.0)
    assert [v for _, v in kpa.samples.items] == [34.0, 4.0]


def test_kpa_has_no_scale_to_zero_here():
    """Knative scales to zero behind its activator; this fleet keeps every pool at one replica or more, so a
    minimum of 0 is refused with the flags named."""
    with pytest.raises(ValueError, match="--min-replicas 0 and --max-replicas 4: give 1 <= min <= max"):
        make_autoscaler("kpa", "main", 0, 4)


# --- dynamo-sla ------------------------------------------------------------------------------------------------------
def test_dynamo_arima_carries_a_ramp_on_and_skips_an_idle_interval():
    """A load rising 10 a period: the ARIMA(2,1,0) fit on its differences (all 10) predicts the next difference 10:
    50 -> 60, as a model with drift continues a ramp; the constant predictor repeats 50. Below 5 points it is the
    last value (Dynamo's minimum_data_points)."""
    ramp = Predictor("arima")
    for v in (10, 20, 30, 40):
        ramp.add(v)
    assert ramp.predict() == 40
    ramp.add(50)
    assert ramp.predict() == pytest.approx(60.0)
    flat = Predictor("constant")
    for v in (10, 20, 30, 40, 50):
        flat.add(v)
    assert flat.predict() == 50
    state, planner = fleet_with("dynamo-sla", 1)
    assert planner.decide(180.0) is None  # nothing arrived: Dynamo skips the adjustment


# --- saturation -------------------------------------------------------------------------------------------------------
def test_saturation_spread_over_one_fewer_is_llm_ds_is_scale_down_safe():
    """analyzer.go ``isScaleDownSafe``: the non-saturated replicas' total load over N - 1 must leave both spares at
    their triggers. Three replicas at KV 0.5, 0.5, 0.4 (queue 0): total 1.4 over 2 is 0.7, spare 0.1 >= 0.1: safe,
    3 -> 2 (the same spare reached as 0.8 - (0.8 - mean spare) x 3 / 2 is 0.0999...: the sum, as llm-d computes
    it, decides). At 0.5, 0.5, 0.45: 0.725, spare 0.075 < 0.1: not safe; average spare (0.3 + 0.3 + 0.35) / 3 >= 0.1 and
    queue spare 5 >= 3: no scale-up either: 3."""
    state, sat = fleet_with("saturation", 3)
    for kvs, want in (((0.5, 0.5, 0.4), 2), ((0.5, 0.5, 0.45), 3)):
        sat.samples.items.clear()
        sat.samples.add(0.0, {i: (kv, 0.0) for i, kv in enumerate(kvs)})
        assert sat.decide(0.0) == want


# --- the lifecycle in an autoscaled run -------------------------------------------------------------------------------
def test_an_autoscaled_replica_steps_only_while_serving_or_draining_and_is_billed_from_provisioning():
    """A step in load (4 -> 40 req/s at 60 s, back to 4 at 180 s) on KPA with a 30-s cold start: every replica it
    added provisions, serves 30 s later, steps only between serving and gone, receives requests only while serving,
    and is billed from provisioning until gone (or the run's end); every request ends finished but those longer than
    the model's context, rejected with that reason."""
    cfg = RunConfig(rate_schedule="0:4,60:40,180:4", duration=300.0, autoscaler="kpa", max_replicas=6,
                    cold_start=30.0, autoscaler_params={"target": 8.0}, **ENGINE)
    result, state = simulate_fleet_config(cfg, build_source(cfg))
    log = result.requests
    status = log.column("status")
    rejected = log.column("id")[status == int(Status.REJECTED)].tolist()
    assert set(status.tolist()) <= {int(Status.FINISHED), int(Status.REJECTED)}
    assert all("exceed max_model_len" in log.reasons[i] for i in rejected)
    added = state.lives[1:]
    assert added, "the step should have made KPA add a replica"
    steps = result.steps
    step_rep, step_start = steps.column("replica"), steps.column("start")
    replica, routed = log.column("replica"), log.column("arrival")  # engine side: routed on arrival
    end = result.end_time
    billed = 0.0
    for life in state.lives:
        when = dict(life.entered)
        if life.index and SERVING in when:
            assert when[SERVING] - when[PROVISIONING] == pytest.approx(30.0)
        mine = step_start[step_rep == life.index]
        if len(mine):
            assert mine.min() >= when[SERVING] - 1e-9
            assert mine.max() <= when.get(GONE, math.inf) + 1e-9
        got = routed[replica == life.index]
        if len(got):
            assert got.min() >= when[SERVING] - 1e-9 and got.max() <= when.get(DRAINING, math.inf) + 1e-9
        start = when.get(PROVISIONING, 0.0)
        billed += min(when.get(GONE, end), end) - start
    assert result.fleet["pools"]["default"]["billed_replica_s"] == pytest.approx(billed)


# --- cold start: the figures from their citations ---------------------------------------------------------------------
def test_the_cold_start_rates_are_their_cited_measurements():
    """vLLM's loader: "Model loading took 3.4213 GiB and 0.902026 seconds" (vllm-project/vllm#20264): 4.07 GB/s a
    rank. A remote store: KServe's 141 GB Llama-3-70B start cut "from 15-20 mins to ~1 minute" by a local cache
    (kserve/kserve#3869): 141 GB in 16.5 min, 142 MB/s."""
    assert LOADER_BW == pytest.approx(3.4213 * 2**30 / 0.902026) and 4.0e9 < LOADER_BW < 4.1e9
    assert STORAGE["remote"].bandwidth == pytest.approx(141e9 / 990.0) and np.isclose(
        STORAGE["remote"].bandwidth / 1e6, 142.4, atol=0.1)

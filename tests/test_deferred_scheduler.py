"""The deferred-prefill scheduler: K = 1 is vLLM and K = C static batching step for step; the
simulated throughput of the paper's model matches Theorem 1; K* is the simulated optimum; bad parameters fail."""
import dataclasses

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_replicas, run
from llmsched.metrics.steps import STEP_FIELDS
from llmsched.reproduce.deferred_prefill_runs.closed_loop import run_closed_loop, sweep
from llmsched.reproduce.deferred_prefill_runs.request_model import DecodeGeometric
from llmsched.schedulers.deferred.throughput import exact_throughput, optimal_K
from llmsched.schedulers.deferred.timing_constants import Timing
from llmsched.sim.simulator import simulate
from llmsched.workload.lengths.distributions import Geometric, Uniform
from llmsched.workload.workload import ClosedLoop

SPEC = Timing(c_p=0.02725, s_p=0.0217, c_d=0.03733, t_d=1.5e-4)  # spec Appendix A "G-exact", A = t_d/α + s_p at α = 1/201


def linear_cfg(C: int, timing: Timing = SPEC, prompt: int = 285, **kw) -> RunConfig:
    """The paper's model: a prefill phase is one step of c_p + s_p·n, a decode iteration c_d + t_d·X, and the KV
    cache holds C requests of max_model_len."""
    bt = {"per_prefill": timing.s_p, "extra": {"has_prefill": timing.c_p, "has_decode": timing.c_d,
                                               "per_decode": timing.t_d}}
    return RunConfig(model="llama-3-8b", gpu="a100", batch_time="linear", batch_time_params=bt, max_num_seqs=C,
                     max_num_batched_tokens=C * prompt, max_model_len=1024, num_blocks=C * 64 + 64, **kw)


def step_log(result) -> dict:
    return {f: list(getattr(result.steps, f)) for f in STEP_FIELDS}


def finish_times(result) -> list:
    return list(result.requests.cols["finish"])


def closed(cfg, lengths, n=1500, M=100, source=ClosedLoop):
    return simulate(source(M, lengths, n, seed=1), build_replicas(cfg))


class Burst(ClosedLoop):
    """A closed loop whose first request (a long one) arrives alone and the rest of the burst 1 s later, while
    it decodes: a full queue at every later refill, without the t = 0 race in which a static batch starts with
    the one request that arrived first while to-full refilling admits the rest in its next step."""

    def initial(self):
        reqs = super().initial()
        reqs[0].output_len = 1024 - reqs[0].prompt_len - 1
        for r in reqs[1:]:
            r.arrival = 1.0
        return reqs


def backlogged_steps(result, M: int) -> np.ndarray:
    """Indices of the steps that start before the closed loop stops issuing (its queue then drains)."""
    finish = np.sort(np.asarray(result.requests.cols["finish"]))
    end = finish[len(finish) - M - 1]
    return np.flatnonzero(np.asarray(result.steps.start) < end)


# --- the baselines as special cases ------------------------------------------------------------------------

@pytest.mark.parametrize("rate", [8.0, 0.5])
def test_K1_is_vllm_step_for_step_open_loop(rate):
    base = RunConfig(workload="sharegpt", rate=rate, num_requests=250, max_num_seqs=32)
    a = run(dataclasses.replace(base, scheduler="vllm"))
    b = run(dataclasses.replace(base, scheduler="deferred-prefill", scheduler_params={"K": 1}))
    assert len(a.steps) > 1000
    assert step_log(a) == step_log(b)
    assert finish_times(a) == finish_times(b)


def test_K1_is_vllm_step_for_step_closed_loop():
    cfg = RunConfig(max_num_seqs=48, max_model_len=1024)
    a = closed(dataclasses.replace(cfg, scheduler="vllm"), Geometric(285, 201))
    b = closed(dataclasses.replace(cfg, scheduler="deferred-prefill", scheduler_params={"K": 1, "batch_size": 48}),
               Geometric(285, 201))
    assert step_log(a) == step_log(b)


@pytest.mark.parametrize("lengths", [DecodeGeometric(285, 200), Uniform(10, 900, 2, 120)])
def test_KC_is_fastertransformer_step_for_step_when_backlogged(lengths):
    """Multi-step refills under the 8192-token budget included (48 × 285 tokens > 8192)."""
    cfg = RunConfig(max_num_seqs=48, max_model_len=1024)
    a = closed(dataclasses.replace(cfg, scheduler="fastertransformer"), lengths, source=Burst)
    b = closed(dataclasses.replace(cfg, scheduler="deferred-prefill", scheduler_params={"K": 48, "batch_size": 48}),
               lengths, source=Burst)
    assert len(a.steps) > 3000
    assert step_log(a) == step_log(b)


def test_KC_refills_only_an_empty_batch():
    res = closed(dataclasses.replace(linear_cfg(16), scheduler="deferred-prefill", scheduler_params={"K": 16}),
                 DecodeGeometric(285, 20), n=800, M=40, source=Burst)
    npf, running = np.asarray(res.steps.num_prefills), np.asarray(res.steps.num_running)
    starts = np.intersect1d(np.flatnonzero(npf > 0), backlogged_steps(res, 40))[1:]
    assert len(starts) > 20
    assert all(running[i - 1] == 0 for i in starts)   # the batch was empty before every refill
    assert all(npf[i] == 16 for i in starts)          # and every refill fills it


def test_intermediate_K_waits_for_K_departures_then_refills_to_C():
    C, K = 32, 5
    res = closed(dataclasses.replace(linear_cfg(C), scheduler="deferred-prefill", scheduler_params={"K": K}),
                 DecodeGeometric(285, 20), n=1500, M=2 * C)
    npf, running = np.asarray(res.steps.num_prefills), np.asarray(res.steps.num_running)
    window = backlogged_steps(res, 2 * C)[2:]
    starts = np.intersect1d(np.flatnonzero(npf > 0), window)
    assert len(starts) > 50
    assert all(C - running[i - 1] >= K for i in starts)    # at least K left since the last refill
    assert all(running[i] == C for i in starts)            # the refill restores C
    before = running[starts - 1]
    assert np.mean(C - before) < K + 2                     # overshoot of a few (theory: E D − K < 1)
    decodes = np.asarray(res.steps.num_decodes)[window]
    assert decodes[decodes > 0].min() > C - 2 * K           # the batch never drains far below C − K


def test_stateless_equals_to_full_when_one_step_refills_and_underfills_otherwise():
    cfg = dataclasses.replace(linear_cfg(32), scheduler="deferred-prefill")
    lengths = DecodeGeometric(285, 20)
    a = closed(dataclasses.replace(cfg, scheduler_params={"K": 6}), lengths, M=64)
    b = closed(dataclasses.replace(cfg, scheduler_params={"K": 6, "mode": "stateless"}), lengths, M=64)
    assert step_log(a) == step_log(b)
    small = dataclasses.replace(cfg, max_num_batched_tokens=4 * 285)   # a refill of K needs several steps
    a = closed(dataclasses.replace(small, scheduler_params={"K": 6}), lengths, M=64)
    b = closed(dataclasses.replace(small, scheduler_params={"K": 6, "mode": "stateless"}), lengths, M=64)
    occupancy = [np.mean(np.asarray(r.steps.num_decodes)[np.asarray(r.steps.num_decodes) > 0]) for r in (a, b)]
    assert occupancy[1] < occupancy[0] - 1


# --- the paper's model: simulated ρ(K) against Theorem 1 --------------------------------------------------

C_SIM, MEAN_SIM, N_SIM = 32, 20, 16000
K_SIM = (1, 2, 4, 7, 12, 20, 32)


@pytest.fixture(scope="module")
def simulated():
    cfg = linear_cfg(C_SIM)
    return {m.K: m for m in sweep(cfg, DecodeGeometric(285, MEAN_SIM), K_SIM, N_SIM)}


@pytest.fixture(scope="module")
def predicted():
    return exact_throughput(C_SIM, 1 / MEAN_SIM, SPEC)


def test_simulated_throughput_within_2_percent_of_theorem_1(simulated, predicted):
    for K, m in simulated.items():
        assert m.throughput == pytest.approx(predicted[K], rel=0.02), K


def test_predicted_K_star_is_the_simulated_optimum_within_flatness(simulated, predicted):
    K_star = optimal_K(predicted)
    assert K_star == 7
    best = max(m.throughput for m in simulated.values())
    assert simulated[K_star].throughput >= 0.99 * best
    assert simulated[K_star].throughput > 1.08 * simulated[1].throughput    # theory: +14.7%
    assert simulated[C_SIM].throughput < simulated[K_star].throughput      # static batching loses


def test_little_law_occupancy(simulated):
    """Mean completion time ≈ mean occupancy / throughput (spec §5.3)."""
    for m in simulated.values():
        assert m.mean_completion == pytest.approx(m.mean_running / m.throughput, rel=0.05)


# --- K = "auto" ----------------------------------------------------------------------------------------------

def test_auto_K_uses_the_analysis_with_given_or_learned_mean_output():
    cfg = dataclasses.replace(linear_cfg(C_SIM), scheduler="deferred-prefill")
    given = run_closed_loop(dataclasses.replace(cfg, scheduler_params={"mean_output": MEAN_SIM + 1}),
                            Geometric(285, MEAN_SIM + 1), 600)
    choice = given.meta["scheduler"]["auto"]
    assert choice["K"] == optimal_K(exact_throughput(C_SIM, 1 / (MEAN_SIM + 1), SPEC))
    assert given.meta["scheduler"]["K_used"] == choice["K"] and not choice["learned"]
    learned = run_closed_loop(cfg, Geometric(285, MEAN_SIM + 1), 600).meta["scheduler"]["auto"]
    assert learned["learned"] and abs(learned["mean_output"] - (MEAN_SIM + 1)) < 5
    assert abs(learned["K"] - choice["K"]) <= 2


# --- bad parameters ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("params,match", [
    ({"K": 0}, "K must be an integer >= 1"),
    ({"K": -3}, "K must be an integer >= 1"),
    ({"K": 9, "batch_size": 8}, "exceeds the batch size C=8"),
    ({"K": "best"}, "or 'auto'"),
    ({"mode": "lazy"}, "mode must be one of"),
])
def test_bad_parameters_are_rejected_at_construction(params, match):
    from llmsched.schedulers.registry import create_scheduler
    with pytest.raises(ValueError, match=match):
        create_scheduler("deferred-prefill", **params)


@pytest.mark.parametrize("params,kw,match", [
    ({"K": 40}, {}, r"K=40 exceeds the batch size C=32"),                       # C defaults to max_num_seqs
    ({"batch_size": 64}, {}, "exceeds max_num_seqs 32"),
    ({"batch_size": 32}, {"num_blocks": 32 * 64 - 1}, "more than the KV cache can hold"),
])
def test_bad_parameters_against_the_replica(params, kw, match):
    cfg = dataclasses.replace(linear_cfg(32), scheduler="deferred-prefill", scheduler_params=params, **kw)
    with pytest.raises(ValueError, match=match):
        run_closed_loop(cfg, DecodeGeometric(285, 20), 100)


def test_auto_K_without_a_batch_time_model_is_refused_at_the_first_decision():
    """An engine that gives no batch-time model: K='auto' must fail at start-up with one clear line,
    not after C departures in the middle of a run; an integer K runs."""
    from llmsched.engine.view import ReplicaView
    from llmsched.request import Request
    for params, ok in (({}, False), ({"K": 4}, True)):
        cfg = dataclasses.replace(linear_cfg(8), scheduler="deferred-prefill", scheduler_params=params)
        replica = build_replicas(cfg)[0]
        replica.batch_time = None                     # what an engine without a timing model hands the view
        replica.add(Request(0, 0.0, 100, 10), 0.0)
        if ok:
            assert replica.scheduler.schedule(ReplicaView(replica)).prefills
        else:
            with pytest.raises(ValueError, match="K='auto' needs a batch-time model.*pass an integer K"):
                replica.scheduler.schedule(ReplicaView(replica))

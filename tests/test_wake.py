"""The cold-start cost of a step after the engine sat idle: its form, its fit, its place in the simulator."""
import math

import pytest

from llmsched.batchtime.linear import LinearBatchTime
from llmsched.batchtime.wake import WakeCost
from llmsched.experiment import RunConfig, run


def test_wake_cost_grows_with_idle_time_towards_its_cost():
    w = WakeCost(cost=0.003, tau=0.05)
    times = [w.time(g) for g in (0.0, 0.005, 0.05, 0.2, 5.0)]
    assert times[0] == 0.0 and times == sorted(times)
    assert math.isclose(times[2], 0.003 * (1 - math.exp(-1)))
    assert math.isclose(times[-1], 0.003, rel_tol=1e-9)
    assert WakeCost(0.0, 0.0).time(1.0) == 0.0


def test_fit_recovers_a_measured_shape_and_never_a_negative_cost():
    truth = WakeCost(cost=0.0033, tau=0.04)
    idle = [0.005, 0.02, 0.05, 0.2, 0.5] * 3
    fitted = WakeCost.fit(idle, [truth.time(g) for g in idle])
    assert math.isclose(fitted.cost, truth.cost, rel_tol=0.05) and math.isclose(fitted.tau, truth.tau, rel_tol=0.2)
    assert WakeCost.fit([0.1, 0.5], [-0.001, -0.002]).cost == 0.0  # faster after idle: no cost, not a negative one


@pytest.mark.parametrize("bad, match", [
    (dict(cost=-1.0, tau=0.1), "wake cost must be"), (dict(cost=0.001, tau=0.0), "tau must be > 0"),
    (dict(cost=float("nan"), tau=0.1), "wake cost must be")])
def test_bad_wake_parameters_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        WakeCost(**bad)


def test_a_linear_profile_keeps_its_wake_cost_through_save_and_load(tmp_path):
    model = LinearBatchTime(const=0.002, per_token=1e-5)
    model.wake = WakeCost(0.003, 0.05)
    model.save(tmp_path / "p.json")
    assert LinearBatchTime.load(tmp_path / "p.json").wake == model.wake
    assert LinearBatchTime.load(tmp_path / "p.json").describe()["wake"] == {"cost": 0.003, "tau": 0.05}
    with pytest.raises(ValueError, match="a wake entry is"):
        LinearBatchTime.from_dict({"coefficients": {"const": 0.001}, "wake": {"cost": 0.001}})


def _run(tmp_path, wake: WakeCost | None, rate: float):
    model = LinearBatchTime(const=0.002, per_token=1e-5)
    model.wake = wake
    path = tmp_path / f"linear-{wake is not None}.json"
    model.save(path)
    cfg = RunConfig(scheduler="sarathi", workload="sharegpt", rate=rate, num_requests=30, seed=3,
                    batch_time="linear", batch_time_params={"file": str(path)}, fast_forward=True)
    return run(cfg)


def test_the_replica_charges_the_wake_cost_to_steps_after_idle_only(tmp_path):
    wake = WakeCost(0.004, 0.05)
    plain, cold = _run(tmp_path, None, 0.05), _run(tmp_path, wake, 0.05)
    p_steps, c_steps = plain.steps, cold.steps
    assert len(p_steps) == len(c_steps)
    ends = [s + d for s, d in zip(c_steps.start, c_steps.duration)]
    gaps = [c_steps.start[0]] + [s - e for s, e in zip(list(c_steps.start)[1:], ends)]
    extra = [c - p for c, p in zip(c_steps.duration, p_steps.duration)]
    # at 0.05 req/s every request arrives to an idle replica: its first step pays wake.time(idle), the rest nothing
    assert sum(g > 0 for g in gaps) >= 29  # all but a request arriving at t = 0, the clock origin
    for g, e in zip(gaps, extra):
        assert math.isclose(e, wake.time(g), abs_tol=1e-12)
    def ttft(result):
        log = result.requests
        return {i: t for i, t, a in zip(log.column("id"), log.column("ttft"), log.column("arrival")) if a > 0}
    ttft_plain, ttft_cold = ttft(plain), ttft(cold)
    assert len(ttft_cold) >= 29 and all(ttft_cold[i] > ttft_plain[i] + 0.9 * wake.cost for i in ttft_cold)

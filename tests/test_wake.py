"""The cold-start slowdown of a step after the engine sat idle: its form, its fit, its place in the simulator."""
import math

import pytest

from llmsched.batchtime.linear import LinearBatchTime
from llmsched.batchtime.wake import WakeCost
from llmsched.experiment import RunConfig, run


def test_wake_slowdown_grows_with_idle_time_towards_its_factor_of_the_step():
    w = WakeCost(slowdown=0.6, tau=0.05)
    times = [w.time(g, 0.010) for g in (0.0, 0.005, 0.05, 0.2, 5.0)]
    assert times[0] == 0.0 and times == sorted(times)
    assert math.isclose(times[2], 0.010 * 0.6 * (1 - math.exp(-1)))
    assert math.isclose(times[-1], 0.006, rel_tol=1e-9)
    assert math.isclose(w.time(5.0, 0.020), 2 * w.time(5.0, 0.010))  # a factor of the step, not a fixed time
    assert WakeCost(0.0, 0.0).time(1.0, 0.01) == 0.0


def test_fit_recovers_a_measured_shape_and_never_a_negative_slowdown():
    truth = WakeCost(slowdown=0.55, tau=0.04)
    idle = [0.005, 0.02, 0.05, 0.2, 0.5] * 3
    fitted = WakeCost.fit(idle, [truth.time(g, 1.0) for g in idle])
    assert math.isclose(fitted.slowdown, truth.slowdown, rel_tol=0.05)
    assert math.isclose(fitted.tau, truth.tau, rel_tol=0.2)
    assert WakeCost.fit([0.1, 0.5], [-0.1, -0.2]).slowdown == 0.0  # faster after idle: no slowdown, not a negative


@pytest.mark.parametrize("bad, match", [
    (dict(slowdown=-1.0, tau=0.1), "wake slowdown must be"), (dict(slowdown=0.5, tau=0.0), "tau must be > 0"),
    (dict(slowdown=float("nan"), tau=0.1), "wake slowdown must be")])
def test_bad_wake_parameters_are_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        WakeCost(**bad)


def test_a_linear_profile_keeps_its_wake_through_save_and_load(tmp_path):
    model = LinearBatchTime(const=0.002, per_token=1e-5)
    model.wake = WakeCost(0.6, 0.05)
    model.save(tmp_path / "p.json")
    assert LinearBatchTime.load(tmp_path / "p.json").wake == model.wake
    assert LinearBatchTime.load(tmp_path / "p.json").describe()["wake"] == {"slowdown": 0.6, "tau": 0.05}
    with pytest.raises(ValueError, match="a wake entry is"):
        LinearBatchTime.from_dict({"coefficients": {"const": 0.001}, "wake": {"cost": 0.001, "tau": 0.1}})


def _run(tmp_path, wake: WakeCost | None, rate: float):
    model = LinearBatchTime(const=0.002, per_token=1e-5)
    model.wake = wake
    path = tmp_path / f"linear-{wake is not None}.json"
    model.save(path)
    cfg = RunConfig(scheduler="sarathi", workload="sharegpt", rate=rate, num_requests=30, seed=3,
                    batch_time="linear", batch_time_params={"file": str(path)}, fast_forward=True)
    return run(cfg)


def test_the_replica_slows_steps_after_idle_only(tmp_path):
    wake = WakeCost(0.6, 0.05)
    plain, cold = _run(tmp_path, None, 0.05), _run(tmp_path, wake, 0.05)
    p_steps, c_steps = plain.steps, cold.steps
    assert len(p_steps) == len(c_steps)
    ends = [s + d for s, d in zip(c_steps.start, c_steps.duration)]
    gaps = [c_steps.start[0]] + [s - e for s, e in zip(list(c_steps.start)[1:], ends)]
    # at 0.05 req/s every request arrives to an idle replica: its first step is slowed by wake.time(idle, step),
    # every other step is as without the term
    assert sum(g > 0 for g in gaps) >= 29  # all but a request arriving at t = 0, the clock origin
    for g, c, p in zip(gaps, c_steps.duration, p_steps.duration):
        assert math.isclose(c, p + wake.time(g, p), rel_tol=1e-9)  # durations are end - start: a few ulps

    def ttft(result):
        log = result.requests
        return {i: t for i, t, a in zip(log.column("id"), log.column("ttft"), log.column("arrival")) if a > 0}
    ttft_plain, ttft_cold = ttft(plain), ttft(cold)
    assert len(ttft_cold) >= 29 and all(ttft_cold[i] > ttft_plain[i] for i in ttft_cold)  # its first chunk is slower

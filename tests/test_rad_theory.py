"""Bari et al.'s Theorem 1 and 2 figures, and the simulator agreeing with them."""
import numpy as np
import pytest

from llmsched.batchtime import make_batch_time_model
from llmsched.batchtime.linear import LinearBatchTime
from llmsched.cli import main
from llmsched.theory.rad_slai.bound_check import TiledPrompts, queue_trace
from llmsched.theory.rad_slai.theorems import TileCosts, rad_bound, saturated_throughput, theorem2_holds, theorem2_min_n
from llmsched.workload.lengths.distributions import Uniform

C1, C3 = 5e-5, 2e-8  # eq. (7) world: c1 per token of staircase compute, c3 per decode context token
TILE32 = dict(t_row=32, t_col=32, t_red=32)


def eq7_model():
    """Bari et al.'s eq. (7) shape: linear layers t_col·⌈τ/t_col⌉, decode attention; no per-batch constant."""
    return LinearBatchTime.from_rad(c0=0.0, c1=C1, c3=C3, staircase_t_col=32)


def test_optimal_tiling_has_no_padding_and_matches_the_closed_form():
    costs = TileCosts(eq7_model(), 32, 64, 4096)
    for prompt, output in ((64, 1), (640, 100), (1280, 7)):
        # chunks of t*_lcm and decodes in batches of t*_col are tiled exactly: c1 per token, c3 per context
        ctx = np.arange(prompt + 1, prompt + output)  # engine count: L^D − 1 decodes
        expected = C1 * (prompt + output - 1) + C3 * ctx.sum()
        assert costs.request(prompt, output) == pytest.approx(expected, rel=1e-12)
        theory = C1 * (prompt + output) + C3 * np.arange(prompt + 1, prompt + output + 1).sum()
        assert costs.request(prompt, output, "theory") == pytest.approx(theory, rel=1e-12)
    # a prompt off the t*_lcm grid pays a whole tile for its last chunk (Assumption 3 avoids this)
    assert costs.prefill(65) == pytest.approx(C1 * 96)


def test_bound_scales_with_replicas_and_rejects_bad_input():
    p, o = Uniform(1, 64, 16, 128).sample(2000, np.random.default_rng(0))
    one = rad_bound(eq7_model(), p, o, 32, 32)
    four = rad_bound(eq7_model(), p, o, 32, 32, replicas=4)
    assert four.capacity == pytest.approx(4 * one.capacity) and one.t_bar_stderr < 0.02 * one.t_bar
    with pytest.raises(ValueError, match="convention"):
        rad_bound(eq7_model(), p, o, 32, 32, convention="paper")
    with pytest.raises(ValueError, match="multiple of t_col"):
        TileCosts(eq7_model(), 32, 48, 100)


def test_theorem2_condition():
    assert theorem2_min_n(128, 200.0, 0.8, 0.1) == pytest.approx(127 * 200.0 / (0.1 * 0.8))
    p, o = Uniform(1, 64, 16, 128).sample(500, np.random.default_rng(0))
    bound = rad_bound(eq7_model(), p, o, 32, 32)
    lam = 0.5 * bound.capacity  # ε = 0.5
    need = theorem2_min_n(32, bound.t_max, bound.t_bar, 0.5)
    assert theorem2_holds(int(need) + 1, lam, bound) and not theorem2_holds(int(need) - 1, lam, bound)
    assert not theorem2_holds(10**12, 1.01 * bound.capacity, bound)  # beyond the bound no n is enough
    lo = saturated_throughput(1000, bound.t_bar, bound.t_max, 32)
    assert lo < 1 / bound.t_bar and saturated_throughput(10**9, bound.t_bar, bound.t_max, 32) == \
        pytest.approx(1 / bound.t_bar, rel=1e-4)


def test_rad_is_stable_below_the_roofline_bound_and_unstable_above():
    bt = make_batch_time_model("roofline-staircase", "llama-3-8b", "h100", t_col=32)
    lengths = Uniform(1, 64, 16, 128)
    p, o = lengths.sample(20000, np.random.default_rng(1))
    cap = rad_bound(bt, p, o, 32, 32).capacity
    below = queue_trace(bt, lengths, 0.9 * cap, 150, "rad", TILE32)
    above = queue_trace(bt, lengths, 1.1 * cap, 150, "rad", TILE32)
    assert below.pending[-50:].mean() < 3 * below.pending[50:100].mean() + 20 and below.pending.max() < 150
    assert abs(below.slope()) < 0.5
    assert above.slope() > 0.5 * (1.1 - 1) * cap  # Q grows roughly at λ − capacity
    assert above.pending[-1] > 0.5 * (1.1 - 1) * cap * 150
    assert above.throughput < 1.02 * cap


@pytest.mark.parametrize("name", ["rad", "sarathi", "vllm", "slai"])
def test_no_scheduler_is_stable_above_theorem_1s_bound(name):
    lengths = TiledPrompts(Uniform(1, 64, 16, 128), 32)  # Assumption 3: prompts are multiples of t*_lcm
    p, o = lengths.sample(20000, np.random.default_rng(1))
    cap = rad_bound(eq7_model(), p, o, 32, 32).capacity
    above = queue_trace(eq7_model(), lengths, 1.1 * cap, 15, name, TILE32 if name == "rad" else {})
    assert above.slope() > 0.03 * cap and above.throughput < 1.02 * cap


def test_rad_bound_command(capsys):
    assert main(["theory", "rad-bound", "--samples", "500", "--n", "100", "--rate", "0.5", "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["t_col"] == 128 and out["t_lcm"] == 128 and out["capacity_rps"] > 0.5
    assert out["theorem2"]["holds"] is False and out["theorem2"]["min_n"] > 100
    assert main(["theory", "rad-bound", "--samples", "1"]) == 2
    assert main(["theory", "rad-bound", "--n", "5"]) == 2

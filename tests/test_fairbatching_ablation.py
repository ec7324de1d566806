"""The FairBatching ablation: its CI version runs and has the table's shape, and the per-step host
cost it adds makes small-budget Sarathi pay for its many steps."""
import pytest

from llmsched.batchtime import Batch, make_batch_time_model
from llmsched.cli import reproduce_fairbatching_ablation as command
from llmsched.cli.commands import Parser
from llmsched.cli.package_commands import add_options, keywords
from llmsched.experiment import RunConfig, build_replicas
from llmsched.reproduce import fairbatching_ablation as ab
from llmsched.request import Request
from llmsched.sim.simulator import simulate
from llmsched.workload.workload import OpenLoop, named_workload


def args(*extra) -> dict:
    """The command's options, as the command passes them to ``settings``."""
    p = Parser()
    add_options(command, p)
    return keywords(p.parse_args(["--fast", *extra]), "out")


@pytest.mark.usefixtures("shared_data")  # it reads ../shared/data: skipped where that is absent
def test_fast_table_shape_and_overhead_lowers_capacity():
    out = ab.ablate(ab.settings(**args()))
    rows = out["rows"]
    assert [(r["factor"], r["level"]) for r in rows] == [(lv.factor, lv.name) for lv in ab.LEVELS
                                                         if lv.factor in ab.FAST_LEVELS]
    ref, over = rows
    for r in rows:
        assert set(r["sarathi_by_budget"]) == {128, 512}
        assert r["sarathi_budget"] in (128, 512)
        assert r["vllm_sara"] == max(r["sarathi_by_budget"].values()) > 0
        assert r["fb_v"] > 0 and r["vllm_vani"] > 0
    # 4 ms more per step costs every system capacity
    assert over["fb_v"] < ref["fb_v"] and over["vllm_sara"] < ref["vllm_sara"]
    for r in rows:  # the latency part: P99 TTFT of each system near saturation, finished requests only
        [lat] = r["latency"]
        assert lat["load"] == 1.2 and lat["sarathi_budget"] == r["sarathi_budget"]
        assert lat["rate"] == pytest.approx(1.2 * max(r["vllm_vani"], r["vllm_sara"]), rel=1e-3)
        assert all(lat[k]["ttft_p99_ms"] > 0 for k in ab.SYSTEMS)
    text = ab.report(out)
    assert text.count("\n") == 2 * len(rows) + 2 and "FB-v vs best" in text and "P99 TTFT" in text


def ttft_of_one_prompt(scheduler: str, budget: int, host_step: float, prompt: int = 2048) -> float:
    cfg = RunConfig(scheduler=scheduler, scheduler_params={"token_budget": budget}, model="llama-3.1-8b",
                    gpu="a800", batch_time_params={"host_step": host_step}, max_num_seqs=ab.MAX_NUM_SEQS)
    res = simulate(OpenLoop([Request(0, 0.0, prompt, 4)]), build_replicas(cfg))
    return float(res.requests.column("ttft")[0])


def test_host_step_makes_small_budget_prefill_pay_per_chunk():
    """A 2048-token prompt alone: Sarathi-128 prefills it in 16 steps, vLLM-vanilla (8192) in one, so the
    per-step host cost adds 16 x 4 ms to the first's TTFT and 4 ms to the second's."""
    extra_sara = ttft_of_one_prompt("sarathi", 128, ab.HOST_STEP) - ttft_of_one_prompt("sarathi", 128, 0.0)
    extra_vani = ttft_of_one_prompt("vllm-chunked", 8192, ab.HOST_STEP) - ttft_of_one_prompt("vllm-chunked", 8192, 0.0)
    assert extra_sara == pytest.approx(16 * ab.HOST_STEP, rel=1e-6)
    assert extra_vani == pytest.approx(ab.HOST_STEP, rel=1e-6)


def test_under_load_small_budgets_take_many_more_prefill_steps():
    """With the same 40 azure-conv requests, Sarathi-128 runs ten times as many steps carrying a prefill as
    vLLM-vanilla: the steps a per-step host cost is charged on that a larger budget would not have."""
    prefill_steps = {}
    for sched, budget in (("sarathi", 128), ("vllm-chunked", 8192)):
        cfg = RunConfig(scheduler=sched, scheduler_params={"token_budget": budget}, model="llama-3.1-8b",
                        gpu="a800", batch_time_params={"host_step": ab.HOST_STEP}, max_num_seqs=ab.MAX_NUM_SEQS)
        reqs = named_workload("azure-conv", rate=2.0, num_requests=40, seed=3).requests()
        steps = simulate(OpenLoop(reqs), build_replicas(cfg)).steps
        prefill_steps[sched] = sum(1 for p in steps.num_prefills if p)
    assert prefill_steps["sarathi"] > 5 * prefill_steps["vllm-chunked"]


def test_host_step_adds_exactly_its_value_to_a_step():
    base = make_batch_time_model("roofline", "qwen3-14b", "h20")
    more = make_batch_time_model("roofline", "qwen3-14b", "h20", host_step=ab.HOST_STEP)
    b = Batch(prefill_new=[128], prefill_ctx=[0], decode_ctx=[1000] * 16)
    assert more.step_time(b) - base.step_time(b) == pytest.approx(ab.HOST_STEP)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="--case"):
        ab.settings(**args("--case", "gpt-5/tpu"))
    with pytest.raises(ValueError, match="--factors"):
        ab.settings(**args("--factors", "overhead,nope"))
    with pytest.raises(ValueError, match="--workload"):
        ab.settings(**args("--workload", "nope"))
    with pytest.raises(ValueError, match="--arrivals"):
        ab.settings(**args("--arrivals", "gamma:x"))
    with pytest.raises(ValueError, match="--arrivals"):
        ab.settings(**args("--arrivals", "poisson"))
    with pytest.raises(ValueError, match="--parts"):
        ab.settings(**args("--parts", "latency"))
    with pytest.raises(ValueError, match="TPOT check"):
        ab.CheckedExecutor("median", 1)


def test_exact_prediction_fills_the_time_budget_with_the_true_step_time():
    """form_batch_exact: the chosen step's true time is within the budget, and one more token of the chunked
    prompt would not be."""
    from llmsched.schedulers.fairbatching.formation import Task, form_batch_exact
    bt = make_batch_time_model("roofline", "llama-3.1-8b", "a800")
    decodes = [Task(object(), 0.01 * i, 0.0, i, True, 1, 900 + 10 * i, 0.05) for i in range(20)]
    prompt = Task(object(), 0.3, 0.0, 99, False, 3000, 0, 0.05)
    budget = 0.05
    chosen = form_batch_exact(decodes + [prompt], budget, 8192, bt.step_time)
    assert len(chosen) == 21 and chosen[-1][0] is prompt and 1 <= chosen[-1][1] < 3000
    n = chosen[-1][1]
    dec = [t.k + 1 for t in decodes]
    assert bt.step_time(Batch([n], [0], dec)) <= budget < bt.step_time(Batch([n + 1], [0], dec))


def test_exact_prediction_needs_the_time_capacity():
    from llmsched.schedulers.fairbatching.fairbatching import FairBatching
    with pytest.raises(ValueError, match="prediction"):
        FairBatching(prediction="exact", capacity="token")
    with pytest.raises(ValueError, match="prediction"):
        FairBatching(prediction="oracle")


def test_batch_time_levels_identical_or_unavailable_models_are_not_rerun():
    """On the A800 (an A100 chip) the roofline already uses the efficiencies fitted to Vidur's A100 profiles,
    so `calibrated` is the reference's row; the H20 has no fit, so its row says why it is missing."""
    levels = {lv.name: lv for lv in ab.LEVELS if lv.factor == "batch-time"}
    cal = next(lv for name, lv in levels.items() if name.startswith("calibrated"))
    a800 = ab.settings(**args("--factors", "batch-time"))
    assert "identical" in ab.same_timing(a800, cal)
    assert ab.same_timing(a800, next(lv for lv in levels.values() if lv.batch_time == "roofline-staircase")) is None
    h20 = ab.settings(**args("--factors", "batch-time", "--case", "qwen3-14b/h20"))
    assert ab.same_timing(h20, cal).startswith("not available")
    ref = {"fb_v": 1.0, "vllm_vani": 1.0, "vllm_sara": 1.0, "sarathi_budget": 128, "latency": [],
           "sarathi_by_budget": {128: 1.0, 512: 0.5}, "fb_v_gain_pct": 0.0, "vani_vs_sara_pct": 0.0}
    row = ab.run_level(a800, cal, ref)
    assert row["fb_v"] == 1.0 and "latency" not in row and row["level"] == cal.name
    assert "n/a" not in ab.line(row, (128, 512))
    missing = ab.run_level(h20, cal, ref)
    assert missing["note"].startswith("not available") and "not available" in ab.line(missing, (128, 512))


def test_fast_cluster_with_every_router_and_the_effrps_sweep():
    """Every cluster system (report lag, rejection) gets a shared capacity, and the sweep reads the paper's peak
    EffRPS and the shared criterion off the same runs."""
    s = ab.settings(**args("--parts", "single,cluster", "--requests", "30", "--replicas", "2",
                         "--cluster-systems", "all", "--sweep", "--arrivals", "gamma:1"))
    s.levels = (ab.REFERENCE,)
    out = ab.ablate(s)
    cl = out["rows"][0]["cluster"]
    assert set(cl["capacity"]) == set(ab.CLUSTER_SYSTEMS)
    assert set(cl["vs_vllm_lb_fb_pct"]) == set(ab.CLUSTER_SYSTEMS) - set(ab.CORE_CLUSTER)
    top = max(cl["capacity"].values())
    for v in cl["sweep"].values():
        rates = [p["rate"] for p in v["points"]]
        assert rates == [round(top * m, 4) for m in s.sweep] and len(rates) == 3
        assert v["peak_effrps"] == max(p["eff_rps"] for p in v["points"])
        assert v["grid_capacity"] in [0.0] + [p["rate"] for p in v["points"] if p["meets"]]
    assert set(cl["sweep_gains"]) == {"peak_effrps", "grid_capacity"}
    assert "peak EffRPS" in ab.report(out)


def test_vllm_dp_fresh_reads_the_counts_at_every_arrival():
    from llmsched.routing.registry import make_router
    assert make_router("vllm-dp-fresh").publish_interval == 0.0
    assert make_router("vllm-dp").publish_interval == 0.1


def test_slo_loads_and_cluster_systems_arguments():
    s = ab.settings(**args("--slo", "2,0.05", "--loads", "1.0,1.5"))
    assert (s.ttft, s.tpot, s.loads) == (2.0, 0.05, (1.0, 1.5))
    cfg = ab.config(s, ab.REFERENCE, "sarathi", {"token_budget": 512})
    assert cfg.tiers == "slo:ttft=2:tpot=0.05"
    assert ab.settings(**args("--latency-budgets", "128,256")).latency_budgets == (128, 256)
    for bad in (("--slo", "2"), ("--slo", "2,x"), ("--loads", "-1"), ("--cluster-systems", "PAB-LB+nope"),
                ("--latency-budgets", "12.5")):
        with pytest.raises(ValueError, match=bad[0]):
            ab.settings(**args(*bad))

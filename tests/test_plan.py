"""`llmsched plan`: candidates, sound pruning, the replica search, cost, the Pareto frontier and bad input.

Small plans (Llama-3-8B on ShareGPT lengths, 60 s probes) so the whole file runs in well under a minute."""
import dataclasses
import json
import shlex

import pytest

from llmsched.capacity import measure, measure_point, parse_slos, run_probe
from llmsched.cli import main
from llmsched.cli.commands import build_parser
from llmsched.experiment import RunConfig, run
from llmsched.hardware.prices import load_prices
from llmsched.cli.run_options import run_configs
from llmsched.plan.candidates import Candidate, build_candidates, memory_fit, parse_variations
from llmsched.plan.prune import LengthCache, probes_saved, screen
from llmsched.plan.report import Deployment, pareto, simulate_command

SLO = "ttft_p90<=2s,tbt_p99<=0.2s"
SMALL = ["plan", "--slo", SLO, "--duration", "60", "--no-progress", "--jobs", "1"]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMSCHED_CACHE", str(tmp_path / "cache"))


def run_plan(tmp_path, capsys, *extra, status=0):
    out = tmp_path / "plan.json"
    assert main(SMALL + ["--json", str(out), *extra]) == status
    return json.loads(out.read_text()), capsys.readouterr().out


def test_small_plan_finds_the_fewest_replicas_and_the_cheapest(tmp_path, capsys):
    data, text = run_plan(tmp_path, capsys, "--target-rate", "5", "--gpus", "a100,h100", "--tp", "1,2")
    assert "cheapest deployments that meet the SLOs" in text and "Pareto frontier" in text
    assert len(data["candidates"]) == 4 and len(data["searches"]) == 4
    bounds = {c["label"]: c for c in data["candidates"]}
    for s in data["searches"]:
        probes = {int(r): p for r, p in s["probes"].items()}
        r = s["replicas"]
        assert r is not None and probes[r]["meets"] and probes[r]["verdict"] == "stable"
        # the fewest: one replica fewer failed (or is below the sound bound's least)
        assert r == bounds[s["label"]]["min_replicas"] or not probes[r - 1]["meets"]
        assert r >= bounds[s["label"]]["min_replicas"]
    prices = load_prices()
    cheapest = data["cheapest"]
    assert [d["usd_per_hour"] for d in cheapest] == sorted(d["usd_per_hour"] for d in cheapest)
    for d in cheapest:
        gpu, tp = d["label"].split()[0], int(d["label"].split()[1][2:])
        assert d["usd_per_hour"] == pytest.approx(prices.price(gpu) * tp * d["replicas"])
        assert d["usd_per_million_tokens"] == pytest.approx(d["usd_per_hour"] / (d["output_tokens_per_s"] * 3600 / 1e6))
    # the frontier: cheapest first, each strictly lower latency than the one before
    front = data["frontier"]
    assert front[0]["usd_per_hour"] == cheapest[0]["usd_per_hour"]
    assert all(a["latency"] > b["latency"] and a["usd_per_hour"] <= b["usd_per_hour"] for a, b in zip(front, front[1:]))


def test_bound_pruning_is_sound_against_a_probe():
    """The bound says an A100 carries at most ~3.4 req/s of ShareGPT: at 5 req/s one replica is never tried, and
    a probe of one replica indeed fails."""
    base = RunConfig(model="llama-3-8b", workload="sharegpt", duration=60.0)
    s = screen(Candidate("a100", 1, "sarathi"), base, 5.0, (0,), 16, LengthCache())
    assert not s.pruned and s.min_replicas == 2 and 2.5 < s.bound_rps_per_replica < 5
    probe = run_probe(dataclasses.replace(base, gpu="a100", rate=5.0, replicas=1), parse_slos(""))
    assert not probe.meets and probe.verdict != "stable"
    pruned = screen(Candidate("a100", 1, "sarathi"), base, 50.0, (0,), 4, LengthCache())
    assert pruned.pruned.startswith("bound: needs >= 15 replicas") or pruned.pruned.startswith("bound: needs >=")
    assert probes_saved(1) == 0 and probes_saved(2) == 1 and probes_saved(5) == 3


def test_memory_infeasible_candidates_are_listed_with_figures(tmp_path, capsys):
    fit = memory_fit("llama-3-70b", "rtx-6000-ada", 1)
    assert not fit["fits"] and fit["weights_gib_per_gpu"] > fit["budget_gib"]
    assert "does not fit" in fit["reason"] and "GiB" in fit["reason"]
    assert memory_fit("llama-3-70b", "h200", 2)["fits"]
    assert not memory_fit("llama-3-8b", "a100", 3)["fits"]          # 3 does not divide 32 heads
    data, text = run_plan(tmp_path, capsys, "--model", "llama-3-70b", "--gpus", "rtx-6000-ada", "--tp", "1",
                          "--target-rate", "1", "--prices", _price_file(tmp_path, {"rtx-6000-ada": 1.0}), status=1)
    assert "pruned (memory: llama-3-70b does not fit on rtx-6000-ada" in text
    assert data["candidates"][0]["memory"]["weights_gib_per_gpu"] > 100
    assert "no candidate can run: all 1 were pruned before any probe (memory; see the table)" in text


def test_reproduce_command_is_the_probe_run(tmp_path, capsys):
    data, _ = run_plan(tmp_path, capsys, "--target-rate", "2", "--gpus", "h100", "--schedulers", "sarathi,vllm",
                       "--param", "sarathi.token_budget=256")
    dep = data["cheapest"][0]
    cfg = RunConfig.from_dict(dep["config"])
    argv = shlex.split(simulate_command(cfg))[1:]
    args = build_parser().parse_args(argv)
    again = run_configs(args, [args.scheduler])[0]
    assert again.horizon > 0
    assert dataclasses.replace(again, horizon=None) == cfg
    # the command's run, read with the capacity definition, is the probe's record
    record = json.loads(json.dumps(measure(run(again), cfg.warmup, cfg.cooldown)))
    assert record == measure_point(cfg)


def test_executors_give_the_same_plan(tmp_path, capsys):
    one, _ = run_plan(tmp_path, capsys, "--target-rate", "4", "--gpus", "a100,h100", "--no-cache")
    two, _ = run_plan(tmp_path, capsys, "--target-rate", "4", "--gpus", "a100,h100", "--no-cache", "--jobs", "2")
    assert one["searches"] == two["searches"] and one["cheapest"] == two["cheapest"]


def test_ray_executor_runs_a_small_plan(tmp_path, capsys, monkeypatch):
    pytest.importorskip("ray")
    monkeypatch.setenv("RAY_ADDRESS", "local")     # a fresh local Ray, not a cluster someone left running here
    local, _ = run_plan(tmp_path, capsys, "--target-rate", "3", "--gpus", "h100")
    ray, text = run_plan(tmp_path, capsys, "--target-rate", "3", "--gpus", "h100", "--executor", "ray", "--jobs",
                         "2", "--no-cache")
    assert "ray executor" in text
    assert ray["searches"] == local["searches"]


def test_variations_and_rate_ranges(tmp_path, capsys):
    assert parse_variations(["sarathi.token_budget=256,512"], ["sarathi"]) == \
        {"sarathi": [(("token_budget", 256),), (("token_budget", 512),)]}
    cands = build_candidates(["a100"], [1], ["sarathi", "vllm"], ["round-robin", "least-outstanding"],
                             parse_variations(["sarathi.token_budget=256,512"], ["sarathi", "vllm"]))
    assert len(cands) == (2 + 1) * 2
    assert cands[0].label == "a100 tp1 sarathi[token_budget=256] round-robin"
    data, _ = run_plan(tmp_path, capsys, "--target-rate", "2:4:2", "--gpus", "h100", "--vary",
                       "sarathi.token_budget=256,1024")
    assert sorted({c["rate"] for c in data["candidates"]}) == [2.0, 4.0] and len(data["candidates"]) == 4


def test_pareto_keeps_only_undominated():
    def dep(cost, lat):
        return Deployment("x", 1.0, 1, 1, cost, 1.0, 1.0, lat, {}, RunConfig())
    front = pareto([dep(1, 5), dep(2, 3), dep(2, 4), dep(3, 3), dep(4, 1)])
    assert [(d.usd_per_hour, d.latency) for d in front] == [(1, 5), (2, 3), (4, 1)]


def _price_file(tmp_path, prices):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(prices))
    return str(path)


@pytest.mark.parametrize("extra,message", [
    (["--gpus", "b300"], "valid GPUs"),
    (["--model", "llama-9"], "valid models"),
    (["--slo", "ttft_p42<=1s"], "valid:"),
    (["--schedulers", "nope"], "known schedulers"),
    (["--routers", "magic"], "valid routers"),
    (["--gpus", "h20"], "no price for GPU 'h20'"),
    (["--tp", "x"], "--tp"),
    (["--vary", "sarathi.nope=1"], "has no parameter"),
    (["--ray-address", "10.0.0.1:6379"], "applies only with --executor ray"),
    (["--target-rate", "-3"], "positive"),
    (["--max-replicas", "0"], "--max-replicas"),
    (["--pareto-metric", "attainment"], "latency"),
    (["--sketch"], "drop --sketch"),
])
def test_bad_input_is_a_one_line_error(extra, message, capsys):
    argv = SMALL + ["--target-rate", "2", *extra] if "--target-rate" not in extra else SMALL + extra
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_options_that_do_not_apply_are_errors(tmp_path, capsys):
    assert main(SMALL + ["--target-rate", "2", "--gpu", "a100"]) == 2     # plan takes --gpus
    assert "--gpus" in capsys.readouterr().err
    assert main(SMALL + ["--target-rate", "2", "--replicas", "2"]) == 2  # plan searches the replicas itself
    assert "--replicas" in capsys.readouterr().err
    cfg = tmp_path / "run.toml"
    cfg.write_text("replicas = 4\n")
    assert main(SMALL + ["--target-rate", "2", "--config", str(cfg)]) == 2
    assert "does not apply" in capsys.readouterr().err
    assert main(SMALL) == 2
    assert "--target-rate" in capsys.readouterr().err


def test_prices_file_overrides_and_adds(tmp_path):
    table = load_prices(_price_file(tmp_path, {"a100": 1.5, "H20": 2.0}))
    assert table.price("a100") == 1.5 and table.price("h20") == 2.0 and table.price("h100") == 3.348
    with pytest.raises(ValueError, match="valid GPUs"):
        load_prices(_price_file(tmp_path, {"b300": 1.0}))
    with pytest.raises(ValueError, match="positive"):
        load_prices(_price_file(tmp_path, {"a100": -1}))


@pytest.mark.shared_data
def test_trace_at_its_own_rate(shared_data, tmp_path, capsys):
    """No --target-rate: plan for the trace's own mean rate (400 requests of the Azure conversation trace)."""
    out = tmp_path / "plan.json"
    argv = ["plan", "--slo", SLO, "--no-progress", "--jobs", "1", "--json", str(out), "--num-requests", "400",
            "--trace", str(shared_data / "traces" / "AzureLLMInferenceTrace_conv.csv"), "--gpus", "a100"]
    assert main(argv) == 0
    data, text = json.loads(out.read_text()), capsys.readouterr().out
    assert 3 < data["rates"][0] < 5 and data["cheapest"]
    assert "--trace" in text and f"--rate {data['rates'][0]!r}" in text


def test_unmeetable_slo_names_the_best_value_reached(tmp_path, capsys):
    out = tmp_path / "plan.json"
    argv = ["plan", "--slo", "ttft_p90<=1ms,tbt_p99<=0.2s", "--duration", "60", "--no-progress", "--jobs", "1",
            "--target-rate", "2", "--gpus", "h100", "--max-replicas", "2", "--json", str(out)]
    assert main(argv) == 1  # no deployment found: said, and in the exit status
    text = capsys.readouterr().out
    assert "no candidate meets the SLOs up to --max-replicas 2: ttft_p90 best" in text and "(limit 0.001 s)" in text
    assert json.loads(out.read_text())["cheapest"] == []

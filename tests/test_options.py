"""Run options taken the same way by every command: config files and CLI, defaults that apply, the workload
that workload-tuned policies follow, and the fixes of defects the fuzz found."""
import json

import pytest

from llmsched.cli import main
from llmsched.cli.commands import build_parser
from llmsched.cli.compare import COMPARE_DEFAULTS
from llmsched.cli.run_options import run_configs
from llmsched.experiment import RunConfig, run

TIERS = COMPARE_DEFAULTS["tiers"]


def configs(argv, names):
    args = build_parser().parse_args(argv)
    return run_configs(args, names)  # compare's parser carries its defaults (COMPARE_DEFAULTS)


def write_trace(tmp_path, rows=6, gap=0.5):
    path = tmp_path / "trace.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n" +
                    "".join(f"{i * gap},{20 + i},{5 + i}\n" for i in range(rows)))
    return path


def test_compare_keeps_its_slo_tiers_for_traces_and_closed_loops(tmp_path):
    trace = write_trace(tmp_path)
    cfg = configs(["compare", "--trace", str(trace)], ["vllm"])[0]
    assert cfg.tiers == TIERS and cfg.rate is None  # replayed at its own pace, tiers kept
    cfg = configs(["compare", "--concurrency", "4", "--num-requests", "8"], ["vllm"])[0]
    assert cfg.tiers == TIERS and cfg.rate is None
    cfg = configs(["compare"], ["vllm"])[0]
    assert cfg.tiers == TIERS and cfg.rate == COMPARE_DEFAULTS["rate"]


def test_config_file_and_cli_params_take_the_same_forms(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('scheduler = "sarathi"\nnum_requests = 30\n[scheduler_params.sarathi]\ntoken_budget = 256\n'
                    '[scheduler_params.vllm]\nwatermark = 0.02\n')
    a, b = configs(["compare", "--config", str(path)], ["vllm", "sarathi"])
    assert a.scheduler_params == {"watermark": 0.02} and b.scheduler_params == {"token_budget": 256}
    # the CLI wins over the file, key by key
    (b,) = configs(["simulate", "--config", str(path), "--param", "sarathi.token_budget=128"], ["sarathi"])
    assert b.scheduler_params == {"token_budget": 128}
    # a file's table for a scheduler not in this run waits for a run that has it; a misspelt name is an error
    path.write_text('[scheduler_params.sarathy]\ntoken_budget = 256\n')
    with pytest.raises(ValueError, match=r"\[sarathy\] is not a scheduler"):
        configs(["simulate", "--config", str(path)], ["sarathi"])


def test_compare_runs_the_config_files_scheduler_unless_told_otherwise(tmp_path, capsys):
    path = tmp_path / "run.toml"
    path.write_text('scheduler = "sarathi"\nnum_requests = 20\n')
    assert main(["compare", "--config", str(path), "--out", str(tmp_path / "c"), "--no-progress"]) == 0
    assert [r["scheduler"] for r in json.loads((tmp_path / "c" / "results.json").read_text())] == ["sarathi"]
    assert main(["compare", "--config", str(path), "--schedulers", "vllm", "--out", str(tmp_path / "d"),
                 "--no-progress"]) == 0
    assert [r["scheduler"] for r in json.loads((tmp_path / "d" / "results.json").read_text())] == ["vllm"]


@pytest.mark.parametrize("name", ["nested-wait", "wait"])
def test_wait_policies_follow_the_runs_workload(name):
    result = run(RunConfig(scheduler=name, workload="lmsys", rate=3.0, num_requests=30, oracle=name == "wait"))
    params = result.meta["scheduler"]["params"]
    assert params["lengths"] == "lmsys" and params["rate"] == 3.0
    # what the user sets is kept
    result = run(RunConfig(scheduler=name, workload="lmsys", rate=3.0, num_requests=30, oracle=name == "wait",
                           scheduler_params={"lengths": "sharegpt", "rate": 1.5}))
    params = result.meta["scheduler"]["params"]
    assert params["lengths"] == "sharegpt" and params["rate"] == 1.5


def test_nested_wait_takes_a_traces_own_rate(tmp_path):
    trace = write_trace(tmp_path, rows=11, gap=0.25)  # 10 gaps over 2.5 s: 4 req/s
    result = run(RunConfig(scheduler="nested-wait", trace=str(trace), rate=None))
    assert result.meta["scheduler"]["params"]["rate"] == pytest.approx(4.0)
    assert result.meta["scheduler"]["params"]["lengths"] == str(trace)


def test_lengths_file_is_the_workloads_length_distribution(tmp_path, capsys):
    path = tmp_path / "mine.csv"
    path.write_text("question_length,answer_length\n" + "70,9\n" * 5 + "0,4\n")  # a zero row is skipped
    out = tmp_path / "run"
    assert main(["simulate", "--scheduler", "vllm", "--lengths", str(path), "--rate", "5", "--num-requests", "25",
                 "--out", str(out), "--no-progress"]) == 0
    rows = (out / "requests.csv").read_text().splitlines()
    header = rows[0].split(",")
    p, o = header.index("prompt_len"), header.index("output_len")
    assert {(r.split(",")[p], r.split(",")[o]) for r in rows[1:]} == {("70", "9")}
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"]["lengths"] == str(path)


def test_closed_loop_caps_total_tokens_as_documented():
    result = run(RunConfig(scheduler="vllm", workload="arxiv-summarization", concurrency=4, num_requests=12,
                           max_total_tokens=600, rate=None))
    cols = result.requests.cols
    assert len(result.requests) == 12
    assert max(p + o for p, o in zip(cols["prompt_len"], cols["output_len"])) <= 600


def test_presets_list_no_private_parameters(capsys):
    assert main(["presets", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert not [(n, k) for n, s in data["schedulers"].items() for k in s["params"] if k.startswith("_")]
    assert "n" in data["schedulers"]["rad"]["params"]
    assert main(["presets"]) == 0
    assert "_k=" not in capsys.readouterr().out


@pytest.mark.parametrize("fields, message", [
    ({"trace": "x.csv", "time_scale": 2.0, "rate": 3.0}, "rate does not apply together with time_scale"),
    ({"concurrency": 4, "num_requests": 8, "rate_schedule": "0:2"}, "rate_schedule does not apply"),
    ({"oracle": "false"}, "oracle='false': must be true or false"),
    ({"max_num_seqs": 2.5}, "max_num_seqs=2.5: must be an integer"),
    ({"rate": 1e-300}, "rate=1e-300"),
    ({"num_blocks": 0}, "num_blocks=0"),
])
def test_python_api_gets_the_same_checks(fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RunConfig(**fields)


@pytest.mark.parametrize("name", ["nested-wait", "wait"])
def test_fluid_rule_at_an_overloaded_workload_rate_falls_back_with_a_warning(name):
    cfg = RunConfig(scheduler=name, scheduler_params={"rule": "fluid"}, workload="sharegpt", rate=60.0,
                    num_requests=20, oracle=name == "wait", replicas=2)
    with pytest.warns(UserWarning, match=f"{name} rule=fluid: .*batch-cap rule's thresholds instead"):
        result = run(cfg)
    assert result.meta["scheduler"]["params"]["rate"] == 30.0  # each of 2 replicas' share
    assert len(result.requests) == 20
    with pytest.raises(ValueError):
        run(RunConfig(**{**cfg.__dict__, "scheduler_params": {"rule": "fluid", "strict": True}}))

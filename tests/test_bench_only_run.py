"""A `vllm bench serve --save-result --save-detailed` file alone, as most users have it: no meta.json, so the
engine is taken as `vllm serve MODEL_ID` with vLLM's defaults for the card the user names (--gpu)."""
import json
import shutil
from pathlib import Path

import pytest

from llmsched.cli import main
from llmsched.hardware.batch_defaults import vllm_batch_defaults
from llmsched.validate.serving import replay_config, validate
from llmsched.validate.serving_run import load_run

RUN = Path(__file__).parent / "data" / "gpu_runs" / "h200-llama-3.1-8b-serve-sharegpt-8"


def bench_folder(tmp_path: Path, model_id: str | None = "meta-llama/Llama-3.1-8B-Instruct") -> Path:
    data = json.loads((RUN / "bench.json").read_text())
    data.pop("model_id", None)
    if model_id is not None:
        data["model_id"] = model_id
    folder = tmp_path / "bench-run"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps(data))
    return folder


def test_a_bench_result_alone_replays_with_vllm_serves_defaults_for_the_card(tmp_path):
    run = load_run(bench_folder(tmp_path))
    assert run.boundary == "client" and run.front_end == "vllm-serve"
    assert any("no meta.json" in note for note in run.log.notes)
    cfg = replay_config(run, gpu="h200")
    defaults = vllm_batch_defaults("h200")
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == (defaults.max_num_seqs, defaults.max_num_batched_tokens)
    assert cfg.tp == 1 and cfg.scheduler_params["token_budget"] == defaults.max_num_batched_tokens
    # the captured run was vllm serve with exactly these defaults on an H200: the same client-side figures as the
    # replay of the full run folder, whose KV cache is vLLM's reported one (within the KV estimate's 0.1%)
    alone, full = validate(run, "h200"), validate(load_run(RUN, boundary="client"))
    # (the full run's meta.json says its client sent the first prompt 4 times before the run, which the replay
    # caches; the result alone says so with its bench line)
    told = validate(load_run(bench_folder(tmp_path / "told"), bench="vllm bench serve --num-warmups 4"), "h200")
    for metric in ("ttft", "tpot", "e2e"):
        assert told["errors"][metric]["p50"] == pytest.approx(full["errors"][metric]["p50"], abs=1.0)
    assert alone["errors"]["ttft"]["p50"] != told["errors"]["ttft"]["p50"]


def test_the_card_defaults_differ_by_card(tmp_path):
    run = load_run(bench_folder(tmp_path))
    small = replay_config(run, gpu="l40s")
    assert (small.max_num_seqs, small.max_num_batched_tokens) == (256, 2048)


@pytest.mark.parametrize("model_id, gpu, wanted", [
    ("meta-llama/Llama-3.1-8B-Instruct", None, "no meta.json names the GPU; give --gpu"),
    (None, "h200", "or a vllm bench serve result that names its model_id"),
    ("someone/unknown-finetune", "h200", "give --model PRESET or a shipped Hugging Face id"),
    ("meta-llama/Llama-3.1-70B-Instruct", "l40s", "no meta.json: TP 1 assumed; give --serve-command"),
])
def test_what_a_bench_result_alone_cannot_say_is_a_one_line_error(tmp_path, capsys, model_id, gpu, wanted):
    folder = bench_folder(tmp_path, model_id)
    code = main(["validate-serving", str(folder)] + (["--gpu", gpu] if gpu else []))
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and wanted in err, err


def test_the_cli_prints_what_it_assumed(tmp_path, capsys):
    folder = bench_folder(tmp_path)
    shutil.copy(RUN / "config.json", folder / "config.json")
    assert main(["validate-serving", str(folder), "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    assert "vLLM (latest)" in out and "no meta.json: the engine taken as `vllm serve" in out


def test_a_guidellm_report_alone_replays_the_model_its_backend_names(tmp_path):
    """GuideLLM keeps its backend's arguments in each benchmark's config (config.backend.model): a report alone
    is a run of that model, as a bench result alone is of its model_id."""
    from tests.test_bench_sends import guidellm_with
    report = guidellm_with({"type_": "poisson", "rate": 8.0})
    report["benchmarks"][0]["config"]["backend"] = {"kind": "openai_http", "model": "meta-llama/Llama-3.1-8B-Instruct"}
    folder = tmp_path / "guidellm-run"
    folder.mkdir()
    (folder / "benchmarks.json").write_text(json.dumps(report))
    run = load_run(folder)
    assert run.log.model == "meta-llama/Llama-3.1-8B-Instruct" and run.args.assumed
    bench = validate(load_run(bench_folder(tmp_path)), "h200")
    row = validate(run, "h200")  # the same requests as the bench result: the same replay
    for metric in ("ttft", "e2e"):
        assert row["errors"][metric]["p50"] == pytest.approx(bench["errors"][metric]["p50"], abs=1.0)


def test_simulate_takes_the_serve_command_for_a_bench_result_alone(tmp_path, capsys):
    """simulate --trace of a bench result saved without meta.json, with the `vllm serve` line it ran with: the
    machine validate-serving replays it on, to the last digit; vLLM serve's limits are the card's (--gpu)."""
    folder = bench_folder(tmp_path)
    serve = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64 --max-model-len 32768"
    out = tmp_path / "sim"
    assert main(["simulate", "--trace", str(folder / "result.json"), "--serve-command", serve, "--gpu", "h200",
                 "--vllm-version", "0.26.0", "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "settings from --serve-command / --vllm-version" in err
    summary = json.loads((out / "summary.json").read_text())
    record = summary["run"]["trace_meta"]
    taken = record["taken"]
    assert record["file"] == "--serve-command / --vllm-version" and record["kept"] == {}
    assert taken["max_num_seqs"] == 64 and taken["max_model_len"] == 32768 and taken["scheduler"] == "vllm-chunked"
    budget = vllm_batch_defaults("h200").max_num_batched_tokens  # not given: vLLM serve's for an H200
    assert taken["scheduler_params"] == {"vllm-chunked": {"token_budget": budget}}
    assert taken["batch_time_params"]["async_scheduling"] is True  # vLLM 0.26's default
    from llmsched.cli.serve_engine import serve_engine
    from argparse import Namespace
    run = load_run(folder, serve=serve_engine(Namespace(serve_command=serve, vllm_version="0.26.0")))
    predicted = validate(run, "h200")["simulated"]
    for metric in ("ttft", "tpot", "e2e"):
        assert summary["latency"][metric]["p50"] == predicted[metric]["p50"]


def test_a_bench_result_alone_without_a_serve_command_says_what_it_simulates(tmp_path, capsys):
    folder = bench_folder(tmp_path)
    assert main(["simulate", "--trace", str(folder / "result.json"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "names its model (meta-llama/Llama-3.1-8B-Instruct) but no meta.json" in err and "--serve-command" in err


@pytest.mark.parametrize("argv, wanted", [
    (["simulate", "--serve-command", "vllm serve x"], "--serve-command: the engine arguments of the run a --trace"),
    (["simulate", "--trace", "RUN_LOG", "--serve-command", "vllm serve x -tp 2"],
     "meta.json: the run's engine arguments are there, and --serve-command"),
    (["compare", "--trace", "BENCH", "--vllm-version", "latest"], "--vllm-version 'latest': not a version"),
    (["simulate", "--trace", "BENCH", "--serve-command", "vllm serve meta-llama/Llama-3.1-8B-Instruct -pp 2"],
     "-pp"),
    (["simulate", "--trace", "SIMULATED", "--serve-command", "vllm serve meta-llama/Llama-3.1-8B-Instruct"],
     "the meta.json beside the trace is a simulation's, not the run's engine arguments"),
])
def test_serve_command_misuse_is_a_one_line_error(tmp_path, capsys, argv, wanted):
    bench = bench_folder(tmp_path) / "result.json"
    if "SIMULATED" in argv:  # llmsched's own output folder beside the trace (its meta.json has no engine_kwargs)
        assert main(["simulate", "--trace", str(bench), "--num-requests", "5", "--out", str(bench.parent),
                     "--no-progress"]) == 0
        capsys.readouterr()
        argv = [str(bench) if a == "SIMULATED" else a for a in argv]
    argv = [{"RUN_LOG": str(RUN / "requests.jsonl"), "BENCH": str(bench)}.get(a, a) for a in argv]
    code = main(argv + ["--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and wanted in err, err


@pytest.mark.parametrize("command", ["compare", "sweep"])
def test_compare_and_sweep_say_so_too(tmp_path, capsys, command):
    folder = bench_folder(tmp_path)
    extra = ["--schedulers", "sarathi"] + (["--rates", "1"] if command == "sweep" else [])
    assert main([command, "--trace", str(folder / "result.json"), *extra, "--out", str(tmp_path / "out"),
                 "--no-progress"]) == 0
    assert "names its model (meta-llama/Llama-3.1-8B-Instruct) but no meta.json" in capsys.readouterr().err

"""simulate --trace (and compare, sweep) simulate the machine that ran a captured trace: the settings of the run's
meta.json and config.json beside it, wherever the user gave none; the user's own values win; a trace without a real
run's meta.json replays as before; a meta.json that cannot be read is one line naming it and its field."""
import json
import shutil
from pathlib import Path

from llmsched.cli import main
from llmsched.cli.commands import build_parser
from llmsched.cli.run_options import run_configs
from llmsched.experiment import RunConfig, run
from llmsched.metrics.summary import summarize
from llmsched.metrics.writers import write_run
from llmsched.validate.serving import validate
from llmsched.validate.serving_run import load_run

RUN = Path(__file__).parent / "data" / "gpu_runs" / "h100-llama-3.1-8b"
LOG = RUN / "requests.jsonl"
META = json.loads((RUN / "meta.json").read_text())


def simulate(tmp_path, *extra) -> tuple[dict, dict]:
    out = tmp_path / "sim"
    assert main(["simulate", "--trace", str(LOG), "--out", str(out), "--no-progress", *extra]) == 0
    return json.loads((out / "summary.json").read_text()), json.loads((out / "meta.json").read_text())


def test_simulate_trace_runs_the_h100_llama_and_vllms_kv_cache_of_its_meta_json(tmp_path, capsys):
    summary, meta = simulate(tmp_path)
    record = summary["run"]["trace_meta"]
    assert record["file"] == str(RUN / "meta.json") and record["kept"] == {}
    taken = record["taken"]
    assert taken["gpu"] == "h100" and taken["model"] == str(RUN / "config.json")
    assert taken["scheduler"] == "vllm-chunked" and taken["latency_boundary"] == "engine"
    kwargs = META["engine_kwargs"]
    for key in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
        assert taken[key] == kwargs[key] == meta["config"][key]
    assert taken["batch_time_params"]["capture_sizes"] == META["engine_defaults_seen"]["cudagraph_capture_sizes"]
    assert record["kv_blocks"] == meta["kv_blocks"] == META["engine_defaults_seen"]["num_gpu_blocks"]
    assert record["kv_cache"].startswith("reported by vLLM (meta.json")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"llmsched simulate: settings from {RUN / 'meta.json'}")
    # the same simulation validate-serving compares with the run: the same figures, to the last digit
    predicted = validate(load_run(RUN))["simulated"]
    for metric in ("ttft", "tpot", "e2e"):
        assert summary["latency"][metric]["p50"] == predicted[metric]["p50"]


def test_a_run_folder_as_trace_replays_its_log_as_validate_serving_reads_it(tmp_path):
    """--trace FOLDER takes the folder's per-request log (requests.jsonl here, measured in the engine) and the
    meta.json beside it: the same run as --trace FOLDER/requests.jsonl, to the last digit."""
    by_file, _ = simulate(tmp_path)
    out = tmp_path / "by-folder"
    assert main(["simulate", "--trace", str(RUN), "--out", str(out), "--no-progress"]) == 0
    by_folder = json.loads((out / "summary.json").read_text())
    assert by_folder["run"]["trace_meta"]["taken"]["latency_boundary"] == "engine"
    assert by_folder["latency"] == by_file["latency"]


def test_a_folder_of_several_reports_names_them(tmp_path, capsys):
    perf = Path(__file__).parent / "data" / "inference_perf_h100"
    assert main(["simulate", "--trace", str(perf), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "is a folder without one per-request log" in err and "stage_3_lifecycle_metrics.json" in err


def test_an_explicit_gpu_wins_and_the_kv_cache_is_sized_for_it(tmp_path):
    summary, meta = simulate(tmp_path, "--gpu", "a100")
    record = summary["run"]["trace_meta"]
    assert meta["config"]["gpu"] == "a100" and record["kept"] == {"gpu": "h100"} and "gpu" not in record["taken"]
    assert record["taken"]["model"] == meta["config"]["model"] == str(RUN / "config.json")  # the rest still the run's
    assert not meta["kv_cache"]["source"].startswith("reported by vLLM")  # H100's blocks are not an A100's
    assert meta["kv_blocks"] != META["engine_defaults_seen"]["num_gpu_blocks"]


def test_a_config_files_limit_wins_and_drops_the_runs_cuda_graph_sizes(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("max_num_seqs = 64\n")
    args = build_parser().parse_args(["simulate", "--trace", str(LOG), "--config", str(path)])
    (cfg,) = run_configs(args, ["vllm-chunked"])
    assert cfg.max_num_seqs == 64 and cfg.gpu == "h100" and cfg.scheduler_params == {"token_budget": 2048}
    assert "capture_sizes" not in cfg.batch_time_params  # vLLM's for max_num_seqs 128, not for 64
    assert args.trace_meta_found.kept == {"max_num_seqs": META["engine_kwargs"]["max_num_seqs"]}


def test_compare_takes_the_machine_but_runs_its_own_schedulers():
    args = build_parser().parse_args(["compare", "--trace", str(LOG)])
    chunked, sarathi = run_configs(args, ["vllm-chunked", "sarathi"])
    assert chunked.gpu == sarathi.gpu == "h100" and chunked.max_num_seqs == sarathi.max_num_seqs == 128
    assert chunked.scheduler_params == {"token_budget": 2048} and sarathi.scheduler_params == {}
    assert "scheduler" not in args.trace_meta_found.taken


def test_a_trace_without_a_runs_meta_json_replays_as_before(tmp_path, capsys):
    folder = tmp_path / "bare"
    folder.mkdir()
    trace = folder / "requests.jsonl"
    shutil.copy(LOG, trace)
    out = tmp_path / "cli"
    assert main(["simulate", "--trace", str(trace), "--out", str(out), "--no-progress"]) == 0
    assert "settings from" not in capsys.readouterr().err
    cfg = RunConfig(trace=str(trace), rate=None)  # the library's defaults: llama-3-8b on an A100, sarathi
    result = run(cfg)
    write_run(result, summarize(result), tmp_path / "api")
    for name in ("requests.csv", "steps.csv"):
        assert (out / name).read_bytes() == (tmp_path / "api" / name).read_bytes()
    summary = json.loads((out / "summary.json").read_text())
    assert "trace_meta" not in summary["run"]
    assert json.loads((out / "meta.json").read_text())["config"] == json.loads(
        (tmp_path / "api" / "meta.json").read_text())["config"]
    # llmsched's own output folder has a meta.json too, not a run's (no engine_kwargs): it is not read
    shutil.copy(out / "meta.json", folder / "meta.json")
    again = tmp_path / "again"
    assert main(["simulate", "--trace", str(trace), "--out", str(again), "--no-progress"]) == 0
    assert (again / "requests.csv").read_bytes() == (out / "requests.csv").read_bytes()

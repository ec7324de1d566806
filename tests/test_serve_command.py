"""A run saved as a `vllm bench serve` result alone, replayed with the `vllm serve` line it ran with: the flags read
as meta.json's engine arguments, a flag that changes the engine and is not modelled refused, and the replay the
same as the run's own meta.json gives."""
import json
import shutil
from pathlib import Path

import pytest

from llmsched.cli import main
from llmsched.validate.serve_command import serve_meta
from llmsched.validate.serving import engine_fields, validate
from llmsched.validate.serving_run import load_runs

RUN = Path(__file__).parent / "data" / "gpu_runs" / "h200-llama-3.1-8b-serve-sharegpt-8"


def test_flags_read_as_vllm_names_them():
    meta = serve_meta("CUDA_VISIBLE_DEVICES=0,1 vllm serve meta-llama/Llama-3.1-70B -tp 2 --max_num_seqs=64 "
                      "--max-model-len 32K --no-enable-prefix-caching --kv-cache-dtype fp8 --no-async-scheduling "
                      "--port 8001 --served-model-name a b --disable-log-requests --num-gpu-blocks-override 900")
    assert meta["model"] == "meta-llama/Llama-3.1-70B"
    assert meta["engine_kwargs"] == {"model": "meta-llama/Llama-3.1-70B", "tensor_parallel_size": 2,
                                     "max_num_seqs": 64, "max_model_len": 32768, "enable_prefix_caching": False,
                                     "kv_cache_dtype": "fp8", "num_gpu_blocks": 900}
    assert meta["engine_defaults_seen"] == {"async_scheduling": False}
    assert serve_meta("python -m vllm.entrypoints.openai.api_server --model m --max-model-len 32k")[
        "engine_kwargs"] == {"model": "m", "max_model_len": 32000}
    assert serve_meta("-dp 2 -ep")["engine_kwargs"] == {"data_parallel_size": 2, "enable_expert_parallel": True}
    assert "max_model_len" not in serve_meta("vllm serve m --max-model-len auto")["engine_kwargs"]
    assert serve_meta("--kv-cache-memory-bytes 8G")["engine_kwargs"] == {"kv_cache_memory_bytes": 8 << 30}


@pytest.mark.parametrize("command, says", [
    ("vllm serve m --disable-custom-all-reduce", "--disable-custom-all-reduce is not modelled"),
    ("vllm serve m --speculative-config '{\"method\": \"ngram\"}'", "--speculative-config is not modelled"),
    ("vllm serve m -pp 2", "-pp 2 is not modelled"),
    ("vllm serve m --scheduling-policy priority", "--scheduling-policy priority is not modelled"),
    ("vllm serve m --max-num-seqs 0", "--max-num-seqs 0 is out of range"),
    ("vllm serve m --max-num-seqs", "--max-num-seqs needs a value"),
    ("vllm serve m --max-model-len 1.5", "not a whole number"),
    ("vllm serve m --gpu-memory-utilization 0", "not a fraction"),
    ("vllm serve m n", "a second model"),
    ("vllm serve 'm", "quote it"),
])
def test_a_flag_the_replay_cannot_honour_is_refused(command, says):
    with pytest.raises(ValueError, match="--serve-command: .*" + says.replace("(", r"\(")):
        serve_meta(command)


def bench_alone(tmp_path) -> Path:
    """The H200 capture's bench result and config.json, without its meta.json."""
    shutil.copy(RUN / "bench.json", tmp_path / "bench.json")
    shutil.copy(RUN / "config.json", tmp_path / "config.json")
    return tmp_path / "bench.json"


def test_a_bench_result_with_its_serve_line_replays_as_with_its_meta_json(tmp_path):
    meta = json.loads((RUN / "meta.json").read_text())
    kw, seen = meta["engine_kwargs"], meta["engine_defaults_seen"]
    command = (f"vllm serve {kw['model']} --load-format dummy --seed 0 --max-num-seqs {kw['max_num_seqs']} "
               f"--max-num-batched-tokens {kw['max_num_batched_tokens']} --max-model-len {kw['max_model_len']} "
               f"--dtype bfloat16 --num-gpu-blocks-override {seen['num_gpu_blocks']}")
    serve = {**serve_meta(command), "vllm_version": meta["vllm_version"]}
    # (and the benchmark's line: its client sent the first prompt 4 times before the run, as meta.json says)
    [alone] = load_runs(bench_alone(tmp_path), serve=serve, bench="vllm bench serve --num-warmups 4")
    [whole] = load_runs(RUN, "bench.json")
    assert alone.name == "bench" and alone.args.given_by == "--serve-command"
    got, want = validate(alone, "h200"), validate(whole)
    assert got["simulated"] == want["simulated"] and got["real"] == want["real"]


def test_the_command_line_takes_the_file_and_the_serve_line(tmp_path, capsys):
    path = bench_alone(tmp_path)
    main(["validate-serving", str(path), "--gpu", "h200", "--vllm-version", "0.26.0",
          "--serve-command", "vllm serve meta-llama/Llama-3.1-8B -tp 2 --max-num-seqs 256"])
    out = capsys.readouterr().out
    assert "bench (validation): " in out and "config.json on h200, tp 2, dp 1, vLLM 0.26.0" in out
    assert main(["validate-serving", str(RUN), "--serve-command", "-tp 2"]) == 2
    assert "meta.json: the run's engine arguments are there" in capsys.readouterr().err
    assert main(["validate-serving", str(path), "--vllm-version", "latest"]) == 2
    assert "--vllm-version 'latest': not a version" in capsys.readouterr().err


def test_chunked_prefill_off_runs_prompts_whole_with_vllms_budget(tmp_path):
    """--no-enable-chunked-prefill: vllm-chunked with chunked_prefill off, and, with no budget given, vLLM's default
    raised to the context length (as EngineArgs does); meta.json's engine_kwargs say the same."""
    path = bench_alone(tmp_path)
    serve = serve_meta("vllm serve meta-llama/Llama-3.1-8B --max-model-len 32k --no-enable-chunked-prefill")
    [run] = load_runs(path, serve=serve)
    fields = engine_fields(run, "h200")
    assert fields["scheduler_params"] == {"token_budget": 32000, "chunked_prefill": False}
    assert fields["max_num_batched_tokens"] == 32000
    [run] = load_runs(path, serve=serve_meta("vllm serve m --max-num-batched-tokens 4096"))
    assert engine_fields(run, "h200")["scheduler_params"] == {"token_budget": 4096}


def test_enforce_eager_replays_without_cuda_graphs_and_says_what_is_left_out(tmp_path):
    [run] = load_runs(bench_alone(tmp_path), serve=serve_meta("vllm serve m --enforce-eager"))
    assert engine_fields(run, "h200")["batch_time_params"]["capture_sizes"] == []
    assert any("enforce_eager" in note and "host launch" in note for note in run.log.notes)

"""``--bench-command``: a vllm bench serve result saved without meta.json replays with the prefixes its dataset gave
the prompts, read from the line it ran with; checked on a real CPU run (vLLM 0.32, tests/data/cpu_prefix_bench)
against the same run with its meta.json."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmsched.validate.serve_command import serve_meta
from llmsched.validate.serving import validate
from llmsched.validate.serving_run import load_runs
from llmsched.workload.traces.bench_command import bench_client
from llmsched.workload.traces.bench_prefixes import dataset_settings
from llmsched.workload.traces.readers import TraceError
from test_client_logs import cpu_params

RUN = Path(__file__).parent / "data" / "cpu_prefix_bench" / "prefix-repetition"
BENCH = ("vllm bench serve --model tiny --dataset-name prefix_repetition --prefix-repetition-prefix-len 512 "
         "--prefix-repetition-suffix-len 128 --prefix-repetition-num-prefixes 4 --prefix-repetition-output-len 32 "
         "--num-prompts 40 --request-rate 4 --num-warmups 2 --ignore-eos --save-result --save-detailed")
SERVE = ("vllm serve tiny --max-model-len 1024 --max-num-seqs 16 --max-num-batched-tokens 1024 --block-size 32 "
         "--kv-cache-memory-bytes 268435456 --enforce-eager --dtype bfloat16 --load-format dummy")


@pytest.fixture
def alone(tmp_path) -> Path:
    """The run's bench result and config.json in a folder of their own, as a user keeps them: no meta.json."""
    folder = tmp_path / "alone"
    folder.mkdir()
    for name in ("bench.json", "config.json"):
        shutil.copy(RUN / name, folder / name)
    return folder


def test_the_line_gives_the_runs_dataset_whatever_way_it_is_written():
    for line in (BENCH, "HF_HOME=/x " + BENCH.replace("--num-prompts 40", "--num_prompts=40"),
                 "python -m vllm.entrypoints.cli.main bench serve" + BENCH[len("vllm bench serve"):],
                 BENCH[len("vllm bench serve "):]):
        client = bench_client(line)
        s = dataset_settings(client, "x")
        assert (client["num_prompts"], s["dataset"], s["prefix_repetition_prefix_len"],
                s["prefix_repetition_num_prefixes"], s["seed"]) == (40, "prefix_repetition", 512, 4, 0)
    assert bench_client("vllm bench serve --model m")["num_prompts"] == 1000  # vLLM's default
    assert dataset_settings(bench_client("vllm bench serve --random-prefix-len 64"), "x")["dataset"] == "random"
    # the older script's dataset defaulted to sharegpt, which shares no prefix
    old = bench_client("python benchmarks/benchmark_serving.py --random-prefix-len 64")
    assert dataset_settings(old, "x")["dataset"] == "sharegpt"


@pytest.mark.parametrize("line, message", [
    ("vllm serve tiny --max-num-seqs 8", r"`vllm serve` is the server's line; give it to --serve-command"),
    ("vllm bench throughput --model m", r"`vllm bench throughput` is not the serving benchmark"),
    ("vllm bench serve --num-prompts 0", r"--num-prompts 0; vllm bench serve sends at least one prompt"),
    ("vllm bench serve --seed --disable-shuffle", r"--seed has no value"),
    ("vllm bench serve --random-prefix-len x", r"--random-prefix-len 'x' is not an integer"),
    ("vllm bench serve --dataset-name 'random", r"No closing quotation; quote it as a shell would"),
    ("vllm bench serve --num-warmups -1", r"num_warmups is -1; vllm bench serve takes an integer >= 0"),
])
def test_a_line_that_is_not_a_runs_is_refused_by_name(line, message):
    with pytest.raises(TraceError, match=r"^--bench-command: " + message):
        bench_client(line)


def test_validate_serving_replays_a_result_alone_as_with_its_meta_json(alone):
    """The result alone, with its engine's and its benchmark's lines, replays as the run folder with meta.json does;
    without the benchmark's line its prompts share nothing and the TTFT comes out 2.5 times the real one."""
    kw = dict(gpu="l4", batch_time="linear", batch_time_params=cpu_params(RUN))
    with_meta = validate(load_runs(RUN, "bench.json")[0], **kw)
    given = validate(load_runs(alone / "bench.json", serve=serve_meta(SERVE), bench=BENCH)[0], **kw)
    blind = validate(load_runs(alone / "bench.json", serve=serve_meta(SERVE))[0], **kw)
    assert given["errors"] == with_meta["errors"]
    # each prefix found by 9 of its 10 prompts, and the first prompt whole (its line's --num-warmups 2)
    assert given["prefix_cache"]["simulated"]["cached_tokens"] == 512 * 36 + 640
    assert abs(given["errors"]["ttft"]["p50"]) < 30 < 100 < blind["errors"]["ttft"]["p50"]


def run_cli(*words) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmsched", *words], capture_output=True, text=True)


def test_the_commands_take_the_line(alone, tmp_path):
    params = [w for k, v in cpu_params(RUN).items() for w in ("--bt-param", f"{k}={v}")]
    done = run_cli("validate-serving", str(alone / "bench.json"), "--serve-command", SERVE, "--bench-command", BENCH,
                   "--gpu", "l4", "--batch-time", "linear", *params, "--out", str(tmp_path / "v"))
    assert done.returncode == 0, done.stderr
    row = json.loads((tmp_path / "v" / "validation.json").read_text())["runs"][0]
    assert row["prefix_cache"]["simulated"]["cached_tokens"] == 512 * 36 + 640
    done = run_cli("simulate", "--trace", str(alone / "bench.json"), "--serve-command", SERVE, "--bench-command",
                   BENCH, "--gpu", "l4", "--out", str(tmp_path / "s"))
    assert done.returncode == 0, done.stderr
    assert "prompts from --bench-command: prefix_repetition, 4 prefixes of 512 tokens (shuffled with seed 0)" in \
        done.stderr
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["prefix_cache"]["cached_tokens"] == 512 * 36 + 640


@pytest.mark.parametrize("trace, message", [
    (None, r"--bench-command applies to a replayed vllm bench serve result \(--trace FILE\)"),
    (RUN / "bench.json", r"meta.json: its client says how the benchmark ran, and --bench-command gives another"),
    ("csv", r"not a vllm bench serve result or a server's requests.jsonl; --bench-command applies to those"),
])
def test_the_line_where_it_cannot_apply_is_refused(tmp_path, trace, message):
    if trace == "csv":  # a trace of another kind (Vidur's columns)
        trace = tmp_path / "trace.csv"
        trace.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,10\n0.5,200,20\n")
    done = run_cli("simulate", "--bench-command", BENCH, *(["--trace", str(trace)] if trace else []))
    assert done.returncode != 0 and re.search(message, done.stderr), done.stderr
    assert done.stderr.strip().count("\n") == 0  # one line


def test_validate_serving_refuses_the_line_for_another_clients_log():
    folder = Path(__file__).parent / "data" / "inference_perf_h100"
    if not folder.is_dir():
        pytest.skip("no inference-perf run in tests/data")
    stage = next(iter(sorted(folder.rglob("stage_*_lifecycle_metrics.json"))))
    with pytest.raises(ValueError, match=r"an inference-perf lifecycle report, not a vllm bench serve result"):
        load_runs(stage.parent, bench=BENCH)

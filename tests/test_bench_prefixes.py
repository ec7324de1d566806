"""vllm bench serve's prefix-sharing datasets replayed with the prefixes their prompts had: two real CPU runs (vLLM
0.32, prefix cache on), ``prefix_repetition`` (4 prefixes of 512 tokens, 10 prompts each, shuffled) and ``random``
with ``--random-prefix-len 384``, each with the engine's own count of the prompt tokens its cache held."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from llmsched.validate.serving import validate
from llmsched.validate.serving_run import load_runs
from llmsched.workload.traces.bench_prefixes import bench_prefixes, dataset_settings
from llmsched.workload.traces.readers import TraceError
from llmsched.workload.traces.server_log import read_server_log
from test_client_logs import cpu_params

RUNS = Path(__file__).parent / "data" / "cpu_prefix_bench"


def engine_cached(folder: Path) -> list[int]:
    """vLLM's num_cached_tokens of each request, in send order."""
    rows = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines()]
    return [r["num_cached_tokens"] for r in sorted(rows, key=lambda r: r["client_sent"])]


def test_the_replayed_shuffle_gives_each_request_the_prefix_vllm_gave_it():
    """A request finds cached blocks exactly when an earlier one (or the warm-ups, which send the first prompt)
    began with the same prefix, as the replay's groups say; a shuffle not repeated would miss about half."""
    folder = RUNS / "prefix-repetition"
    log = read_server_log(folder / "bench.json", measured=True)
    group = log.prefixes.group
    assert sorted(np.bincount(group)) == [10, 10, 10, 10] and (log.prefixes.length == 512).all()
    cached = engine_cached(folder)
    seen = {group[0]}  # the warm-ups sent the first prompt before the run
    for g, c in zip(group, cached):
        assert (c > 0) == (g in seen)
        assert c in (0, 512) or g == group[0]  # a prefix's 16 blocks of 32, or the warm-ups' whole prompt
        seen.add(g)
    unshuffled = np.repeat(np.arange(4), 10)
    seen, wrong = {unshuffled[0]}, 0
    for g, c in zip(unshuffled, cached):
        wrong += (c > 0) != (g in seen)
        seen.add(g)
    assert wrong >= 4


def test_a_random_prefix_is_every_prompts():
    folder = RUNS / "random-prefix"
    log = read_server_log(folder / "bench.json", measured=True)
    assert (log.prefixes.group == 0).all() and (log.prefixes.length == 384).all()
    cached = engine_cached(folder)
    assert all(c >= 384 for c in cached[1:])  # 12 blocks of 32 tokens: the prefix, from the warm-ups on


@pytest.mark.parametrize("name", ["prefix-repetition", "random-prefix"])
def test_validate_serving_replays_the_prefixes_and_matches_the_engines_cache(tmp_path, name):
    folder = RUNS / name
    # each run's own step model, fitted on the prompt tokens vLLM computed (the cached ones cost nothing)
    kw = dict(gpu="l4", batch_time="linear", batch_time_params=cpu_params(folder))
    shared = validate(load_runs(folder)[0], **kw)  # the engine's log: its hit rate is measured
    real, sim = shared["prefix_cache"]["real"], shared["prefix_cache"]["simulated"]
    prefix, groups, first = (512, 4, 640) if name == "prefix-repetition" else (384, 1, 704)
    # each prefix's blocks, found by all but its first prompt, and the first prompt whole (less its last token's
    # block): the warm-ups sent it before the run (workload/traces/bench_warmups.py)
    assert sim["cached_tokens"] == prefix * (40 - groups) + first
    # the random dataset's real run held more: suffix blocks equal to an earlier prompt's, which the replay cannot
    # know without the tokens
    extra = real["cached_tokens"] - sim["cached_tokens"]
    assert extra == 0 if name == "prefix-repetition" else 0 < extra < 0.15 * real["cached_tokens"]
    alone = tmp_path / name
    shutil.copytree(folder, alone)
    meta = json.loads((alone / "meta.json").read_text())
    meta["client"].pop("dataset_args")
    (alone / "meta.json").write_text(json.dumps(meta))
    blind = validate(load_runs(alone)[0], **kw)
    assert blind["prefix_cache"]["simulated"]["hit_rate"] < 0.05 < real["hit_rate"]
    # at the client: the bench result replayed with its prefixes predicts the TTFT the prefix cache gave
    client = validate(load_runs(folder, "bench.json")[0], **kw)
    without = validate(load_runs(alone, "bench.json")[0], **kw)
    assert abs(client["errors"]["ttft"]["p50"]) < 30 < 100 < without["errors"]["ttft"]["p50"]
    assert abs(shared["errors"]["ttft"]["p50"]) < 25 < 150 < blind["errors"]["ttft"]["p50"]
    assert any("prefix" in n for n in shared["prefix_cache"]["notes"])


def test_dataset_settings_read_the_flags_or_the_named_keys():
    flags = {"dataset_args": ["--dataset-name", "prefix_repetition", "--prefix-repetition-prefix-len=64",
                              "--prefix-repetition-num-prefixes", "2", "--ignore-eos", "--seed", "7",
                              "--num-prompts", "8"]}
    s = dataset_settings(flags, "meta.json: client")
    assert (s["dataset"], s["prefix_repetition_prefix_len"], s["prefix_repetition_num_prefixes"], s["seed"]) == \
        ("prefix_repetition", 64, 2, 7)
    named = {"dataset": "random", "random_prefix_len": 100}
    got = bench_prefixes(named, 3, np.array([150, 120, 130]), "meta.json: client")
    assert list(got.group) == [0, 0, 0] and list(got.length) == [100] * 3
    assert bench_prefixes({"dataset": "random", "random_input_len": 100}, 3, np.array([1, 2, 3]), "x") is None
    assert bench_prefixes({"dataset_args": ["--dataset-name", "sharegpt"]}, 3, np.array([1, 2, 3]), "x") is None
    # a setting of a dataset the run did not use changes nothing, and is not read
    assert bench_prefixes({"dataset": "sharegpt", "seed": "abc", "random_prefix_len": "x"}, 3, np.ones(3), "x") is None
    unshuffled = bench_prefixes({**flags, "disable_shuffle": True}, 8, np.full(8, 100), "x")
    assert list(unshuffled.group) == [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.mark.parametrize("client, message", [
    ({"dataset": "random", "random_prefix_len": 200}, r"input_lens\[0\] is 150, shorter than the dataset's prefix"),
    ({"dataset": "prefix_repetition", "prefix_repetition_num_prefixes": 2}, r"made a multiple of 2 prompts, but the "
                                                                           r"log holds 3 requests"),
    ({"dataset": "prefix_repetition", "prefix_repetition_num_prefixes": 1, "num_prompts": 4},
     r"made 4 prompts \(1 x num_prompts 4 // 1\), but the log holds 3 requests.*replay the vllm bench serve result"),
    ({"dataset": "random", "random_prefix_len": -1}, r"random_prefix_len is -1"),
    ({"dataset_args": "--dataset-name random --random-prefix-len x"}, r"--random-prefix-len 'x' is not an integer"),
    ({"dataset_args": ["--dataset-name", "random", "--random-prefix-len"]}, r"--random-prefix-len has no value"),
    ({"dataset_args": 5}, r"dataset_args: 5; write vllm bench serve's dataset flags"),
    ({"dataset": "prefix_repetition", "disable_shuffle": "no"}, r"disable_shuffle is 'no'"),
])
def test_dataset_settings_that_cannot_be_the_runs_are_refused(client, message):
    with pytest.raises(TraceError, match=message):
        bench_prefixes(client, 3, np.array([150, 120, 130]), "meta.json: client")


def test_simulate_replays_a_bench_result_with_its_datasets_prefixes(tmp_path):
    """``simulate --trace`` of the result in its run folder takes the prefixes too, and says so on stderr."""
    import subprocess
    import sys
    out = tmp_path / "sim"
    done = subprocess.run([sys.executable, "-m", "llmsched", "simulate", "--trace",
                           str(RUNS / "prefix-repetition" / "bench.json"), "--gpu", "l4", "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "prompts from client.dataset: prefix_repetition, 4 prefixes of 512 tokens (shuffled with seed 0)" in \
        done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prefix_cache"]["cached_tokens"] == 512 * 36 + 640  # and the warm-ups' first prompt

"""vllm bench serve's ready check and warm-ups send its first prompt before the run: the replay starts with it in
the prefix cache, checked request by request against vLLM's own ``num_cached_tokens`` on a real CPU run (vLLM 0.32,
tests/data/cpu_prefix_bench, ``--num-warmups 2``)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from llmsched.experiment import build_replicas, run
from llmsched.request import Request
from llmsched.run_config import RunConfig
from llmsched.validate.serving import replay_config
from llmsched.validate.serving_run import load_run
from llmsched.warm_caches import warm_caches
from llmsched.workload.traces.bench_command import bench_client
from llmsched.workload.traces.bench_warmups import UNSTATED_NOTE, SentBefore, bench_warmups
from llmsched.workload.traces.hash_blocks import own_content
from llmsched.workload.traces.readers import TraceError
from llmsched.workload.traces.server_log import read_server_log
from test_client_logs import cpu_params

RUN = Path(__file__).parent / "data" / "cpu_prefix_bench" / "prefix-repetition"


def replayed_cached(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """The prompt tokens each request found cached, in the replay and in vLLM, in the log's order."""
    real = load_run(folder)
    result = run(replay_config(real, gpu="l4", batch_time="linear", batch_time_params=cpu_params(RUN)))
    ids, cached = result.requests.column("id"), result.requests.column("cached_tokens")
    return cached[np.argsort(ids)], real.log.cached_tokens


def test_every_request_finds_what_vllm_found_cached(tmp_path):
    sim, real = replayed_cached(RUN)
    assert (sim == real).all() and real[0] == 640  # the first prompt's 20 blocks of 32, cached by the warm-ups
    cold = tmp_path / "cold"
    shutil.copytree(RUN, cold)
    meta = json.loads((cold / "meta.json").read_text())
    meta["client"].pop("num_warmups")  # a client that sent nothing before the run
    (cold / "meta.json").write_text(json.dumps(meta))
    sim, real = replayed_cached(cold)
    assert sim[0] == 0 and (sim[1:] == real[1:]).all()


@pytest.mark.parametrize("client, version, sends", [
    ({"tool": "vllm bench serve", "num_warmups": 2}, None, 2),
    ({"dataset_args": ["--num-warmups", "3", "--max-concurrency", "1"]}, None, 3),  # one at a time: 3 ranks' worth
    ({"dataset_args": "--ready-check-timeout-sec 600"}, None, 1),  # the ready check alone
    ({"num_warmups": 1, "ready_check_timeout_sec": 30}, None, 2),
    ({"num_warmups": 0}, None, 0),
    ({"tool": "vllm bench serve"}, None, 0),  # an unknown release: today's defaults, nothing before the run
    ({"tool": "vllm bench serve"}, "0.14.0", 0),  # the first release whose ready check is off by default
    ({"tool": "vllm bench serve"}, "0.13.0", 1),  # still 600 s: the ready check sent the first prompt
    ({"num_warmups": 2}, "v0.12.0", 3),
    ({"ready_check_timeout_sec": 0}, "0.11.0", 0),  # told 0, it sent no probe
    ({"ready_check_timeout_sec": 0}, "0.10.1", 1),  # it probed whatever the timeout
    (None, "0.9.2", 1),  # the "initial single prompt test run", always
    (bench_client("python benchmarks/benchmark_serving.py --dataset-name random"), None, 1),  # the older script
])
def test_the_warmups_are_read_from_the_clients_settings_and_release(client, version, sends):
    got = bench_warmups(client, "meta.json: client", version)
    assert got.sends == sends if sends else got is None


def test_an_unstated_ready_check_is_said_and_a_release_before_0_14_sends_it(tmp_path):
    """The prefix-repetition run without its --num-warmups: under vLLM 0.32 (its meta.json) nothing went before the
    run; said to be vLLM 0.13, its ready check sent the first prompt once, which the replay then finds cached; of an
    unknown release, the replay says how it took it."""
    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    meta = json.loads((folder / "meta.json").read_text())
    meta["client"].pop("num_warmups")
    for version, sends in (("0.32.0", None), ("0.13.0", 1), (None, None)):
        meta["vllm_version"] = version
        (folder / "meta.json").write_text(json.dumps(meta))
        log = read_server_log(folder / "bench.json")
        assert (log.warmups.sends if log.warmups else None) == sends
        assert (UNSTATED_NOTE in log.notes) == (version is None)
    given = read_server_log(folder / "bench.json", version="0.12.0")  # --vllm-version, where meta.json says none
    assert given.warmups.sends == 1 and UNSTATED_NOTE not in given.notes
    meta["vllm_version"] = "0.13.0"
    (folder / "meta.json").write_text(json.dumps(meta))
    sim, real = replayed_cached(folder)
    assert (sim == real).all() and real[0] == 640


@pytest.mark.parametrize("client, message", [
    ({"num_warmups": -1}, r"num_warmups is -1; vllm bench serve takes an integer >= 0"),
    ({"num_warmups": True}, r"num_warmups is True"),
    ({"ready_check_timeout_sec": 1.5}, r"ready_check_timeout_sec is 1.5"),
    ({"dataset_args": ["--num-warmups"]}, r"--num-warmups has no value"),
])
def test_settings_no_run_could_have_are_refused(client, message):
    with pytest.raises(TraceError, match=r"meta.json: client.*" + message):
        bench_warmups(client, "meta.json: client")


def test_each_copy_warms_the_next_dp_rank():
    cfg = RunConfig(model="llama-3.1-8b", gpu="h100", dp=3, workload="shared-prefix", rate=1.0, num_requests=10)
    content = own_content(7, 1000)

    class Source:
        sent_before = SentBefore(1000, lambda max_prompt: content, 2)

    ranks = build_replicas(cfg)
    assert len(ranks) == 3 and all(rep.caching for rep in ranks)
    free = [rep.kv.free for rep in ranks]
    warm_caches(ranks, Source(), None)
    hits = [rep.kv.cached_tokens(Request(1, 0.0, 1000, 5, content=content)) for rep in ranks]
    bs = ranks[0].kv.block_size
    assert hits == [1000 // bs * bs] * 2 + [0]
    assert [rep.kv.free for rep in ranks] == free  # cached, referenced by none: still free to allocate


def test_a_prompt_that_does_not_fit_leaves_the_cache_cold():
    cfg = RunConfig(model="llama-3.1-8b", gpu="h100", workload="shared-prefix", rate=1.0, num_requests=10, num_blocks=8)
    [rep] = build_replicas(cfg)

    class Source:
        sent_before = SentBefore(1000, lambda max_prompt: own_content(0, 1000), 1)

    with pytest.warns(UserWarning, match=r"warm-up prompt \(1000 tokens\) does not fit replica 0's 8 free KV blocks"):
        warm_caches([rep], Source(), None)
    assert rep.kv.free == 8


def test_a_first_prompt_that_failed_in_the_run_warms_nothing(tmp_path):
    data = json.loads((RUN / "bench.json").read_text())
    data["errors"][0], data["ttfts"][0], data["itls"][0], data["output_lens"][0] = "Timeout", 0.0, [], 0
    data["completed"], data["failed"] = data["completed"] - 1, 1
    (tmp_path / "bench.json").write_text(json.dumps(data))
    shutil.copy(RUN / "meta.json", tmp_path / "meta.json")
    log = read_server_log(tmp_path / "bench.json", measured=True)
    assert log.warm_index is None and log.sent_before() is None
    assert any("its first prompt before the run, and the run's own copy of it failed" in n for n in log.notes)
    log = read_server_log(RUN / "bench.json", measured=True)
    assert log.warm_index == 0 and log.sent_before().replicas == 2


@pytest.mark.parametrize("mode", ["vllm", "lmcache"])
def test_the_warmup_prompt_is_in_the_tiers_below_the_gpu_too(mode):
    """vLLM's offloading connector stores a prefill's computed chunks in host memory (LMCache its prompt's): after
    the warm-up its whole chunks are in every tier, landed, so a request whose GPU blocks were evicted loads them."""
    cfg = RunConfig(model="llama-3.1-8b", gpu="h100", workload="shared-prefix", rate=1.0, num_requests=10,
                    kv_offload="cpu:2GiB,disk:8GiB", kv_offload_mode=mode)
    content = own_content(7, 3000)

    class Source:
        sent_before = SentBefore(3000, lambda max_prompt: content, 1)

    [rep] = build_replicas(cfg)
    tiers = rep.tiers
    warm_caches([rep], Source(), None)
    probe = Request(1, 0.0, 3000, 5, content=content)
    chunks = 3000 // tiers.ct
    keys, starts, _ = tiers.chunk_pieces(probe, chunks)
    assert chunks > 0 and [store.present(keys, starts, 0, chunks) for store in tiers.stores] == [chunks] * 2
    assert not tiers.finishing and not tiers.stored and all(r.id != -1 for r in tiers.pieces)  # (its records went)

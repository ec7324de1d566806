"""A real run's prefix structure replayed: server logs with hash_ids and num_cached_tokens (a CPU vLLM capture,
tests/data/cpu_prefix_run), their prompts' content, the prefix cache's hit rate real vs simulated, bad rows."""
import csv
import json
import shutil
from itertools import chain
from pathlib import Path

import numpy as np
import pytest

from llmsched.cli import main
from llmsched.cli.validate_serving import format_report, write_report
from llmsched.experiment import carries_content, run as run_config
from llmsched.metrics.requests import CACHED_FIELD
from llmsched.validate.serving import replay_config, validate
from llmsched.validate.serving_run import load_run
from llmsched.workload.traces.mooncake import read_mooncake
from llmsched.workload.traces.server_log import read_server_log
from llmsched.workload.traces.readers import TraceError
from llmsched.workload.workload import server_log_trace

RUN = Path(__file__).parent / "data" / "cpu_prefix_run"
LOG = RUN / "requests.jsonl"
LLAMA = Path(__file__).parent / "data" / "gpu_runs" / "h200-llama-3.1-8b"


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def contents_of(trace) -> list:
    return [c for chunk in trace.contents(len(trace), 8) for c in chunk]


def test_hash_ids_and_num_cached_tokens_are_read_in_arrival_order():
    log = read_server_log(LOG, measured=True)
    rows = sorted(rows_of(LOG), key=lambda r: r["queued_ts"])
    assert log.hash_ids == [r["hash_ids"] for r in rows]
    assert log.cached_tokens.tolist() == [r["num_cached_tokens"] for r in rows]
    assert int(log.cached_tokens.sum()) == 16384 and int(log.prompt_lens.sum()) == 29407
    plain = read_server_log(LLAMA / "requests.jsonl")
    assert plain.hash_ids is None and plain.cached_tokens is None


def test_replayed_prompts_share_what_their_hash_ids_share_as_a_mooncake_traces_do():
    trace = server_log_trace(LOG)
    assert trace.hash_block == 512
    contents, ids = contents_of(trace), read_server_log(LOG).hash_ids
    # the log's prompts are its input's: the same ids give the same content a Mooncake trace gives (replies aside)
    mooncake = read_mooncake(RUN / "mooncake20.jsonl")
    assert [c.pieces() for c in contents] == [c.pieces() for c in contents_of(mooncake)]
    pairs = 0
    for a in range(len(ids)):
        for b in range(a):
            k = next((i for i, (x, y) in enumerate(zip(ids[a], ids[b])) if x != y), min(len(ids[a]), len(ids[b])))
            if k:
                pairs += 1
                assert contents[a].prefix_hash(512 * k) == contents[b].prefix_hash(512 * k)
            shorter = min(contents[a].length, contents[b].length)
            if 512 * k < shorter:
                assert contents[a].prefix_hash(512 * k + 1) != contents[b].prefix_hash(512 * k + 1)
    assert pairs > 20
    # a log without hash_ids: each prompt its own, sharing nothing (a recomputed request finds only its own blocks)
    own = list(chain.from_iterable(server_log_trace(LLAMA / "requests.jsonl").contents(300, 64)))
    assert len({c.prefix_hash(16) for c in own}) == len(own) == 300


def test_replay_hits_the_prefix_cache_request_for_request_as_vllm_did():
    run = load_run(RUN)
    cfg = replay_config(run, gpu="l4")
    assert cfg.prefix_caching and cfg.block_size == 128 and cfg.num_blocks == 4096 and carries_content(cfg)
    reqs = run_config(cfg).requests
    order = np.argsort(reqs.column("id"))
    assert reqs.column(CACHED_FIELD)[order].tolist() == run.log.cached_tokens.tolist()


def test_validate_serving_reports_the_hit_rate_real_and_simulated(tmp_path):
    row = validate(load_run(RUN), gpu="l4")
    row["split"], row["profile"] = "validation", None
    assert ("prefix cache   hit rate 55.7% -> 55.7% (+0.0 points), 16384 -> 16384 of 29407 prompt tokens cached"
            in format_report([row]))
    out = tmp_path
    write_report([row], out, None)  # what validate-serving --out writes, without its figure
    cache = json.loads((out / "validation.json").read_text())["runs"][0]["prefix_cache"]
    assert cache["real"] == {"cached_tokens": 16384, "prompt_tokens": 29407, "hit_rate": pytest.approx(16384 / 29407)}
    assert cache["simulated"] == cache["real"] and cache["error_pct"] == 0 and cache["notes"] == []
    with (out / "validation.csv").open() as f:
        table = {(r["metric"], r["statistic"]): r for r in csv.DictReader(f)}
    assert table["prefix_cache", "cached_tokens"]["real"] == table["prefix_cache", "cached_tokens"]["simulated"] == \
        "16384"
    assert float(table["prefix_cache", "hit_rate"]["real"]) == pytest.approx(16384 / 29407, rel=1e-5)


def test_simulate_replays_the_logs_prompts_through_the_prefix_cache(tmp_path):
    out = tmp_path / "sim"
    assert main(["simulate", "--trace", str(LOG), "--model", str(RUN / "config.json"), "--gpu", "l4",
                 "--scheduler", "vllm-chunked", "--block-size", "128", "--num-blocks", "4096",
                 "--max-num-seqs", "16", "--max-num-batched-tokens", "1024", "--out", str(out), "--no-progress"]) == 0
    with (out / "requests.csv").open() as f:
        assert sum(int(r[CACHED_FIELD]) for r in csv.DictReader(f)) == 16384
    assert json.loads((out / "summary.json").read_text())["prefix_cache"]["cached_tokens"] == 16384


def copy_run(tmp_path: Path, rows=None, **seen) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(RUN, folder)
    if rows is not None:
        (folder / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = json.loads((folder / "meta.json").read_text())
    meta["engine_defaults_seen"].update(seen)
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def test_without_prefix_caching_or_hash_ids_the_replay_shares_nothing(tmp_path):
    off = load_run(copy_run(tmp_path, enable_prefix_caching=False))
    assert not replay_config(off, gpu="l4").prefix_caching
    cache = validate(off, gpu="l4")["prefix_cache"]
    assert cache["simulated"]["cached_tokens"] == 0 and cache["notes"] == ["vLLM ran without prefix caching"]
    shutil.rmtree(tmp_path / "run")
    rows = [{k: v for k, v in r.items() if k != "hash_ids"} for r in rows_of(LOG)]
    counted = validate(load_run(copy_run(tmp_path, rows)), gpu="l4")["prefix_cache"]
    assert counted["real"]["cached_tokens"] == 16384 and counted["simulated"]["cached_tokens"] == 0
    assert counted["notes"] == ["no hash_ids: the replayed prompts share nothing"]


def test_prefix_caching_falls_back_to_engine_kwargs_then_vllms_default(tmp_path):
    folder = copy_run(tmp_path, enable_prefix_caching=None)
    meta = json.loads((folder / "meta.json").read_text())
    assert load_run(folder).args.enable_prefix_caching
    meta["engine_kwargs"]["enable_prefix_caching"] = False
    (folder / "meta.json").write_text(json.dumps(meta))
    assert not load_run(folder).args.enable_prefix_caching
    meta["engine_kwargs"]["enable_prefix_caching"] = "yes"
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"meta.json: engine_kwargs.enable_prefix_caching is 'yes'; write true or "
                                         r"false"):
        load_run(folder)
    meta["engine_kwargs"].pop("enable_prefix_caching")
    meta["hash_block"] = 256
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"meta.json: hash_block is 256; llmsched reads hash_ids as Mooncake's"):
        load_run(folder)


@pytest.mark.parametrize("line, change, message", [
    (3, {"hash_ids": None}, r":3: no hash_ids, but line 1 has one; give hash_ids on every line or on none"),
    (1, {"hash_ids": None}, r":1: no hash_ids, but line 2 has one"),
    (2, {"hash_ids": [10, 11, 12]}, r":2: hash_ids has 3 block ids but input_toks 2016 fills 4 block\(s\)"),
    (2, {"hash_ids": [10, 11, 12, 109, 7]}, r":2: hash_ids has 5 block ids, a prefix longer than the prompt "
                                            r"\(input_toks 2016"),
    (4, {"hash_ids": [1, "x"]}, r":4: hash_ids\[1\] is \"x\", not an integer >= 0; hash_ids list one integer"),
    (4, {"hash_ids": 7}, r":4: hash_ids is int 7, not a list of integers"),
    (5, {"hash_ids": [0, 1, 2 ** 60, 102]}, r":5: hash_ids holds 1152921504606846976, above 2\*\*56 - 1"),
    (6, {"num_cached_tokens": 5000}, r":6: num_cached_tokens is 5000, outside 0..input_toks \(1870\)"),
    (6, {"num_cached_tokens": -1}, r":6: num_cached_tokens is -1, outside 0..input_toks"),
    (6, {"num_cached_tokens": 1.5}, r":6: num_cached_tokens is 1.5, not a whole number of tokens"),
    (7, {"num_cached_tokens": None}, r":7: no num_cached_tokens, but line 1 has one"),
])
def test_a_bad_row_is_an_error_naming_its_line_and_field(tmp_path, line, change, message):
    rows = rows_of(LOG)
    rows[line - 1].update(change)
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in rows))
    with pytest.raises(TraceError, match=r"requests\.jsonl" + message):
        read_server_log(path)


def test_a_log_whose_hash_ids_are_null_replays_as_one_without_them(tmp_path):
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps({**r, "hash_ids": None, "num_cached_tokens": None}) + "\n"
                            for r in rows_of(LOG)))
    out = tmp_path / "sim"
    assert main(["simulate", "--trace", str(path), "--model", str(RUN / "config.json"), "--gpu", "l4",
                 "--scheduler", "vllm-chunked", "--out", str(out), "--no-progress"]) == 0
    with (out / "requests.csv").open() as f:  # each prompt its own: nothing found cached at a first admission
        rows = list(csv.DictReader(f))
    assert len(rows) == len(rows_of(LOG)) and {r[CACHED_FIELD] for r in rows} == {"0"}
    assert json.loads((out / "summary.json").read_text())["prefix_cache"]["cached_tokens"] == 0

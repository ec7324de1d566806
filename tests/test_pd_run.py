"""A 1P1D run's meta.json (validate/pd_run.py) replayed by validate-serving as `--disaggregate 1P1D`: the prefill
instance is the run's engine, the decode instance's arguments size the decode pool, the KV crosses the link
meta.json names. The run here is the H200 `vllm serve` capture's requests with a meta.json written as a 1P1D pair
at 0.4 memory each would write it (a schema check of the replay, not a fidelity figure: the log is colocated)."""
import copy
import json
import shutil
from pathlib import Path

import pytest

from llmsched.cli import main
from llmsched.validate.serving import replay_config, validate
from llmsched.validate.serving_run import load_run

RUN = Path(__file__).parent / "data" / "gpu_runs" / "h200-llama-3.1-8b-serve-sharegpt-8"
NIXL = {"kv_connector": "NixlConnector", "kv_role": "kv_both"}


def pd_meta() -> dict:
    meta = json.loads((RUN / "meta.json").read_text())
    for key in ("memory_gib", "kv_cache"):  # one instance's reports: a pair at 0.4 each reports its own
        meta.pop(key, None)
    meta["engine_defaults_seen"].pop("num_gpu_blocks", None)
    meta["engine_kwargs"].update(gpu_memory_utilization=0.4, kv_transfer_config=dict(NIXL))
    decode = copy.deepcopy(meta["engine_kwargs"])
    decode.update(max_num_seqs=256, max_num_batched_tokens=2048)
    meta["disaggregation"] = {"decode": {"engine_kwargs": decode}, "kv_link": "bw=1500GB/s,latency=20us"}
    return meta


def folder_with(tmp_path: Path, meta: dict) -> Path:
    out = tmp_path / "pd-run"
    out.mkdir()
    for name in ("bench.json", "config.json"):
        shutil.copy(RUN / name, out / name)
    (out / "meta.json").write_text(json.dumps(meta))
    return out


def test_a_1p1d_run_replays_as_its_two_instances(tmp_path):
    run = load_run(folder_with(tmp_path, pd_meta()), boundary="client")
    pd = run.args.disaggregation
    assert pd.connector == "NixlConnector" and pd.kv_link == "bw=1500GB/s,latency=20us"
    assert (pd.decode.max_num_seqs, pd.decode.max_num_batched_tokens) == (256, 2048)
    cfg = replay_config(run)
    assert cfg.disaggregate == "1P1D" and cfg.kv_connector == "nixl" and cfg.kv_link == pd.kv_link
    assert cfg.max_num_seqs == 1024 and cfg.scheduler_params["token_budget"] == 8192  # the prefill instance's
    decode = cfg.decode_pool
    assert (decode["max_num_seqs"], decode["max_num_batched_tokens"]) == (256, 2048)
    assert decode["scheduler_params"]["token_budget"] == 2048 and decode["gpu_memory_utilization"] == 0.4
    # each instance's KV cache from its own arguments at 0.4 of the card: the decode instance's smaller token
    # budget leaves it more room than the prefill instance's (vLLM's profile run peaks with the budget)
    assert decode["num_blocks"] > cfg.prefill_pool["num_blocks"] > 0
    row = validate(run)
    assert row["disaggregate"] == "1P1D" and row["decode_pool"]["num_blocks"] == decode["num_blocks"]
    sim = row["simulated"]
    assert sim["ttft"]["p50"] > 0 and sim["e2e"]["p50"] > sim["ttft"]["p50"]
    # every request went through both instances, its KV over the link between
    assert row["real"]["throughput"]["rps"] > 0


def test_the_replay_prices_the_transfer_on_the_link_given(tmp_path):
    fast = replay_config(load_run(folder_with(tmp_path, pd_meta()), boundary="client"))
    slow_meta = pd_meta()
    slow_meta["disaggregation"]["kv_link"] = "bw=1GB/s,latency=20us"
    (tmp_path / "slow").mkdir()
    slow = replay_config(load_run(folder_with(tmp_path / "slow", slow_meta), boundary="client"))
    from llmsched.experiment import run as run_config
    ttft = [float(sorted(run_config(c).requests.cols["ttft"])[len(run_config(c).requests.cols["ttft"]) // 2])
            for c in (fast, slow)]
    assert ttft[1] > ttft[0] + 0.05  # a 1 GB/s link adds ~0.1 s a 1k-token prompt (128 KiB a token)


@pytest.mark.parametrize("edit, wanted", [
    (lambda m: m.update(disaggregation=[1]), "disaggregation is [1]"),
    (lambda m: m["disaggregation"].pop("kv_link"), "disaggregation.kv_link: missing"),
    (lambda m: m["disaggregation"]["decode"]["engine_kwargs"].pop("kv_transfer_config"),
     "disaggregation.decode.engine_kwargs.kv_transfer_config: missing"),
    (lambda m: m["engine_kwargs"]["kv_transfer_config"].update(kv_connector="LMCacheConnectorV1"),
     "kv_connector \"LMCacheConnectorV1\": not one llmsched replays"),
    (lambda m: m["engine_kwargs"]["kv_transfer_config"].update(kv_role="kv_consumer"),
     "the prefill instance's role is kv_producer or kv_both"),
    (lambda m: m["disaggregation"]["decode"]["engine_kwargs"]["kv_transfer_config"].update(
        kv_connector="ExampleConnector"), "the prefill instance ran NixlConnector"),
    (lambda m: m["disaggregation"]["decode"]["engine_kwargs"].update(data_parallel_size=2),
     "a 1P1D run is one instance each side"),
    (lambda m: m["disaggregation"].update(prefill={}), "disaggregation: prefill not read"),
    (lambda m: m["disaggregation"]["decode"]["engine_kwargs"].update(speculative_config={"method": "ngram"}),
     "disaggregation.decode: engine_kwargs speculative_config: not modelled"),
    (lambda m: m["disaggregation"].update(kv_link="warp-drive"), "unknown link 'warp-drive'"),
])
def test_a_1p1d_meta_json_that_cannot_be_replayed_is_a_one_line_error(tmp_path, capsys, edit, wanted):
    meta = pd_meta()
    edit(meta)
    code = main(["validate-serving", str(folder_with(tmp_path, meta))])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and wanted in err, err


def test_simulate_trace_of_a_1p1d_run_simulates_the_pair(tmp_path, capsys):
    """simulate --trace takes a 1P1D run's layout as it takes a colocated run's engine: the pools, the decode
    instance's own limits and the link, and simulates what validate-serving replays (each pool's KV cache by vLLM's
    formula for its instance: neither reports one here)."""
    folder = folder_with(tmp_path, pd_meta())
    out = tmp_path / "sim"
    assert main(["simulate", "--trace", str(folder / "bench.json"), "--out", str(out), "--no-progress"]) == 0
    assert "disaggregate 1P1D" in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    taken = summary["run"]["trace_meta"]["taken"]
    assert taken["disaggregate"] == "1P1D" and taken["kv_link"] == "bw=1500GB/s,latency=20us"
    assert (taken["decode_pool"]["max_num_seqs"], taken["decode_pool"]["max_num_batched_tokens"]) == (256, 2048)
    predicted = validate(load_run(folder, boundary="client"))["simulated"]
    for metric in ("ttft", "tpot", "e2e"):
        assert summary["latency"][metric]["p50"] == pytest.approx(predicted[metric]["p50"], rel=1e-9)


CPU_PD = Path(__file__).parent / "data" / "cpu_pd_run"


def test_a_captured_1p1d_run_replays_within_a_tenth_at_the_median():
    """tests/data/cpu_pd_run is a real 1P1D run: scripts/pd_capture.py on vLLM's CPU build (two `vllm serve`
    instances, stock scheduler, ExampleConnector, the proxy, `vllm bench serve` at 1 req/s, 24 requests). Each
    instance's steps are priced by its own step model from the capture's stamps (meta.json cpu_step_model: a CPU
    engine's steps are the capture's own, not any GPU's), so what the replay checks is the disaggregated path: the
    prompt's prefill on one instance, its KV handed over, the first token and the rest on the other, at the client.
    Measured when the run was captured (2026-11-30): TTFT / TPOT / E2E P50 +5.6% / -6.6% / +3.3%; the P90s are
    11-24% under, the two engines, the proxy and the client sharing two cores (docs/disaggregation.md)."""
    run = load_run(CPU_PD)
    pd = run.args.disaggregation
    assert pd.connector == "ExampleConnector" and run.boundary == "client" and len(run.log) == 24
    fits = json.loads((CPU_PD / "meta.json").read_text())["cpu_step_model"]
    prefill, decode = ({k: fits[side][k] for k in ("const", "per_token")} for side in ("prefill", "decode"))
    cfg = replay_config(run, gpu="l4", batch_time="linear", batch_time_params=prefill,
                        decode_batch_time_params=decode)
    assert cfg.disaggregate == "1P1D" and cfg.kv_link == pd.kv_link and cfg.batch_time_params == prefill
    assert cfg.decode_pool["batch_time_params"] == decode and cfg.decode_pool["max_num_seqs"] == 16
    row = validate(run, "l4", batch_time="linear", batch_time_params=prefill, decode_batch_time_params=decode)
    assert row["disaggregate"] == "1P1D"
    for metric in ("ttft", "tpot", "e2e"):
        assert abs(row["errors"][metric]["p50"]) < 10, (metric, row["errors"][metric])
    # without the decode instance's own steps (the prefill instance's for both) the decode is priced as a prefill
    # engine's: TPOT moves
    both = validate(run, "l4", batch_time="linear", batch_time_params=prefill)
    assert abs(both["errors"]["tpot"]["p50"] - row["errors"]["tpot"]["p50"]) > 10


def test_the_decode_instances_parameters_need_a_1p1d_run():
    colocated = load_run(Path(__file__).parent / "data" / "cpu_client_run" / "rate-2")
    with pytest.raises(ValueError, match="the decode instance's batch-time parameters are for a 1P1D run"):
        replay_config(colocated, gpu="l4", batch_time="linear", decode_batch_time_params={"const": 0.001})


def test_compare_on_a_1p1d_runs_trace_runs_its_own_schedulers_on_the_pair(tmp_path, capsys):
    """compare takes the pair's layout but runs its own schedulers on both pools: the decode instance's token budget
    (vllm-chunked's parameter) is not given to the others, and the line says so."""
    out = tmp_path / "cmp"
    assert main(["compare", "--trace", str(CPU_PD / "bench.json"), "--gpu", "l4", "--schedulers",
                 "sarathi,vllm-chunked,vllm", "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "disaggregate 1P1D" in err and "the decode instance's token budget not taken" in err
    rows = json.loads((out / "results.json").read_text())
    assert [r["scheduler"] for r in rows] == ["sarathi", "vllm-chunked", "vllm"]
    assert all(r["finished"] == 24 for r in rows)


def test_a_decode_instance_without_its_own_memory_takes_the_runs_only_with_the_same_arguments():
    """The run's reported KV cache (engine_defaults_seen.num_gpu_blocks) is the prefill instance's: a decode instance
    that reports none takes it when its arguments are the prefill's, but not with another KV memory size."""
    from llmsched.validate.pd_run import split_instances
    meta = json.loads((CPU_PD / "meta.json").read_text())
    del meta["disaggregation"]["decode"]["engine_defaults_seen"]
    _, decode, _, _ = split_instances(copy.deepcopy(meta), "meta.json")
    assert decode["engine_defaults_seen"]["num_gpu_blocks"] == 1024  # the same arguments: the same cache
    meta["disaggregation"]["decode"]["engine_kwargs"]["kv_cache_memory_bytes"] = 4 * 67108864
    _, decode, _, _ = split_instances(copy.deepcopy(meta), "meta.json")
    assert "engine_defaults_seen" not in decode and decode["engine_kwargs"]["kv_cache_memory_bytes"] == 4 * 67108864

"""--kv-cache-dtype (vLLM's kv_cache_dtype): an fp8 cache holds twice the tokens and its decode steps read half the
KV bytes; a real run's meta.json that names one is replayed with it."""
import json
import shutil

from llmsched.experiment import run, run_model
from llmsched.metrics.summary import summarize
from llmsched.run_config import RunConfig
from llmsched.validate.serving import replay_config
from llmsched.validate.serving_run import load_run

from test_validate_serving import LLAMA


def test_fp8_halves_a_tokens_kv_bytes_at_any_parallelism():
    for model, tp in (("llama-3-8b", None), ("qwen3-32b", 2), ("mixtral-8x7b", 2)):
        auto = run_model(RunConfig(model=model, tp=tp))
        fp8 = run_model(RunConfig(model=model, tp=tp, kv_cache_dtype="fp8"))
        assert fp8.kv_bytes_per_token_per_gpu * 2 == auto.kv_bytes_per_token_per_gpu
        assert fp8.weight_bytes_per_gpu == auto.weight_bytes_per_gpu and fp8.tp == auto.tp


def test_an_fp8_cache_holds_twice_the_blocks_and_carries_more_load():
    base = dict(model="llama-3-8b", gpu="a100", scheduler="vllm-chunked", num_requests=300, rate=20.0, seed=3)
    auto, fp8 = run(RunConfig(**base)), run(RunConfig(**base, kv_cache_dtype="fp8"))
    # twice the tokens in the same bytes (vLLM's sizing, the default's, floors each to whole blocks)
    assert fp8.meta["kv_blocks"] - 2 * auto.meta["kv_blocks"] in (0, 1)
    a, f = summarize(auto), summarize(fp8)
    assert a["preemptions"]["total"] > 0 and f["preemptions"]["total"] < a["preemptions"]["total"]
    assert f["throughput"]["requests_per_s"] > a["throughput"]["requests_per_s"]


def test_a_served_runs_kv_cache_dtype_is_replayed(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(LLAMA, folder)
    meta = json.loads((folder / "meta.json").read_text())
    meta["engine_kwargs"]["kv_cache_dtype"] = "fp8_e4m3"
    (folder / "meta.json").write_text(json.dumps(meta))
    cfg = replay_config(load_run(folder))
    assert cfg.kv_cache_dtype == "fp8_e4m3" and run_model(cfg).kv_dtype_bytes == 1
    assert run_model(replay_config(load_run(LLAMA))).kv_dtype_bytes == 2

"""One KV-sizing function for every command (llmsched/hardware/kv_sizing.py): vLLM's reported block count when the
run gives one, vLLM's formula otherwise; validate-serving and simulate --trace size a real run's log alike."""
import json
import shutil

import pytest

from llmsched.batchtime.vllm_v1 import cudagraph_capture_sizes
from llmsched.experiment import run
from llmsched.hardware.kv_sizing import kv_cache, run_memory
from llmsched.hardware.models import model
from llmsched.hardware.gpus import gpu
from llmsched.hardware.vllm_memory import vllm_kv_budget
from llmsched.run_config import RunConfig
from llmsched.validate.serving import replay_config
from llmsched.validate.serving_run import load_run

from test_validate_serving import LLAMA


def run_folder(tmp_path, n: int = 40, **meta_changes):
    """The first ``n`` requests of the H200 Llama run, its meta.json changed by ``meta_changes``."""
    folder = tmp_path / "run"
    folder.mkdir()
    lines = (LLAMA / "requests.jsonl").read_text().splitlines()[:n]
    (folder / "requests.jsonl").write_text("\n".join(lines) + "\n")
    shutil.copy(LLAMA / "config.json", folder / "config.json")
    meta = json.loads((LLAMA / "meta.json").read_text())
    for key, value in meta_changes.items():
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def simulated_blocks(folder, **changes) -> tuple[int, str]:
    cfg = RunConfig(trace=str(folder / "requests.jsonl"), model="llama-3.1-8b", gpu="h200", rate=None,
                    scheduler="vllm-chunked", **changes)
    meta = run(cfg).meta
    return meta["kv_blocks"], meta["kv_cache"]["source"]


def test_a_reported_kv_cache_section_is_read_by_validate_serving_and_simulate_alike(tmp_path):
    seen = json.loads((LLAMA / "meta.json").read_text())["engine_defaults_seen"]
    seen.pop("num_gpu_blocks")
    folder = run_folder(tmp_path, kv_cache={"num_gpu_blocks": 2588, "block_size": 16}, engine_defaults_seen=seen,
                        memory_gib=None)
    assert replay_config(load_run(folder)).num_blocks == 2588
    blocks, source = simulated_blocks(folder, max_num_seqs=128, max_num_batched_tokens=2048)
    assert blocks == 2588 and "kv_cache.num_gpu_blocks" in source


def test_kv_cache_memory_bytes_sizes_the_cache_as_vllm_does(tmp_path):
    """vLLM's --kv-cache-memory-bytes: the cache is that many bytes per GPU, whatever the card's memory holds
    (before 2026-11-30 the field was not read and the card's formula sized the cache)."""
    seen = json.loads((LLAMA / "meta.json").read_text())["engine_defaults_seen"]
    seen.pop("num_gpu_blocks")
    kwargs = json.loads((LLAMA / "meta.json").read_text())["engine_kwargs"]
    folder = run_folder(tmp_path, engine_defaults_seen=seen, memory_gib=None,
                        engine_kwargs={**kwargs, "kv_cache_memory_bytes": 8 << 30})
    per_block = 16 * model("llama-3.1-8b").kv_bytes_per_token_per_gpu  # 16 tokens of 128 KiB
    assert replay_config(load_run(folder)).num_blocks == (8 << 30) // per_block == 4096
    blocks, source = simulated_blocks(folder)
    assert blocks == 4096 and "kv_cache_memory_bytes" in source
    with pytest.raises(ValueError, match="engine_kwargs.kv_cache_memory_bytes is 0"):
        (tmp_path / "zero").mkdir()
        load_run(run_folder(tmp_path / "zero", engine_kwargs={**kwargs, "kv_cache_memory_bytes": 0}))


def test_engine_kwargs_the_replay_would_leave_out_are_refused(tmp_path):
    """meta.json's engine arguments by --serve-command's rules: read, harmless, at the only value modelled, or an
    error naming them (async_scheduling and num_gpu_blocks_override were once passed over)."""
    kwargs = json.loads((LLAMA / "meta.json").read_text())["engine_kwargs"]
    bad = {**kwargs, "speculative_config": {"method": "ngram"}, "pipeline_parallel_size": 2}
    with pytest.raises(ValueError, match="engine_kwargs pipeline_parallel_size, speculative_config: not modelled"):
        load_run(run_folder(tmp_path, engine_kwargs=bad))
    (tmp_path / "ok").mkdir()
    fine = {**kwargs, "pipeline_parallel_size": 1, "trust_remote_code": True, "served_model_name": ["x"],
            "num_gpu_blocks_override": 3000}
    seen = json.loads((LLAMA / "meta.json").read_text())["engine_defaults_seen"]
    seen.pop("num_gpu_blocks")
    folder = run_folder(tmp_path / "ok", engine_kwargs=fine, engine_defaults_seen=seen, memory_gib=None)
    assert replay_config(load_run(folder)).num_blocks == 3000
    (tmp_path / "sync").mkdir()
    synced = run_folder(tmp_path / "sync", engine_kwargs={**kwargs, "async_scheduling": False},
                        engine_defaults_seen={k: v for k, v in seen.items() if k != "async_scheduling"})
    assert load_run(synced).args.async_scheduling is False


def test_other_limits_move_the_reported_figure_by_vllms_formula(tmp_path):
    folder = run_folder(tmp_path)
    reported = 57537
    blocks, source = simulated_blocks(folder, max_num_seqs=256, max_num_batched_tokens=8192)
    spec, device = model("llama-3.1-8b"), gpu("h200")
    common = dict(gpu_memory_utilization=0.92, vllm_version="0.26.0", block_size=16)
    theirs = vllm_kv_budget(spec, device, max_num_seqs=128, max_num_batched_tokens=2048, capture_sizes=35, **common)
    ours = vllm_kv_budget(spec, device, max_num_seqs=256, max_num_batched_tokens=8192,
                          capture_sizes=len(cudagraph_capture_sizes(256, 8192)), **common)
    shift = (ours.kv_bytes - theirs.kv_bytes) // spec.kv_bytes_per_token_per_gpu
    assert shift < 0 and blocks == (reported * 16 + shift) // 16
    assert "reported by vLLM" in source and "max_num_batched_tokens 2048 -> 8192" in source


def test_a_log_of_another_gpu_or_model_is_sized_by_the_formula(tmp_path):
    folder = run_folder(tmp_path)
    other_gpu = RunConfig(trace=str(folder / "requests.jsonl"), model="llama-3.1-8b", gpu="h100", rate=None)
    assert "reported" not in run(other_gpu).meta["kv_cache"]["source"]
    other_model = RunConfig(trace=str(folder / "requests.jsonl"), model="qwen3-14b", gpu="h200", rate=None)
    assert "reported" not in run(other_model).meta["kv_cache"]["source"]


def test_the_reserve_estimate_stays_for_the_engine_agnostic_kinds():
    spec, device = model("llama-3-8b"), gpu("a100")
    cache = kv_cache(spec, device, block_size=16, max_num_seqs=256, max_num_batched_tokens=8192, vllm_engine=False)
    from llmsched.hardware.memory import kv_capacity_blocks
    assert cache.blocks == kv_capacity_blocks(spec, device, gpu_memory_utilization=0.9, block_size=16)
    vllm = kv_cache(spec, device, block_size=16, max_num_seqs=256, max_num_batched_tokens=8192, vllm_engine=True,
                    capture_sizes=51)
    assert vllm.budget is not None and vllm.blocks != cache.blocks


@pytest.mark.parametrize("section, key, value", [("kv_cache", "num_gpu_blocks", 0),
                                                  ("engine_defaults_seen", "num_gpu_blocks", "many"),
                                                  ("memory_gib", "kv_cache_tokens", -3)])
def test_a_reported_figure_that_is_not_a_count_names_the_file_and_field(tmp_path, section, key, value):
    meta = json.loads((LLAMA / "meta.json").read_text())
    meta["engine_defaults_seen"].pop("num_gpu_blocks")
    meta.setdefault(section, {})[key] = value
    with pytest.raises(ValueError, match=rf"meta.json: {section}.{key} is .*; write the figure vLLM reported"):
        run_memory(meta, tmp_path / "meta.json", cudagraph_capture_sizes)

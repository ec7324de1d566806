"""Turn a raw capture of ``scripts/vllm_gpu_replay.py`` into a run folder in the ground-truth schema that
``llmsched validate-serving`` reads (../shared/data/ground_truth, tests/data/gpu_runs): ``meta.json`` with the
model's Hugging Face name, ``engine_kwargs`` in vLLM's names, ``engine_defaults_seen`` (what vLLM chose) and
``memory_gib`` (what vLLM's engine core logged), plus the capture's ``requests.jsonl``, ``steps.csv`` and the
model's ``config.json``. Requests are written in the order the client sent them (``arrival_time``), as the
ground-truth logs are.

The memory figures come from the engine core's own log lines (``Actual usage is ... GiB for weight, ...``,
``GPU KV cache size: N tokens``, ``Available KV cache memory``), read from the section of ``--log`` that the
capture script's runner marked ``== NAME at``; a figure the log lacks is left out, never guessed.

    python scripts/gpu_run_meta.py RAW_DIR OUT_DIR --log log.txt --section h100-llama-3.1-8b \\
        --model meta-llama/Llama-3.1-8B --config llama/config.json --workload "..." --gpu "NVIDIA H100 ..."
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

DEFAULTS_SEEN = ("async_scheduling", "enable_chunked_prefill", "enable_prefix_caching", "compilation_mode",
                 "gpu_memory_utilization", "block_size", "max_model_len", "num_gpu_blocks",
                 "cudagraph_capture_sizes")
USAGE = re.compile(r"Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak activation, ([\d.]+) GiB for "
                   r"non-torch memory, and ([\d.]+) GiB for CUDAGraph memory")
KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
KV_AVAILABLE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")


def log_section(log: str, name: str) -> str:
    start = log.find(f"== {name} at ")
    if start < 0:
        raise SystemExit(f"--log has no '== {name} at' line; give the --section the capture's runner printed")
    end = log.find("\n== ", start + 1)
    return log[start:end if end > 0 else len(log)]


def memory_gib(section: str) -> dict:
    found = {}
    if m := USAGE.search(section):
        found.update(zip(("weights", "peak_activation", "non_torch", "cuda_graphs"), map(float, m.groups())))
    if m := KV_TOKENS.search(section):
        found["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
    if m := KV_AVAILABLE.search(section):
        found["kv_cache_available"] = float(m.group(1))
    return found


def schema_meta(raw: dict, model: str, gpu: str, workload: str, memory: dict) -> dict:
    kwargs = raw["engine_kwargs"]
    engine = {"model": model, "tensor_parallel_size": kwargs.get("tensor_parallel_size", 1),
              "data_parallel_size": kwargs.get("data_parallel_size", 1),
              "enable_expert_parallel": kwargs.get("enable_expert_parallel", False),
              "max_num_seqs": kwargs["max_num_seqs"], "max_num_batched_tokens": kwargs["max_num_batched_tokens"],
              "max_model_len": kwargs.get("max_model_len"), "dtype": kwargs.get("dtype", "auto"),
              "kv_cache_dtype": kwargs.get("kv_cache_dtype", "auto"), "seed": kwargs.get("seed"),
              "load_format": kwargs.get("load_format"), "skip_tokenizer_init": kwargs.get("skip_tokenizer_init")}
    meta = {"schema_version": 1, "model": model, "vllm_version": raw["vllm_version"], "engine_kwargs": engine,
            "gpu": gpu, "torch": raw.get("torch"), "num_requests": raw["num_requests"], "workload": workload,
            "engine_defaults_seen": {k: raw[k] for k in DEFAULTS_SEEN if k in raw}, "memory_gib": memory,
            "startup_seconds": round(raw["startup_seconds"], 1), "replay_seconds": round(raw["replay_seconds"], 1)}
    for key in ("warmup", "warmup_step_rows", "hash_block"):
        if key in raw:
            meta[key] = raw[key]
    meta["captured_by"] = "scripts/vllm_gpu_replay.py (AsyncLLM, multiprocess engine core, vLLM defaults except " \
                          "the engine_kwargs), converted by scripts/gpu_run_meta.py"
    return meta


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("raw", type=Path, help="the capture's --out folder")
    p.add_argument("out", type=Path, help="the run folder to write")
    p.add_argument("--log", type=Path, required=True, help="the runner's log, with vLLM's engine-core lines")
    p.add_argument("--section", required=True, help="the run's name in the log ('== NAME at ...')")
    p.add_argument("--model", required=True, help="the model's Hugging Face name")
    p.add_argument("--config", type=Path, required=True, help="the config.json the capture loaded")
    p.add_argument("--gpu", required=True, help="the GPU, in words (name, memory, driver)")
    p.add_argument("--workload", required=True, help="what was replayed, in words")
    args = p.parse_args(argv)
    raw = json.loads((args.raw / "meta.json").read_text())
    memory = memory_gib(log_section(args.log.read_text(errors="replace"), args.section))
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in (args.raw / "requests.jsonl").read_text().splitlines() if line.strip()]
    rows.sort(key=lambda r: r["arrival_time"])  # the client's send order: requests due together woke in any order
    (args.out / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.copyfile(args.raw / "steps.csv", args.out / "steps.csv")
    shutil.copyfile(args.config, args.out / "config.json")
    meta = schema_meta(raw, args.model, args.gpu, args.workload, memory)
    (args.out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"{args.out}: memory_gib {memory}")


if __name__ == "__main__":
    main()

"""Capture a 1P1D run at the client: a prefill and a decode `vllm serve` instance under a KV connector, the proxy
``llmsched.vllm.pd_proxy`` in front of them, and ``vllm bench serve --save-result --save-detailed`` sending vLLM's
random dataset through the proxy. The run folder is what ``validate-serving`` replays (validate/pd_run.py):
``bench.json`` (the bench result without its generated texts), ``meta.json`` (the prefill instance's engine
arguments, ``disaggregation`` with the decode instance's and the link) and ``config.json``.

On this machine's CPU build (the default) both instances run vLLM's stock scheduler on a ``llmsched make-model``
folder with ``ExampleConnector`` (the KV through files in a shared folder; a token budget that holds every prompt in
flight, since it stores a prompt's KV at its first chunk). Each runs under ``client_capture.py``'s stamps, whose
stamps give each instance's own CPU step model, written as meta.json's ``cpu_step_model.prefill`` and ``.decode``
(a CPU engine's step time is the capture's own, not any GPU's): the decode instance's from its consecutive busy
steps over the bench's window (``client_capture.step_model``: const + per_token); the prefill instance's, whose
prompts at a low rate each run alone in one step and leave, from each prompt's hand-over to the engine to its first
output (``prefill_model``: const + per_token over the prompt's tokens). On a GPU (``--engine gpu --model-dir DIR``) each instance
takes ``--memory`` of the card with random weights, and ``--connector nixl`` runs NixlConnector (which needs the
``nixl`` package beside vLLM):

    PYTHONPATH=$PWD python scripts/pd_capture.py --out tests/data/cpu_pd_run --rate 1 --num-prompts 24
    python scripts/pd_capture.py --engine gpu --model-dir .gpu/m-llama --connector nixl --memory 0.4 \\
        --kv-link "bw=1500GB/s,latency=20us" --rate 4 --num-prompts 200 --out runs/h200-llama-1p1d

``--kv-link`` is written into meta.json as the link the replay prices each prompt's KV on; give what the connector
crossed (on one card: a device-to-device copy; through ``ExampleConnector``: the page cache, written and read).
"""
from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
from client_capture import gpu_name, step_model  # noqa: E402
from tests.vllm_support import Server, free_port  # noqa: E402  (the servers' start and stop, as the tests run them)

CPU_ENGINE = dict(max_model_len=1024, max_num_seqs=16, max_num_batched_tokens=4096, kv_cache_mb=64)
CONNECTOR_CLASS = {"example": "ExampleConnector", "nixl": "NixlConnector"}
ROLE = {"example": ("kv_producer", "kv_consumer"), "nixl": ("kv_both", "kv_both")}


def instance(args, work: Path, model: Path, side: str, store: Path) -> tuple[Server, dict]:
    """One instance's server and the engine_kwargs meta.json records for it."""
    from llmsched.vllm.launch import EngineConfig, engine_args, serve_command, serve_env
    role = ROLE[args.connector][0 if side == "prefill" else 1]
    kv = {"kv_connector": CONNECTOR_CLASS[args.connector], "kv_role": role}
    if args.connector == "example":
        kv["kv_connector_extra_config"] = {"shared_storage_path": str(store)}
    port = free_port()
    (work / side).mkdir(parents=True, exist_ok=True)
    if args.engine == "cpu":
        cfg = EngineConfig(model=str(model), scheduler_cls=None, **CPU_ENGINE)
        served = serve_command(cfg, port)[3:]  # (past python -m the API server)
        # (the executor backend of the CPU notes changes no step, and the colocated CPU capture leaves it out too)
        kwargs = {k: v for k, v in engine_args(cfg).items() if k not in ("model", "distributed_executor_backend")}
        env = serve_env(str(work / side), {})
    else:
        kwargs = {"load_format": "dummy", "gpu_memory_utilization": args.memory, "seed": 0}
        served = ["--model", str(model), "--host", "127.0.0.1", "--port", str(port), "--load-format", "dummy",
                  "--gpu-memory-utilization", str(args.memory), "--seed", "0"]
        env = None
    # under client_capture's stamps: each request's front-end times and the engine's steps, and vLLM's resolved
    # settings (engine_config.json), in the instance's folder
    cmd = [sys.executable, str(ROOT / "scripts" / "client_capture.py"), "--serve", str(work / side / "stamps.jsonl"),
           "--", *served, "--kv-transfer-config", json.dumps(kv)]
    kwargs = {**kwargs, "kv_transfer_config": {k: v for k, v in kv.items() if k != "kv_connector_extra_config"},
              "tensor_parallel_size": 1, "data_parallel_size": 1}
    return Server(cmd, env, work / f"{side}.log", port), kwargs


def prefill_model(stamps: list[dict]) -> dict:
    """The prefill instance's step as const + per_token × prompt tokens, least squares over its requests' time from
    the engine's hand-over (``added_ts``) to the first output (``first_out_ts``): one step a prompt where each ran
    alone (the capture's low rate), its queueing and the engine's IPC included as in a step cycle."""
    import numpy as np
    rows = [r for r in stamps if r.get("added_ts") is not None and r.get("first_out_ts") is not None]
    x = np.array([r["prompt_tokens"] for r in rows], dtype=float)
    y = np.array([r["first_out_ts"] - r["added_ts"] for r in rows])
    const, per_token = np.linalg.lstsq(np.vstack([np.ones(len(x)), x]).T, y, rcond=None)[0]
    return {"const": round(float(max(const, 0.0)), 6), "per_token": round(float(max(per_token, 0.0)), 9),
            "requests": len(rows), "median_s": round(float(np.median(y)), 6)}


def bench(args, model: Path, port: int, out: Path) -> dict:
    """`vllm bench serve` through its module (the CPU wheel's console script finds no package metadata)."""
    code = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
            "from vllm.benchmarks.serve import add_cli_args, main; p = FlexibleArgumentParser(); add_cli_args(p); "
            "main(p.parse_args(sys.argv[1:]))")
    words = ["--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}", "--model", str(model), "--tokenizer",
             str(model), "--dataset-name", "random", "--random-input-len", str(args.input_len),
             "--random-output-len", str(args.output_len), "--random-range-ratio", str(args.range_ratio),
             "--num-prompts", str(args.num_prompts), "--request-rate", str(args.rate), "--seed", "0",
             "--ignore-eos", "--save-result", "--save-detailed", "--result-dir", str(out), "--result-filename",
             "bench.json", "--percentile-metrics", "ttft,tpot,itl,e2el", "--num-warmups", "0"]
    proc = subprocess.run([sys.executable, "-c", code, *words], capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"vllm bench serve failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    result = json.loads((out / "bench.json").read_text())
    result.pop("generated_texts", None)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--engine", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--model-dir", help="the model folder (--engine gpu); default: a llmsched make-model tiny model")
    p.add_argument("--connector", choices=tuple(CONNECTOR_CLASS), default="example")
    p.add_argument("--memory", type=float, default=0.4, help="each GPU instance's gpu_memory_utilization")
    p.add_argument("--kv-link", default="bw=2GB/s,latency=1ms",
                   help="the link meta.json names for the replay (default: the CPU build's files, about a page "
                        "cache's rate)")
    p.add_argument("--rate", type=float, default=1.0)
    p.add_argument("--num-prompts", type=int, default=24)
    p.add_argument("--input-len", type=int, default=200)
    p.add_argument("--output-len", type=int, default=16)
    p.add_argument("--range-ratio", type=float, default=0.5)
    p.add_argument("--start-timeout", type=float, default=600)
    args = p.parse_args()
    import vllm
    from llmsched.vllm.model import write_model
    work = Path(tempfile.mkdtemp(prefix="pdc-"))  # short: vLLM's IPC sockets live in its temp folder (107 bytes)
    store = work / "kv"
    store.mkdir()
    model = Path(args.model_dir) if args.model_dir else write_model(work / "tiny")
    prefill, prefill_kwargs = instance(args, work, model, "prefill", store)
    decode, decode_kwargs = instance(args, work, model, "decode", store)
    proxy_port = free_port()
    proxy = Server([sys.executable, "-m", "llmsched", "pd-proxy", "--port", str(proxy_port), "--prefill",
                    prefill.url, "--decode", decode.url, "--connector", args.connector], None, work / "proxy.log",
                   proxy_port)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        for srv in (prefill, decode, proxy):
            srv.wait_ready(args.start_timeout)
        result = bench(args, model, proxy_port, work)
    finally:
        for srv in (prefill, decode, proxy):
            srv.stop()
    if result.get("failed"):
        raise SystemExit(f"{result['failed']} request(s) failed: {next(e for e in result['errors'] if e)[:300]}")
    (out / "bench.json").write_text(json.dumps(result) + "\n")
    seen = {}  # per instance, what vLLM resolved: the limits it chose go to engine_kwargs, the rest as seen
    for side, kwargs in (("prefill", prefill_kwargs), ("decode", decode_kwargs)):
        resolved = json.loads((work / side / "engine_config.json").read_text())
        for key in ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "dtype"):
            kwargs[key] = resolved.pop(key, kwargs.get(key))
        resolved.pop("tensor_parallel_size", None)
        seen[side] = {k: v for k, v in resolved.items() if v is not None}
    sends = result["start_times"]
    window = (min(sends), max(t + e for t, e in zip(sends, result["latencies"])))  # time.perf_counter: monotonic
    models = {}
    if args.engine == "cpu":
        read = lambda path: [json.loads(line) for line in path.read_text().splitlines()]  # noqa: E731
        models["prefill"] = prefill_model(read(work / "prefill" / "stamps.jsonl"))
        models["decode"] = step_model(read(work / "decode" / "steps.jsonl"), *window)
    shutil.copy(model / "config.json", out / "config.json")
    meta = {"model": "tiny (llmsched make-model)" if not args.model_dir else str(model),
            "vllm_version": vllm.__version__, "gpu": "cpu" if args.engine == "cpu" else gpu_name(),
            "host_cpu": platform.processor() or platform.machine(),
            "engine_kwargs": prefill_kwargs, "engine_defaults_seen": seen["prefill"],
            "disaggregation": {"decode": {"engine_kwargs": decode_kwargs, "engine_defaults_seen": seen["decode"]},
                               "kv_link": args.kv_link},
            "front_end": "vllm-serve",
            **({"cpu_step_model": models} if models else {}),
            "client": {"tool": "vllm bench serve", "through": "llmsched pd-proxy", "dataset": "random",
                       "request_rate": args.rate, "num_prompts": args.num_prompts,
                       "random_input_len": args.input_len, "random_output_len": args.output_len,
                       "random_range_ratio": args.range_ratio, "seed": 0, "ignore_eos": True},
            "command": "PYTHONPATH=$PWD python scripts/pd_capture.py " + " ".join(sys.argv[1:])}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {out}: {result['completed']} requests, TTFT p50 {result.get('median_ttft_ms', 0):.1f} ms, "
          f"TPOT p50 {result.get('median_tpot_ms', 0):.1f} ms")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

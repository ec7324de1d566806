"""Capture client-side ground truth with its engine-side twin: ``vllm serve`` driven by ``vllm bench serve``.

One OpenAI-compatible vLLM server (the venv's CPU build, a ``llmsched make-model`` folder with random weights) is
started with a few stamps added in its API-server process, then ``vllm bench serve --save-result --save-detailed``
sends the random dataset at each ``--rates`` value. For every request the run keeps, on one clock (Linux
``CLOCK_MONOTONIC``: the client's ``time.perf_counter`` and the server's ``time.monotonic`` read the same clock on
one machine):

* the client's figures, as ``vllm bench serve`` saves them: ``start_times`` (send), ``ttfts``, ``itls``,
  ``latencies`` (from vLLM 0.27; before, the TTFT plus the ITLs), ``input_lens``, ``output_lens``;
* the API server's: ``http_ts`` (the completion handler entered), ``rendered_ts`` (prompt rendered and
  tokenised), ``added_ts`` (handed to the engine client), ``first_out_ts``/``last_out_ts`` (the output processor
  took the request's first and last outputs), ``prompt_tokens`` (the server's own count);
* the engine core's, vLLM's ``RequestStateStats``: ``queued_ts``, ``scheduled_ts``, ``first_token_ts``,
  ``last_token_ts``; and ``num_cached_tokens``, the prompt tokens vLLM's prefix cache held (from vLLM 0.32).

A dataset that gives its requests no ids (vLLM's ``prefix_repetition``) has its engine rows matched to the bench's
requests in send order. With ``--plan`` on a CPU, meta.json's ``client.dataset_args`` keeps each bench's flags
(workload/traces/bench_prefixes.py reads the prefixes they made). A step model fitted on a run whose prompts found
cached blocks counts only the prompt tokens vLLM computed (``IterationStats.prompt_token_stats.computed``, vLLM
0.32; ``num_prompt_tokens``, the whole prompt's, before it).

Each rate becomes a run folder in ``--out`` in the ground-truth schema: ``bench.json`` (the bench result without its
generated texts), ``requests.jsonl`` (the engine's stamps in the ground-truth format, plus the server's and the
client's send time), ``meta.json`` (the engine arguments, vLLM's version, the host CPU) and ``config.json``.

    PYTHONPATH=$PWD python scripts/client_capture.py --out tests/data/cpu_client_run --rates 2 6 --num-prompts 30

On a GPU (``--engine gpu``) the server runs with vLLM's ``vllm serve`` defaults but random weights
(``--load-format dummy``) on a ``--model-dir`` (a model's own config.json beside a tokenizer that covers its
vocabulary: ``scripts/tekken_tokenizer.py``, since vLLM streams no chunk for a token with no text), and
``--plan FILE`` lists the benches (a JSON list of ``{"name", "rate", "num_prompts"}`` plus ``"lengths"``: a
requests.jsonl whose ``input_toks``/``output_toks`` become text prompts of those lengths, sent as vllm bench serve's
``custom`` dataset; ``"shared_prefix"``: ``{"groups", "prefix", "suffix", "output"}``, likewise; or
``"dataset"``: vllm bench serve's own dataset flags; ``"seconds"``: its time limit). Each bench becomes a folder
named after it; ``meta.json`` then also holds what vLLM resolved (limits, KV blocks, CUDA graphs) and the memory it
logged. ``--rebuild WORK`` writes the folders from a capture's work folder when the run stopped before it did.

    python scripts/client_capture.py --engine gpu --model-dir .gpu/m-llama --model-name meta-llama/Llama-3.1-8B \
        --plan .gpu/plan-llama.json --out runs/h200-llama --deadline 200

The stamping runs in the server process: ``python scripts/client_capture.py --serve STAMPS -- ARGS`` patches
four methods (no behaviour changed, each only records a time) and then runs vLLM's API server with ``ARGS``.
"""
from __future__ import annotations

import argparse
import contextvars
import json
import os
import platform
import re
import runpy
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
ENGINE_ARGS = dict(load_format="dummy", dtype="bfloat16", enforce_eager=True, max_model_len=1024,
                   max_num_seqs=16, max_num_batched_tokens=1024, block_size=32, kv_cache_memory_bytes=256 << 20,
                   seed=0)
GPU_ENGINE_ARGS = dict(load_format="dummy", seed=0)  # everything else: vllm serve's defaults for the GPU


def install_stamps(path: str) -> None:
    """Record, in this (the API server's) process, when each request passes the front end's stages."""
    from vllm.entrypoints.openai.completion.serving import OpenAIServingCompletion
    from vllm.v1.engine.output_processor import OutputProcessor

    out = open(path, "a", buffering=1)
    seen: dict[str, dict] = {}
    current = contextvars.ContextVar("client_capture_key", default=None)  # the request a handler serves

    def key_of(raw_request) -> str | None:
        return None if raw_request is None else raw_request.headers.get("X-Request-Id")

    create = OpenAIServingCompletion.create_completion

    async def create_completion(self, request, raw_request=None):
        key = key_of(raw_request)
        if key is not None:
            seen.setdefault(f"cmpl-{key}-0", {})["http_ts"] = time.monotonic()
            current.set(f"cmpl-{key}-0")
        return await create(self, request, raw_request)

    render = OpenAIServingCompletion.render_completion_request

    async def render_completion_request(self, request):
        result = await render(self, request)
        key = current.get()  # the request id is made after rendering: the handler's, one prompt a request
        if key is not None:
            seen.setdefault(key, {})["rendered_ts"] = time.monotonic()
        return result

    add = OutputProcessor.add_request

    def add_request(self, request, *args, **kwargs):
        rid = getattr(request, "external_req_id", None) or request.request_id
        seen.setdefault(rid, {})["added_ts"] = time.monotonic()
        return add(self, request, *args, **kwargs)

    process = OutputProcessor.process_outputs

    def process_outputs(self, engine_core_outputs, *args, **kwargs):
        now = time.monotonic()
        for o in engine_core_outputs:
            state = self.request_states.get(o.request_id)
            if state is None:
                continue
            row = seen.setdefault(state.external_req_id, {})
            row.setdefault("first_out_ts", now)
            row["last_out_ts"] = now
        return process(self, engine_core_outputs, *args, **kwargs)

    finish = OutputProcessor._finish_request

    def finish_request(self, req_state):
        s = req_state.stats
        row = seen.pop(req_state.external_req_id, {})
        if s is not None:  # vLLM's stats differ between releases: a field it lacks is recorded as null
            row.update({k: getattr(s, k, None) for k in ("arrival_time", "queued_ts", "scheduled_ts",
                                                         "first_token_ts", "last_token_ts", "num_preemptions")})
            # (num_cached_tokens: the prompt tokens vLLM's prefix cache held, RequestOutput's; None before 0.32)
            row.update(request_id=req_state.external_req_id, output_tokens=getattr(s, "num_generation_tokens", None),
                       num_cached_tokens=getattr(req_state, "num_cached_tokens", None),
                       prompt_tokens=len(req_state.prompt_token_ids or ()),
                       wall_minus_mono=time.time() - time.monotonic())
            out.write(json.dumps(row) + "\n")
        return finish(self, req_state)

    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.metrics.loggers import StatLoggerBase
    steps = open(os.path.join(os.path.dirname(path), "steps.jsonl"), "a", buffering=1)

    class StepRows(StatLoggerBase):
        """One row per engine step as the front end receives its outputs (vLLM calls ``record`` for each)."""

        def __init__(self, vllm_config=None, engine_index: int = 0, *args, **kwargs):
            pass

        def record(self, scheduler_stats=None, iteration_stats=None, *args, **kwargs):
            it, st = iteration_stats, scheduler_stats
            if it is None:
                return
            stats = getattr(it, "prompt_token_stats", None)  # (vLLM 0.32: the prompt tokens computed, not cached)
            steps.write(json.dumps({"t": time.monotonic(), "prompt_tokens": it.num_prompt_tokens,
                                    "computed_prompt_tokens": getattr(stats, "computed", None),
                                    "generation_tokens": it.num_generation_tokens,
                                    "running": getattr(st, "num_running_reqs", None),
                                    "waiting": getattr(st, "num_waiting_reqs", None)}) + "\n")

        def log_engine_initialized(self):
            pass

        def log(self):
            pass

    init = AsyncLLM.__init__

    def async_llm_init(self, *args, **kwargs):
        kwargs["stat_loggers"] = list(kwargs.get("stat_loggers") or []) + [StepRows]
        init(self, *args, **kwargs)
        cfg = kwargs.get("vllm_config") or (args[0] if args else None)
        if cfg is not None:
            with open(os.path.join(os.path.dirname(path), "engine_config.json"), "w") as f:
                json.dump(resolved_config(cfg), f)

    AsyncLLM.__init__ = async_llm_init
    OpenAIServingCompletion.create_completion = create_completion
    OpenAIServingCompletion.render_completion_request = render_completion_request
    OutputProcessor.add_request = add_request
    OutputProcessor.process_outputs = process_outputs
    OutputProcessor._finish_request = finish_request


def resolved_config(cfg) -> dict:
    """What vLLM chose for the settings a replay needs (its defaults depend on the GPU and the entry point)."""
    sched, cache, comp = cfg.scheduler_config, cfg.cache_config, cfg.compilation_config
    return {"max_num_seqs": sched.max_num_seqs, "max_num_batched_tokens": sched.max_num_batched_tokens,
            "max_model_len": cfg.model_config.max_model_len,
            "async_scheduling": getattr(sched, "async_scheduling", None),
            "enable_chunked_prefill": getattr(sched, "enable_chunked_prefill", None),
            "stream_interval": getattr(sched, "stream_interval", None),
            "enable_prefix_caching": getattr(cache, "enable_prefix_caching", None),
            "block_size": cache.block_size, "num_gpu_blocks": cache.num_gpu_blocks,
            "gpu_memory_utilization": cache.gpu_memory_utilization,
            "compilation_mode": str(getattr(comp, "mode", getattr(comp, "level", None))),
            "cudagraph_capture_sizes": getattr(comp, "cudagraph_capture_sizes", None),
            "tensor_parallel_size": cfg.parallel_config.tensor_parallel_size,
            "dtype": str(cfg.model_config.dtype).replace("torch.", "")}


def serve(stamps: str, args: list[str]) -> None:
    install_stamps(stamps)
    sys.argv = [SERVER_MODULE] + args
    runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)


def server_command(model: Path, port: int, stamps: Path, engine: str, extra: list[str]) -> list[str]:
    """On a CPU, the tiny model's settings; on a GPU, ``vllm serve``'s defaults with random weights."""
    cmd = [sys.executable, __file__, "--serve", str(stamps), "--", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port)]
    for name, value in (ENGINE_ARGS if engine == "cpu" else GPU_ENGINE_ARGS).items():
        flag = "--" + name.replace("_", "-")
        cmd += [flag] if value is True else [flag, str(value)]
    return cmd + list(extra)


def server_env(work: Path, engine: str) -> dict:
    """Offline, no usage report, a job-local temp folder; on a CPU the CPU notes' settings too (docs/vllm.md: one OMP
    thread, no core binding, a job-local cache). A GPU run keeps vLLM's cache, so a second server reuses the first's
    torch.compile artefacts."""
    env = dict(os.environ)
    for sub in ("tmp", "cache"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    env.update({"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "TMPDIR": str(work / "tmp")})
    if engine == "cpu":
        env.update({"VLLM_CPU_OMP_THREADS_BIND": "nobind", "OMP_NUM_THREADS": "1",
                    "VLLM_CACHE_ROOT": str(work / "cache")})
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}); its log:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(1.0)
    raise SystemExit(f"the server did not answer /health in {timeout:.0f} s; its log:\n{log.read_text()[-3000:]}")


def one_token_words(model: Path) -> list[str]:
    """Words of letters that the model folder's tokenizer encodes as one token each, with a leading space, and whose
    id is below the model's vocabulary (a prompt of them has exactly as many tokens as words)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    vocab = json.loads((model / "config.json").read_text()).get("vocab_size") or tok.get_vocab_size()
    words = []
    for i in range(min(vocab, tok.get_vocab_size())):
        text = tok.decode([i])
        if text.startswith(" ") and text[1:].isascii() and text[1:].isalpha() and tok.encode(text).ids == [i]:
            words.append(text)
    if not words:
        raise SystemExit(f"{model / 'tokenizer.json'}: no one-token words to build prompts from")
    return words


def words_text(rng, words: list[str], n: int) -> str:
    return "".join(rng.choice(words) for _ in range(n))


def length_prompts(model: Path, lengths: Path, out: Path) -> Path:
    """vllm bench serve's ``custom`` dataset from a requests.jsonl's lengths: each prompt is that many one-token
    words, each output that many tokens."""
    import random
    words, rng, rows = one_token_words(model), random.Random(0), []
    for line in lengths.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            rows.append({"prompt": words_text(rng, words, int(r["input_toks"])),
                         "output_tokens": max(int(r["output_toks"]), 1)})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def shared_prefix_prompts(model: Path, spec: dict, num_prompts: int, out: Path) -> Path:
    """A shared-prefix workload as vllm bench serve's ``custom`` dataset: ``groups`` prefixes of ``prefix`` tokens,
    request i using prefix i mod groups, each with its own ``suffix`` tokens, and ``output`` tokens out (the shape of
    vllm bench serve's prefix_repetition and inference-perf's shared_prefix, built from one-token words so that the
    prefix's tokens are identical in every request and the model's vocabulary bounds every id)."""
    import random
    words, rng = one_token_words(model), random.Random(0)
    prefixes = [words_text(rng, words, spec["prefix"]) for _ in range(spec["groups"])]
    rows = [{"prompt": prefixes[i % spec["groups"]] + words_text(rng, words, spec["suffix"]),
             "output_tokens": spec["output"]} for i in range(num_prompts)]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def bench_command(model: Path, port: int, bench: dict, args, result_dir: Path, name: str) -> list[str]:
    """``vllm bench serve`` (called through its module: the CPU wheel's ``vllm`` console script finds no package
    metadata, docs/vllm.md)."""
    words = ["--backend", "vllm", "--base-url", f"http://127.0.0.1:{port}", "--model", str(model),
             "--tokenizer", str(model), *bench["dataset"],
             "--num-prompts", str(bench["num_prompts"]), "--request-rate", str(bench["rate"]), "--seed", str(args.seed),
             "--ignore-eos", "--save-result", "--save-detailed", "--result-dir", str(result_dir),
             "--result-filename", name, "--request-id-prefix", bench["prefix"], "--percentile-metrics",
             "ttft,tpot,itl,e2el", "--num-warmups", str(args.warmups)]
    code = ("import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
            "from vllm.benchmarks.serve import add_cli_args, main; p = FlexibleArgumentParser(); add_cli_args(p); "
            "main(p.parse_args(sys.argv[1:]))")
    return [sys.executable, "-c", code, *words]


def stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def step_model(steps: list[dict], t0: float, t1: float) -> dict:
    """The CPU engine's step time as const + per_token × tokens, least squares over the steps between ``t0`` and
    ``t1`` that followed a busy step (a step's time is the gap between consecutive outputs; sync scheduling on
    CPU runs the next step at once while work remains). Fitted on the run's own steps: it prices the engine so that
    a replay isolates the front end's terms, and is not a model of any GPU."""
    rows = [r for r in steps if t0 <= r["t"] <= t1]
    x, y = [], []
    for prev, row in zip(rows, rows[1:]):
        if (prev.get("running") or 0) + (prev.get("waiting") or 0) > 0:
            computed = row.get("computed_prompt_tokens")  # (a prompt's cached tokens cost the step nothing)
            x.append((row["prompt_tokens"] if computed is None else computed) + row["generation_tokens"])
            y.append(row["t"] - prev["t"])
    import numpy as np
    if len(set(x)) < 2:  # (a prompt that finds the engine idle follows no busy step: an unbatched run has none)
        raise SystemExit(f"the CPU step fit: every step after a busy one computed {x[0] if x else 0} tokens, so "
                         f"const and per_token cannot be told apart; capture at a higher rate or with Poisson "
                         f"arrivals, so that prompts reach a busy engine")
    const, per_token = np.linalg.lstsq(np.vstack([np.ones(len(x)), x]).T, np.array(y), rcond=None)[0]
    return {"const": round(float(max(const, 0.0)), 6), "per_token": round(float(max(per_token, 0.0)), 9),
            "steps": len(x), "median_step_s": round(float(np.median(y)), 6)}


def gpu_name() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.splitlines()[0] if out else "unknown"


def gpu_facts(log_text: str, gpu: str | None = None) -> dict:
    """The GPU, torch, and the memory vLLM's engine core logged (scripts/gpu_run_meta.py reads the same lines)."""
    facts = {"gpu": gpu or gpu_name()}
    if gpu is None:
        try:
            import torch
            facts["torch"] = torch.__version__
        except ImportError:
            pass
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_run_meta import memory_gib
    facts["memory_gib"] = memory_gib(log_text)
    version = re.search(r"version (\d+\.\d+\.\S+)", log_text)  # the server's banner: the vLLM that served
    if version:
        facts["vllm_version"] = version.group(1)
    return facts


def run_folder(out: Path, bench: dict, bench_result: dict, stamps: list[dict], model: Path, args, host: str,
               steps: list[dict], engine_config: dict, facts: dict) -> None:
    """One bench's folder: the bench result (no generated texts), the engine's stamps as requests.jsonl, meta.json."""
    out.mkdir(parents=True, exist_ok=True)
    prefix = bench["prefix"]
    bench_result = {k: v for k, v in bench_result.items() if k != "generated_texts"}
    bench_result["itls"] = [[round(g, 6) for g in gaps] for gaps in bench_result["itls"]]  # microseconds suffice
    (out / "bench.json").write_text(json.dumps(bench_result, separators=(",", ":")) + "\n")
    mine = {}
    for row in stamps:
        rid = row.get("request_id", "")
        if rid.startswith(f"cmpl-{prefix}"):
            mine[int(rid[len(f"cmpl-{prefix}"):].split("-")[0])] = row
    starts = bench_result["start_times"]
    if not mine:  # a dataset that gives no request ids (prefix_repetition): matched in send order on the one clock
        sent = sorted(range(len(starts)), key=starts.__getitem__)
        after = sorted((r for r in stamps if r.get("added_ts") is not None and r["added_ts"] >= starts[sent[0]]),
                       key=lambda r: r["added_ts"])
        mine = dict(zip(sent, after))
    latencies = bench_result.get("latencies") or [ttft + sum(gaps) for ttft, gaps in  # before vLLM 0.27: no E2E list
                                                  zip(bench_result["ttfts"], bench_result["itls"])]
    lines = []
    for i in sorted(mine):
        row = mine[i]
        keep = {"request_id": f"{prefix}{i}", "input_toks": row["prompt_tokens"], "output_toks": row["output_tokens"],
                "arrival_time": round(row["arrival_time"], 6), "client_sent": round(starts[i], 6)}
        for k in ("http_ts", "rendered_ts", "added_ts", "first_out_ts", "last_out_ts", "queued_ts", "scheduled_ts",
                  "first_token_ts", "last_token_ts"):
            if row.get(k) is not None:
                keep[k] = round(row[k], 6)
        keep["client_first"] = round(starts[i] + bench_result["ttfts"][i], 6)
        keep["client_last"] = round(starts[i] + latencies[i], 6)
        keep["num_preemptions"] = row.get("num_preemptions")
        if row.get("num_cached_tokens") is not None:
            keep["num_cached_tokens"] = row["num_cached_tokens"]
        lines.append(keep)
    lines.sort(key=lambda r: r["arrival_time"])  # the engine's reading needs its arrival order
    t0, t1 = min(r["client_sent"] for r in lines), max(r["client_last"] for r in lines)
    (out / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    config = json.loads((model / "config.json").read_text())
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    import vllm
    client = {"tool": "vllm bench serve", "request_rate": bench["rate"], "num_prompts": bench["num_prompts"],
              "seed": args.seed, "ignore_eos": True, "num_warmups": args.warmups, "dataset_args": bench["dataset"]}
    for key in ("lengths", "shared_prefix", "prompt_bytes_per_token"):
        if bench.get(key):
            client[key] = bench[key]
    details = {"server": "vllm serve (python -m vllm.entrypoints.openai.api_server)",
               "endpoint": "/v1/completions, streamed", "prompt": "text (tokenised by the server)",
               "stream_interval": engine_config.get("stream_interval") or 1, "detokenize": True}
    if args.engine == "cpu":
        if not args.plan:  # (a plan's bench names its own dataset flags: dataset_args)
            client.update(dataset="random", random_input_len=args.input_len, random_output_len=args.output_len,
                          random_range_ratio=args.range_ratio)
            client.pop("dataset_args")
            client.pop("num_warmups")
        meta = {"model": "tiny (llmsched make-model)", "vllm_version": vllm.__version__, "gpu": "cpu",
                "host_cpu": host,
                "engine_kwargs": {**{k: v for k, v in ENGINE_ARGS.items()}, "tensor_parallel_size": 1,
                                  "data_parallel_size": 1},
                "engine_defaults_seen": {"async_scheduling": False, "enable_prefix_caching": True},
                "front_end": "vllm-serve", "front_end_details": details, "client": client,
                "cpu_step_model": step_model(steps, t0, t1)}
    else:
        resolved = dict(engine_config)
        kwargs = {"model": args.model_name, **GPU_ENGINE_ARGS, "data_parallel_size": 1}
        for k in ("tensor_parallel_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len", "dtype"):
            kwargs[k] = resolved.pop(k, None)
        meta = {"schema_version": 1, "model": args.model_name, "vllm_version": vllm.__version__,
                "engine_kwargs": kwargs, **facts, "host_cpu": host, "num_requests": len(lines),
                "workload": bench.get("workload", ""), "engine_defaults_seen": resolved,
                "front_end": "vllm-serve", "front_end_details": details, "client": client,
                "server_args": args.server_arg}
        (out / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps if t0 - 1 <= r["t"] <= t1 + 1))
    meta["command"] = "PYTHONPATH=$PWD python scripts/client_capture.py " + " ".join(sys.argv[1:])
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def plan_of(args, model: Path, work: Path) -> list[dict]:
    """The benches to run: ``--plan``'s list, or one random-dataset bench a ``--rates`` value."""
    if not args.plan:
        random_args = ["--dataset-name", "random", "--random-input-len", str(args.input_len),
                       "--random-output-len", str(args.output_len), "--random-range-ratio", str(args.range_ratio)]
        return [{"name": f"rate-{r:g}", "prefix": f"r{r:g}-", "rate": r, "num_prompts": args.num_prompts,
                 "dataset": random_args} for r in args.rates]
    benches = json.loads(Path(args.plan).read_text())
    for b in benches:
        for key in ("name", "rate", "num_prompts"):
            if key not in b:
                raise SystemExit(f"{args.plan}: a bench lacks '{key}'; each needs name, rate and num_prompts")
        b["prefix"] = f"{b['name']}-"
        path = work / f"{b['name']}-prompts.jsonl"
        if b.get("lengths") or b.get("shared_prefix"):
            if b.get("lengths"):
                length_prompts(model, Path(b["lengths"]), path)
            else:
                shared_prefix_prompts(model, b["shared_prefix"], b["num_prompts"], path)
            words = one_token_words(model)  # the words are drawn uniformly: their mean is a prompt's bytes a token
            b["prompt_bytes_per_token"] = round(sum(len(w.encode()) for w in words) / len(words), 4)
            b["dataset"] = ["--dataset-name", "custom", "--dataset-path", str(path), "--custom-output-len", "-1",
                            "--skip-chat-template"]
        b.setdefault("dataset", [])
    return benches


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def write_bench(out: Path, bench: dict, work: Path, model: Path, args, host: str, facts: dict) -> None:
    result = json.loads((work / f"bench-{bench['name']}.json").read_text())
    engine_config = json.loads((work / "engine_config.json").read_text()) if args.engine == "gpu" else {}
    run_folder(out / bench["name"], bench, result, read_rows(work / "stamps.jsonl"), model, args, host,
               read_rows(work / "steps.jsonl"), engine_config, facts)


def rebuild(args, work: Path, model: Path) -> int:
    """Run folders from a capture's work folder whose run stopped before it wrote them (its bench results, stamps,
    steps, resolved engine settings and server log are all there); the facts only the device knew are given."""
    out = Path(args.out)
    facts = gpu_facts((work / "server.log").read_text(), args.gpu_name) if args.engine == "gpu" else {}
    facts["startup_seconds"] = args.startup_seconds
    for bench in plan_of(args, model, work):
        if (work / f"bench-{bench['name']}.json").exists():
            write_bench(out, bench, work, model, args, args.host_cpu, {**facts, "rebuilt_from_work_folder": True})
            print(f"wrote {out / bench['name']}")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        serve(argv[1], argv[3:] if argv[2:3] == ["--"] else argv[2:])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--rates", type=float, nargs="+", default=[2.0, 6.0])
    p.add_argument("--num-prompts", type=int, default=30)
    p.add_argument("--input-len", type=int, default=400)
    p.add_argument("--output-len", type=int, default=48)
    p.add_argument("--range-ratio", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmups", type=int, default=2, help="vllm bench serve's --num-warmups before each bench")
    p.add_argument("--start-timeout", type=float, default=600)
    p.add_argument("--engine", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--model-dir", help="a model folder (config.json and a tokenizer); default: make-model's tiny")
    p.add_argument("--model-name", default="tiny (llmsched make-model)", help="the model's hub id, for meta.json")
    p.add_argument("--plan", help="a JSON list of benches (see the module's docstring); default: --rates")
    p.add_argument("--server-arg", action="append", default=[], help="one more `vllm serve` argument (repeatable)")
    p.add_argument("--deadline", type=float, help="seconds from start: a bench that would end after it is skipped")
    p.add_argument("--rebuild", metavar="WORK", help="write the run folders from a capture's work folder instead")
    p.add_argument("--gpu-name", help="with --rebuild: the GPU as nvidia-smi named it")
    p.add_argument("--host-cpu", default="unknown", help="with --rebuild: the host's CPU")
    p.add_argument("--startup-seconds", type=float, help="with --rebuild: the server's start-up time")
    args = p.parse_args(argv)
    if args.rebuild:
        work = Path(args.rebuild)
        return rebuild(args, work, Path(args.model_dir).resolve() if args.model_dir else work / "tiny")
    start = time.monotonic()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    out = Path(args.out)
    work = Path(tempfile.mkdtemp(prefix="client_capture_"))
    if args.model_dir:
        model = Path(args.model_dir).resolve()
    else:
        from llmsched.vllm.model import write_model
        model = write_model(work / "tiny")
    benches = plan_of(args, model, work)
    stamps = work / "stamps.jsonl"
    port = free_port()
    log = work / "server.log"
    host = platform.processor() or platform.machine()
    try:
        host = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    with open(log, "w") as f:
        proc = subprocess.Popen(server_command(model, port, stamps, args.engine, args.server_arg), stdout=f,
                                stderr=subprocess.STDOUT, env=server_env(work, args.engine), start_new_session=True)
    out.mkdir(parents=True, exist_ok=True)
    try:
        ready = wait_ready(f"http://127.0.0.1:{port}", proc, log, args.start_timeout)
        print(f"server ready in {ready:.0f} s", flush=True)
        facts = gpu_facts(log.read_text()) if args.engine == "gpu" else {}
        facts["startup_seconds"] = round(ready, 1)
        for bench in benches:
            name = f"bench-{bench['name']}.json"
            budget = bench.get("seconds", 120)
            if args.deadline is not None:
                left = args.deadline - (time.monotonic() - start)
                if left < budget:  # a bench cut short leaves nothing: keep the time for the next command
                    print(f"skipped {bench['name']}: {left:.0f} s left, it needs {budget} s", flush=True)
                    continue
            t_bench = time.monotonic()
            try:
                subprocess.run(bench_command(model, port, bench, args, work, name), check=True,
                               env=server_env(work, args.engine), timeout=budget)
            except subprocess.TimeoutExpired:
                print(f"{bench['name']}: vllm bench serve ran past {budget:.0f} s; no folder", flush=True)
                continue
            time.sleep(2.0)  # the last finish is written
            facts["bench_seconds"] = round(time.monotonic() - t_bench, 1)
            write_bench(out, bench, work, model, args, host, facts)
            print(f"wrote {out / bench['name']} at {time.monotonic() - start:.0f} s", flush=True)
    finally:
        stop(proc)
        shutil.copy(log, out / "server.log")
    return 0


if __name__ == "__main__":
    sys.exit(main())

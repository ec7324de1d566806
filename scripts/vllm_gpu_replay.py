"""Replay a per-request log through a real vLLM engine and record what vLLM measures, per request and per step.

The arrivals and the prompt/output lengths come from a ``requests.jsonl`` in the ground-truth format of
../shared/data/ground_truth (``arrival_time``, ``input_toks``, ``output_toks``); the model is a folder holding a
Hugging Face ``config.json`` loaded with random weights (``load_format="dummy"``: step times depend on the shapes,
not the weights), prompts are random token ids (no tokenizer), and every request generates exactly its output
length (``ignore_eos``). The engine is vLLM's ``AsyncLLM`` in its default multiprocess mode (the engine core in
its own process, as under ``vllm serve``), with vLLM's defaults except the arguments given. Writes into ``--out``:

* ``requests.jsonl``: the ground-truth schema (``queued_ts``, ``scheduled_ts``, ``first_token_ts``,
  ``last_token_ts`` from the engine's monotonic clock, plus ``num_preemptions``);
* ``steps.csv``: one row per engine step as vLLM's stat loggers see it (time, prompt and generated tokens,
  running and waiting requests, KV-cache use);
* ``meta.json``: vLLM's version, the engine arguments, the GPU, the KV-cache blocks vLLM computed, start-up time.

    python scripts/vllm_gpu_replay.py --model-dir llama/ --requests requests.jsonl --out run/ \\
        --max-num-seqs 128 --max-num-batched-tokens 2048
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import sys
import time


HASH_BLOCK = 512  # Mooncake's hash_ids: one id per 512 prompt tokens


def load_requests(path: str, skip: int = 0, limit: int | None = None, time_scale: float = 1.0,
                  max_input: int | None = None):
    """(offset s, prompt, output, id, hash_ids) per request: ground-truth rows (``arrival_time`` s, ``input_toks``,
    ``output_toks``, optional ``hash_ids``) or Mooncake rows (``timestamp`` ms, ``input_length``,
    ``output_length``, ``hash_ids``). ``max_input`` cuts longer prompts, keeping the hash ids of what is left."""
    rows = [json.loads(line) for line in open(path) if line.strip()][skip:]
    rows = rows[:limit] if limit else rows
    out = []
    for i, r in enumerate(rows):
        mooncake = "timestamp" in r
        keys = ("timestamp", "input_length", "output_length") if mooncake else ("arrival_time", "input_toks",
                                                                                   "output_toks")
        for key in keys:
            if key not in r:
                raise SystemExit(f"{path}: line {skip + i + 1} has no {key!r}")
        t = r["timestamp"] / 1000 if mooncake else r["arrival_time"]
        n_in = int(r["input_length"] if mooncake else r["input_toks"])
        n_out = int(r["output_length"] if mooncake else r["output_toks"])
        ids = r.get("hash_ids")
        if max_input and n_in > max_input:
            n_in = max_input
        if ids is not None:
            ids = [int(h) for h in ids[:-(-n_in // HASH_BLOCK)]]
            if len(ids) * HASH_BLOCK < n_in:
                raise SystemExit(f"{path}: line {skip + i + 1}: {len(ids)} hash_ids for {n_in} prompt tokens")
        out.append([t, n_in, n_out, str(r.get("request_id", skip + i)), ids])
    t0 = min(r[0] for r in out)
    for r in out:
        r[0] = (r[0] - t0) * time_scale
    return [tuple(r) for r in out]


def block_tokens(hash_id: int, seed: int, vocab: int) -> list[int]:
    """The 512 token ids of one hash block: the same for the same id, so equal ids share a cached prefix."""
    rng = random.Random(seed * 1_000_003 + hash_id)
    return [rng.randrange(100, vocab - 100) for _ in range(HASH_BLOCK)]


def step_logger_factory(rows: list, t_start: list):
    from vllm.v1.metrics.loggers import StatLoggerBase

    class StepRows(StatLoggerBase):
        """Keeps one row per engine step (vLLM calls ``record`` for each output batch of the engine core)."""

        def __init__(self, vllm_config=None, engine_index: int = 0, *args, **kwargs):
            self.engine_index = engine_index

        def record(self, scheduler_stats=None, iteration_stats=None, *args, **kwargs):
            it, s = iteration_stats, scheduler_stats
            row = {"t": time.monotonic(), "engine": self.engine_index}
            if it is not None:
                row.update(prompt_tokens=getattr(it, "num_prompt_tokens", ""),
                           generation_tokens=getattr(it, "num_generation_tokens", ""),
                           iteration_ts=getattr(it, "iteration_timestamp", ""))
            if s is not None:
                row.update(running=getattr(s, "num_running_reqs", ""), waiting=getattr(s, "num_waiting_reqs", ""),
                           kv_usage=getattr(s, "kv_cache_usage", getattr(s, "gpu_cache_usage", "")),
                           step_counter=getattr(s, "step_counter", ""))
            rows.append(row)

        def log_engine_initialized(self):
            t_start.append(time.monotonic())

        def log(self):
            pass

    return StepRows


async def replay(args, requests):
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    kwargs = dict(model=args.model_dir, load_format="dummy", dtype="bfloat16", skip_tokenizer_init=True,
                  max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_num_batched_tokens,
                  tensor_parallel_size=args.tp, seed=args.seed, disable_log_stats=False)
    if args.max_model_len:
        kwargs["max_model_len"] = args.max_model_len
    if args.extra:
        kwargs.update(json.loads(args.extra))
    step_rows, t_ready = [], []
    t_begin = time.monotonic()
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs),
                                       stat_loggers=[step_logger_factory(step_rows, t_ready)])
    startup = time.monotonic() - t_begin
    cfg = engine.vllm_config
    vocab = cfg.model_config.get_vocab_size()
    rng = random.Random(args.seed)
    results = [None] * len(requests)
    blocks = {}

    def prompt(n_in, hash_ids):
        if hash_ids is None:
            return [rng.randrange(100, vocab - 100) for _ in range(n_in)]
        ids = []
        for h in hash_ids:
            if h not in blocks:
                blocks[h] = block_tokens(h, args.seed, vocab)
            ids += blocks[h]
        return ids[:n_in]

    warmed = []
    for k, n in enumerate(args.warmup or []):  # one request at a time: each step holds exactly n prompt tokens
        ids = [rng.randrange(100, vocab - 100) for _ in range(n)]
        t = time.monotonic()
        async for _ in engine.generate({"prompt_token_ids": ids}, SamplingParams(max_tokens=2, detokenize=False),
                                       f"warmup{k}"):
            pass
        warmed.append([n, round(time.monotonic() - t, 4)])
    warmup_rows = len(step_rows)

    async def one(i, offset, n_in, n_out, rid, hash_ids, t0):
        delay = t0 + offset - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        ids = prompt(n_in, hash_ids)
        params = SamplingParams(max_tokens=n_out, min_tokens=n_out, ignore_eos=True, temperature=0.0,
                                detokenize=False)
        sent_wall, sent = time.time(), time.monotonic()
        final, first = None, None
        async for out in engine.generate({"prompt_token_ids": ids}, params, f"r{i}"):
            if first is None:
                first = time.monotonic()
            final = out
        m = final.metrics
        results[i] = {"request_id": rid, "input_toks": n_in, "output_toks": len(final.outputs[0].token_ids),
                      **({"hash_ids": hash_ids} if hash_ids is not None else {}),
                      "num_cached_tokens": getattr(final, "num_cached_tokens", None),
                      "arrival_time": sent_wall, "client_sent": sent, "client_first": first,
                      "client_last": time.monotonic(),
                      **{k: getattr(m, k, None) for k in ("queued_ts", "scheduled_ts", "first_token_ts",
                                                          "last_token_ts", "num_preemptions")}}

    t0 = time.monotonic() + 0.5
    t_run = time.monotonic()
    await asyncio.gather(*(one(i, *r, t0) for i, r in enumerate(requests)))
    wall = time.monotonic() - t_run
    meta = {"vllm_version": __import__("vllm").__version__, "engine_kwargs": kwargs,
            "startup_seconds": startup, "replay_seconds": wall, "num_requests": len(requests),
            "num_gpu_blocks": cfg.cache_config.num_gpu_blocks, "block_size": cfg.cache_config.block_size,
            "max_model_len": cfg.model_config.max_model_len,
            "async_scheduling": getattr(cfg.scheduler_config, "async_scheduling", None),
            "enable_chunked_prefill": getattr(cfg.scheduler_config, "enable_chunked_prefill", None),
            "enable_prefix_caching": getattr(cfg.cache_config, "enable_prefix_caching", None),
            "cudagraph_capture_sizes": getattr(cfg.compilation_config, "cudagraph_capture_sizes", None),
            "compilation_mode": str(getattr(cfg.compilation_config, "mode", getattr(cfg.compilation_config,
                                                                                     "level", None))),
            "gpu_memory_utilization": cfg.cache_config.gpu_memory_utilization,
            "warmup": warmed, "warmup_step_rows": warmup_rows}
    if any(r[4] is not None for r in requests):
        meta["hash_block"] = HASH_BLOCK
    try:
        import torch
        meta["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        meta["torch"] = torch.__version__
    except Exception as e:  # the record still matters without it
        meta["gpu_error"] = repr(e)
    engine.shutdown()
    return results, step_rows, meta


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True)
    p.add_argument("--requests", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--max-num-seqs", type=int, default=128)
    p.add_argument("--max-num-batched-tokens", type=int, default=2048)
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--skip", type=int, default=0, help="start at the request after the first N")
    p.add_argument("--limit", type=int, help="replay only the first N requests (after --skip)")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply the gaps between arrivals")
    p.add_argument("--max-input", type=int, help="cut longer prompts to N tokens (their hash_ids too)")
    p.add_argument("--warmup", type=lambda v: [int(x) for x in v.split(",")],
                   help="prompt lengths sent one at a time before the replay (e.g. so Triton compiles every "
                        "fused-MoE tile first); their steps are the first warmup_step_rows rows of steps.csv")
    p.add_argument("--extra", help="more engine arguments as JSON (e.g. for a CPU test)")
    args = p.parse_args(argv)
    requests = load_requests(args.requests, args.skip, args.limit, args.time_scale, args.max_input)
    os.makedirs(args.out, exist_ok=True)
    results, steps, meta = asyncio.run(replay(args, requests))
    with open(os.path.join(args.out, "requests.jsonl"), "w") as fh:
        for r in sorted(results, key=lambda r: r["arrival_time"]):  # send order: rows due together wake in any
            fh.write(json.dumps(r) + "\n")
    keys = sorted({k for row in steps for k in row})
    with open(os.path.join(args.out, "steps.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, keys)
        w.writeheader()
        w.writerows(steps)
    with open(os.path.join(args.out, "meta.json"), "w") as fh:
        json.dump(meta, fh, indent=1, default=str)
    done = [r for r in results if r and r.get("first_token_ts")]
    ttft = sorted(r["first_token_ts"] - r["queued_ts"] for r in done)
    print(json.dumps({"requests": len(results), "with_metrics": len(done), "steps": len(steps),
                      "ttft_p50": ttft[len(ttft) // 2] if ttft else None, **{k: meta[k] for k in (
                          "startup_seconds", "replay_seconds", "num_gpu_blocks")}}), flush=True)


if __name__ == "__main__":
    sys.exit(main())

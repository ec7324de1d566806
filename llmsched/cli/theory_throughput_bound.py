"""``llmsched theory throughput-bound``: a true upper bound on the requests/s any schedule can serve;
llmsched/theory/throughput_bound.py derives it."""
from __future__ import annotations

import json

from ..theory.throughput_bound import PRESET_REQUESTS, compute, describe
from .package_commands import keywords, run_field_option, run_field_options

FUNCTION = compute


def add_arguments(p) -> None:
    run_field_options(p, "model", "gpu")
    run_field_option(p, "tp", "tensor-parallel degree")
    run_field_option(p, "batch_time", "batch-time model (roofline, roofline-staircase, calibrated, linear)")
    src = p.add_mutually_exclusive_group()
    run_field_option(src, "workload")
    run_field_option(src, "trace", "a trace file: its own lengths")
    run_field_option(p, "num_requests", f"requests drawn from --workload (default {PRESET_REQUESTS}) or read from "
                                        f"--trace (default all)")
    run_field_option(p, "max_total_tokens", "cap prompt+output (as the simulator)")
    run_field_option(p, "replicas", "replicas (default %(default)s)")
    run_field_option(p, "max_num_seqs", "engine limit (default %(default)s)")
    run_field_option(p, "max_num_batched_tokens", "engine limit (default %(default)s)")
    run_field_option(p, "block_size", "KV block size (default %(default)s)")
    run_field_option(p, "gpu_memory_utilization", "default %(default)s")
    run_field_option(p, "num_blocks", "KV blocks (default: sized from the GPU)")
    run_field_option(p, "kv_cache_dtype", "KV cache data type (fp8: twice the tokens, half the bytes read)")
    run_field_option(p, "max_model_len", "engine limit: longer requests are never served")
    run_field_option(p, "dp", "data-parallel ranks, each a replica of its own")
    p.add_argument("--served-fraction", type=float,
                   help="fraction of the offered work (tokens) a run must serve (default %(default)g: all)")
    run_field_option(p, "seed")
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args) -> int:
    cfg, bound = compute(**keywords(args, "json"))
    if args.json:
        print(json.dumps({"model": cfg.model, "gpu": cfg.gpu, "tp": cfg.tp, "batch_time": cfg.batch_time,
                          "workload": cfg.trace or cfg.workload, **bound.as_dict()}, indent=2))
        return 0
    print(f"{cfg.model}{f' tp{cfg.tp}' if cfg.tp else ''} on {cfg.gpu} ({cfg.batch_time}), "
          f"{cfg.trace or cfg.workload} lengths ({bound.offered} requests)")
    print("\n".join(describe(bound)))
    return 0

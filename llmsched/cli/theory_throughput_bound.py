"""``llmsched theory throughput-bound``: a true upper bound on the requests/s any schedule can serve;
llmsched/theory/throughput_bound.py derives it."""
from __future__ import annotations

import json

from ..theory.throughput_bound import bound_for_config, config, describe
from .package_commands import keywords

NAME = "throughput-bound"
HELP = ("a sound upper bound on the requests/s any scheduler can serve for a model/GPU/workload under the "
        "simulator's batch-time model and engine limits (what `llmsched plan` prunes with)")


def add_arguments(p) -> None:
    p.add_argument("--model", default="llama-3-8b", help="model preset (default llama-3-8b)")
    p.add_argument("--gpu", default="a100", help="GPU preset (default a100)")
    p.add_argument("--tp", type=int, default=None, help="tensor-parallel degree")
    p.add_argument("--batch-time", default="roofline", help="batch-time model (roofline, roofline-staircase, "
                                                            "calibrated, linear)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--workload", default=None, help="length preset (default sharegpt)")
    src.add_argument("--trace", default=None, help="a trace file: its own lengths")
    p.add_argument("--num-requests", type=int, default=None,
                   help="requests drawn from --workload (default 20000) or read from --trace (default all)")
    p.add_argument("--max-total-tokens", type=int, default=None, help="cap prompt+output (as the simulator)")
    p.add_argument("--replicas", type=int, default=1, help="replicas (default 1)")
    p.add_argument("--max-num-seqs", type=int, default=None, help="engine limit (default 256)")
    p.add_argument("--max-num-batched-tokens", type=int, default=None, help="engine limit (default 8192)")
    p.add_argument("--block-size", type=int, default=None, help="KV block size (default 16)")
    p.add_argument("--gpu-memory-utilization", type=float, default=None, help="default 0.9")
    p.add_argument("--num-blocks", type=int, default=None, help="KV blocks (default: sized from the GPU)")
    p.add_argument("--served-fraction", type=float, default=1.0,
                   help="fraction of the offered work (tokens) a run must serve (default 1: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args) -> int:
    cfg = config(**keywords(args, "json", "served_fraction"))
    bound = bound_for_config(cfg, args.served_fraction)
    if args.json:
        print(json.dumps({"model": cfg.model, "gpu": cfg.gpu, "tp": cfg.tp, "batch_time": cfg.batch_time,
                          "workload": cfg.trace or cfg.workload, **bound.as_dict()}, indent=2))
        return 0
    print(f"{cfg.model}{f' tp{cfg.tp}' if cfg.tp else ''} on {cfg.gpu} ({cfg.batch_time}), "
          f"{cfg.trace or cfg.workload} lengths ({bound.offered} requests)")
    print("\n".join(describe(bound)))
    return 0

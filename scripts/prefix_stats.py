"""The offline prefix-cache count of a trace (llmsched/workload/traces/prefix_stats.py): with a cache that evicts
nothing, the prompt tokens found cached, request after request in arrival order.

    python scripts/prefix_stats.py conversation_trace.jsonl [--block-size 16] [--no-outputs] [--num-requests N]

A bare file name is looked up as ``--trace`` looks it up ($LLMSCHED_DATA, ../shared/data/traces and subfolders).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from llmsched.workload.traces.prefix_stats import prefix_stats
from llmsched.workload.workload import trace_workload


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--no-outputs", action="store_true", help="count only earlier prompts as seen, not their replies")
    p.add_argument("--num-requests", type=int, default=None)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    source = trace_workload(args.trace, num_requests=args.num_requests, block_size=args.block_size).source()
    stats = prefix_stats(source.initial(), args.block_size, outputs=not args.no_outputs)
    print(json.dumps({"trace": args.trace, "outputs_seen": not args.no_outputs, **stats.describe(),
                      "seconds": round(time.perf_counter() - t0, 1)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

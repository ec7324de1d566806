"""A single request's TTFT when its prompt's KV is loaded from host memory, against computing it, for a range of
prompt lengths: the setup of vLLM's blog figure (O. Ozeri, D. Harnik, "Inside vLLM's New KV Offloading Connector",
vLLM blog, 2026-01-08, Figure 1: Llama-3.1-8B-Instruct on an H100, GPU prefix caching off, 16-token CPU blocks).

The run: request A (the prompt) computes and is stored in the CPU tier; a filler of the same length pushes A's blocks
out of a GPU cache that holds one such prompt (the blog ran with the GPU cache off); then B, A's prompt again,
arrives alone. B's TTFT is the load, then the prompt's last token. Without the tier B computes the whole prompt.

    python scripts/kv_offload_ttft.py [--mode vllm] [--lengths 1000,10000,...] [--batch-time roofline]
"""
from __future__ import annotations

import argparse
import json

from llmsched.batchtime.registry import make_batch_time_model
from llmsched.content import Content, Space, piece_id
from llmsched.engine.offload_plan import plan_offload
from llmsched.engine.offload_spec import parse_kv_offload
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.hardware.gpus import gpu
from llmsched.hardware.models import model
from llmsched.request import Request
from llmsched.routing.registry import make_router
from llmsched.schedulers import create_scheduler
from llmsched.sim.simulator import simulate
from llmsched.workload.workload import OpenLoop

# the blog's Figure 1, read off the plot (ms): prompt length (K tokens) -> (GPU compute, load from CPU)
BLOG_FIGURE_1 = {1: (25, 12), 10: (260, 40), 20: (640, 70), 30: (1100, 105), 40: (1650, 130), 50: (2290, 160),
                 60: (3010, 190), 70: (3850, 220), 80: (4790, 255), 90: (5740, 280), 100: (6850, 310)}


def ttft(n: int, offload: str | None, mode: str, batch_time: str, budget: int) -> float:
    m, g = model("llama-3.1-8b"), gpu("h100")
    bt = make_batch_time_model(batch_time, m, g)
    plan = plan_offload(parse_kv_offload(offload), mode, m, g, 1, 16) if offload else None
    blocks = -(-n // 16)  # one prompt's blocks: the filler pushes all of A's out
    cfg = ReplicaConfig(num_blocks=blocks, block_size=16, max_model_len=131072, max_num_batched_tokens=budget,
                        prefix_caching=True, kv_offload=plan)
    rep = Replica(0, create_scheduler("vllm-chunked", token_budget=budget), bt, cfg)
    a = Content.of_pieces([(piece_id(Space.NAMED, 7), n)], reply=1)
    reqs = [Request(0, 0.0, n, 1, content=a),
            Request(1, 100.0, n, 1, content=Content.of_pieces([(piece_id(Space.NAMED, 8), n)], reply=2)),
            Request(2, 200.0, n, 1, content=a)]
    simulate(OpenLoop(reqs), [rep], make_router("round-robin"))
    b = reqs[2]
    return b.first_token - b.arrival


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", default="vllm")
    p.add_argument("--lengths", default=",".join(str(k * 1000) for k in BLOG_FIGURE_1))
    p.add_argument("--batch-time", default="roofline")
    p.add_argument("--budget", type=int, default=8192, help="max_num_batched_tokens (vLLM's default for the H100)")
    args = p.parse_args(argv)
    rows = []
    for n in map(int, args.lengths.split(",")):
        compute = ttft(n, None, args.mode, args.batch_time, args.budget)
        load = ttft(n, "cpu:500GiB", args.mode, args.batch_time, args.budget)
        blog = BLOG_FIGURE_1.get(n // 1000)
        rows.append({"prompt": n, "compute_ms": round(compute * 1e3, 1), "load_ms": round(load * 1e3, 1),
                     "gain": round(compute / load, 2),
                     **({"blog_compute_ms": blog[0], "blog_load_ms": blog[1], "blog_gain": round(blog[0] / blog[1], 2)}
                        if blog else {})})
        print(json.dumps(rows[-1]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Simulator speed on the real one-hour Azure conversation trace (19,366 requests).

Runs each scheduler in a fresh process (so peak memory is its own) with Llama-3-8B on
an A100 and prints simulated steps and requests per wall-second and peak RSS.

    python benchmarks/bench_simulator.py [--trace PATH] [--schedulers sarathi,vllm] [--sketch]

For scale: Vidur, measured on this kind of machine, simulates about 7,500 steps and
800 requests per wall-second (after ~24 min of training its predictors), ~25 s for this trace.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from llmsched.experiment import RunConfig, run
cfg = RunConfig(**json.loads(sys.argv[1]))
t0 = time.perf_counter()
result = run(cfg)
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": wall, "sim_wall_s": result.wall_time, "steps": len(result.steps),
                  "requests": len(result.requests), "simulated_s": result.end_time,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default="AzureLLMInferenceTrace_conv.csv")
    p.add_argument("--schedulers", default="sarathi,vllm")
    p.add_argument("--model", default="llama-3-8b")
    p.add_argument("--gpu", default="a100")
    p.add_argument("--sketch", action="store_true", help="TBT gaps as quantile sketches only")
    args = p.parse_args()
    print(f"trace {args.trace}, {args.model} on {args.gpu}{', sketch mode' if args.sketch else ''}")
    print(f"{'scheduler':<14}{'requests':>9}{'steps':>9}{'sim s':>8}{'wall s':>8}"
          f"{'steps/s':>10}{'req/s':>9}{'peak MB':>9}")
    for name in args.schedulers.split(","):
        cfg = {"scheduler": name, "model": args.model, "gpu": args.gpu, "trace": args.trace, "rate": None,
               "keep_gaps": not args.sketch}
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True)
        if out.returncode:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{name:<14}{r['requests']:>9}{r['steps']:>9}{r['simulated_s']:>8.0f}{r['wall_s']:>8.2f}"
              f"{r['steps'] / r['sim_wall_s']:>10.0f}{r['requests'] / r['sim_wall_s']:>9.0f}"
              f"{r['peak_rss_mb']:>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A day of traffic, at a smaller scale: the diurnal day of docs/workloads.md ("Time-varying traffic") with its
period, burst and duration divided by ``--scale`` (the rates kept), simulated with ``--stream`` in a fresh process.

The day: azure-conv lengths, ``diurnal:peak=48,trough=12`` (30 requests/s on average, 4:1 from peak to trough) with
a threefold burst of ten minutes at noon, on 8 replicas of Llama-3-8B on H100s behind a round-robin router (a
router that routes ahead: the replicas run as lanes), vllm-chunked. ``--scale 1`` is the whole day (about 2.65
million requests; ``--scale 24`` an hour of it, about 110,000).

Prints, per run: requests, step rows, CPU seconds (user + system, the interpreter's start-up included), wall
seconds, peak RSS (the child's own VmHWM), CPU per request, and the CPU a whole day would take at that cost. The
machine may be shared: CPU seconds are the figure to compare, wall seconds say what the machine gave.

    python benchmarks/bench_day.py [--scale 24] [--out DIR] [--batch-time roofline]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DAY = 86400.0

CHILD = r"""
import json, resource, sys
from llmsched.cli import main
code = main(sys.argv[1:])
use = resource.getrusage(resource.RUSAGE_SELF)
peak = next(int(line.split()[1]) / 1024 for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"code": code, "cpu_s": use.ru_utime + use.ru_stime, "peak_mb": peak}))
"""


def day_args(scale: float, batch_time: str | None) -> list[str]:
    period = DAY / scale
    schedule = f"diurnal:peak=48,trough=12,period={period:g};burst:at={period / 2:g},x=3,for={600 / scale:g}"
    args = ["simulate", "--workload", "azure-conv", "--rate-schedule", schedule, "--duration", f"{period:g}",
            "--replicas", "8", "--router", "round-robin", "--gpu", "h100", "--model", "llama-3-8b",
            "--scheduler", "vllm-chunked", "--stream", "--no-progress"]
    return args + (["--batch-time", batch_time] if batch_time else [])


def run_day(scale: float, out: Path, batch_time: str | None) -> dict:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, *day_args(scale, batch_time), "--out", str(out)],
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"the day run failed:\n{proc.stderr}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    summary = json.loads((out / "summary.json").read_text())
    requests = summary["counts"]["offered"]
    steps = sum(1 for _ in open(out / "steps.csv")) - 1
    return {"scale": scale, "requests": requests, "steps": steps, "cpu_s": got["cpu_s"], "wall_s": wall,
            "peak_mb": got["peak_mb"], "cpu_us_per_request": 1e6 * got["cpu_s"] / requests,
            "day_cpu_min_at_this_cost": got["cpu_s"] / requests * requests_a_day() / 60,
            "ttft_p99_s": summary["latency"]["ttft"]["p99"], "rejected": summary["counts"]["rejected"],
            "unfinished": summary["counts"]["unfinished"]}


def requests_a_day() -> float:
    """The whole day's expected requests: its schedule's integral over 86,400 s."""
    from llmsched.workload.arrivals.rate_schedule import parse_rate_schedule
    return float(parse_rate_schedule(day_args(1.0, None)[4]).shape.cumulative(DAY))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=24.0, help="divide the day by this (default 24: an hour)")
    p.add_argument("--out", help="keep the run's files here (default: a temporary folder)")
    p.add_argument("--batch-time", help="the batch-time model (default: simulate's)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        row = run_day(args.scale, out, args.batch_time)
    width = max(len(k) for k in row)
    for key, value in row.items():
        print(f"{key:<{width}}  {value:.4g}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

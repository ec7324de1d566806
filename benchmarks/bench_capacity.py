"""Probes and wall time of a capacity search and of a plan, with 1 and 2 local workers and with Ray.

* capacity: sarathi, Llama-3-8B on an A100, ShareGPT lengths, SLOs ttft_p90<=2s,tbt_p99<=0.2s, 2% resolution
  (probes of 600 s of Poisson arrivals, the capacity command's default);
* plan: 3 GPUs (a100, h100, h200) x 3 TP (1, 2, 4) x 3 schedulers (sarathi, vllm, fairbatching) for ShareGPT
  at --rate req/s (default 5) within the same SLOs, probes of --duration s (default 300: shorter probes of
  ShareGPT's long requests still ramp up inside the window and read as backlogged).

Every run goes through the CLI as a user would run it, with the probe cache off, so each figure is a cold
search. A search's probes are the same whichever executor runs them (asserted here).

    python benchmarks/bench_capacity.py [--rate 5] [--duration 300] [--skip-ray] [--only capacity|plan] [--keep DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from llmsched.cli import main as llmsched

SLO = "ttft_p90<=2s,tbt_p99<=0.2s"


def timed(argv: list[str]) -> tuple[float, str]:
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = llmsched(argv)
    wall = time.perf_counter() - t0
    if code != 0:
        raise SystemExit(f"llmsched {' '.join(argv)} failed ({code})")
    return wall, out.getvalue()


def executors(skip_ray: bool) -> list[tuple[str, list[str]]]:
    runs = [("local, 1 worker", ["--jobs", "1"]), ("local, 2 workers", ["--jobs", "2"])]
    if not skip_ray:
        try:
            import ray  # noqa: F401
            runs.append(("ray (local, 2 CPUs)", ["--executor", "ray", "--jobs", "2"]))
        except ImportError:
            print("ray is not installed: skipping the Ray executor")
    return runs


def bench_capacity(tmp: Path, runs) -> None:
    print("capacity: sarathi, llama-3-8b on a100, sharegpt, SLOs " + SLO + ", resolution 2%")
    seen = None
    for name, extra in runs:
        out = tmp / f"cap-{len(extra)}-{extra[-1]}"
        wall, text = timed(["capacity", "--scheduler", "sarathi", "--gpu", "a100", "--workload", "sharegpt",
                            "--slo", SLO, "--resolution", "0.02", "--no-cache", "--no-progress", "--out", str(out),
                            *extra])
        data = json.loads((out / "capacity.json").read_text())["schedulers"]["sarathi"]
        probes = [(p["rate"], p["meets"]) for p in data["probes"]]
        assert seen is None or probes == seen, "executors disagree on the capacity search"
        seen = probes
        lo, hi = data["interval"]
        print(f"  {name:<22} {data['num_probes']:>3} probes  {wall:7.1f} s   capacity {data['capacity']:g} req/s "
              f"(fails at {hi:g}: {hi / lo - 1:.1%} apart)")


def bench_plan(tmp: Path, runs, rate: float, duration: float, keep: Path | None) -> None:
    print(f"plan: a100,h100,h200 x tp 1,2,4 x sarathi,vllm,fairbatching; sharegpt at {rate:g} req/s, "
          f"{duration:g} s probes, SLOs {SLO}")
    seen = None
    for name, extra in runs:
        out = tmp / f"plan-{len(extra)}-{extra[-1]}.json"
        wall, text = timed(["plan", "--target-rate", f"{rate:g}", "--slo", SLO, "--gpus", "a100,h100,h200",
                            "--tp", "1,2,4", "--schedulers", "sarathi,vllm,fairbatching", "--workload", "sharegpt",
                            "--duration", f"{duration:g}", "--no-cache", "--no-progress", "--json", str(out),
                            *extra])
        data = json.loads(out.read_text())
        if keep is not None and seen is None:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / "plan_output.txt").write_text(text)
            (keep / "plan.json").write_text(out.read_text())
        probes = sum(len(s["probes"]) for s in data["searches"])
        searches = [(s["label"], s["replicas"], sorted(s["probes"])) for s in data["searches"]]
        assert seen is None or searches == seen, "executors disagree on the plan"
        seen = searches
        best = data["cheapest"][0] if data["cheapest"] else None
        pruned = sum(1 for c in data["candidates"] if c["pruned"])
        winner = f"{best['label']} x{best['replicas']} ${best['usd_per_hour']:.2f}/h" if best else "none"
        print(f"  {name:<22} {probes:>3} probes  {wall:7.1f} s   {len(data['candidates'])} candidates, {pruned} "
              f"pruned; cheapest {winner}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", type=float, default=5.0, help="plan's target rate, req/s (default 5)")
    p.add_argument("--duration", type=float, default=300.0, help="plan's probe length, s (default 300)")
    p.add_argument("--skip-ray", action="store_true")
    p.add_argument("--only", choices=("capacity", "plan"), default=None)
    p.add_argument("--keep", type=Path, default=None, help="save the first plan's printed output and JSON here")
    args = p.parse_args()
    os.environ.setdefault("RAY_ADDRESS", "local")     # a fresh local Ray, never a cluster left running here
    print(f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    runs = executors(args.skip_ray)
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "capacity"):
            bench_capacity(Path(tmp), runs)
        if args.only in (None, "plan"):
            bench_plan(Path(tmp), runs, args.rate, args.duration, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())

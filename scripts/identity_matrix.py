"""The identity matrix: every registered scheduler under KV pressure, overflow eviction (restart and recompute),
swap, four replicas with tiers and a load-based router, a closed loop, a horizon and light load, six fleets
(disaggregated prefill and decode, an autoscaled pool), plus a real trace with sarathi, vllm-chunked and vllm --
each run through the command line, its files kept.

A change that must not change behaviour (a refactor, a speed-up) is checked by running the matrix before and
after and comparing: ``requests.csv``, ``steps.csv`` and ``summary.json`` (less its wall time) byte for byte, and
the error text of a run that refuses its configuration. Every run pins ``--batch-time roofline`` (the kind of
every run before ``vllm-v1`` became the default engine model), so that baselines made before and after that change
compare like with like.

    python scripts/identity_matrix.py run OUT_DIR [--sketch] [--jobs 2] [--only SUBSTRING]
    python scripts/identity_matrix.py compare OLD_DIR NEW_DIR

Run the 'before' side from a worktree of the old commit (``git worktree add /tmp/base COMMIT``; its own install
or ``LLMSCHED_PURE=1`` with ``PYTHONPATH=/tmp/base``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# --batch-time pinned to the kind every run used before vllm-v1 became the default, and engine-side latencies
# (the baseline was taken before the client boundary existed), so that a baseline made before those changes
# is still compared like with like (the KV cache follows the kind: hardware/kv_sizing.py)
PINNED = ["--batch-time", "roofline", "--latency-boundary", "engine"]
BASE = ["--model", "llama-3-8b", "--gpu", "a100", "--workload", "sharegpt", "--no-progress", *PINNED]
SETTINGS = {
    "kv": ["--rate", "3", "--num-requests", "200", "--num-blocks", "600"],
    "evict": ["--rate", "3", "--num-requests", "200", "--num-blocks", "600", "--overflow", "evict-newest"],
    "evict-rc": ["--rate", "3", "--num-requests", "200", "--num-blocks", "600",
                 "--overflow", "evict-newest-recompute"],
    "swap": ["--rate", "3", "--num-requests", "200", "--num-blocks", "600", "--preemption-mode", "swap",
             "--swap-space-gb", "0.05"],
    "rep4": ["--rate", "10", "--num-requests", "300", "--replicas", "4", "--router", "least-load",
             "--tiers", "paid:tbt=0.1:share=0.2,free:tbt=0.5", "--num-blocks", "1500"],
    "closed": ["--concurrency", "48", "--num-requests", "300", "--num-blocks", "1200"],
    "horizon": ["--rate", "4", "--num-requests", "300", "--horizon", "40"],
    "light": ["--rate", "0.5", "--num-requests", "120"],
}
# fleets, through sim/fleet_loop.py: prefill/decode disaggregation (the transfer network, decode-side reservations,
# loads held for a step in flight, decode-side preemptions under a tight cache, both connectors, a decider) and
# replicas an autoscaler adds (with a cold start) and removes
FLEET_BASE = ["--model", "llama-3-8b", "--gpu", "a100", "--num-requests", "400", "--no-progress", *PINNED]
FLEETS = {
    "fleet__1P1D-sarathi-code": ["--scheduler", "sarathi", "--workload", "azure-code", "--rate", "3",
                                 "--disaggregate", "1P1D"],
    "fleet__2P1D-vllm-tight-decode": ["--scheduler", "vllm", "--workload", "sharegpt", "--rate", "12",
                                      "--disaggregate", "2P1D", "--decode-pool", "num_blocks=600"],
    "fleet__1P2D-chunked-pcie": ["--scheduler", "vllm-chunked", "--workload", "azure-conv", "--rate", "8",
                                 "--disaggregate", "1P2D", "--kv-link", "pcie-gen4"],
    "fleet__2P1D-goodput-layerwise": ["--scheduler", "goodput", "--workload", "azure-code", "--rate", "4",
                                      "--disaggregate", "2P1D", "--kv-connector", "layerwise", "--kv-link", "ib-100g"],
    "fleet__1P1D-llm-d-decider": ["--scheduler", "sarathi", "--workload", "sharegpt", "--rate", "6",
                                  "--disaggregate", "1P1D", "--pd-decider", "llm-d"],
    "fleet__hpa-cold-start": ["--scheduler", "sarathi", "--workload", "sharegpt", "--rate", "8", "--replicas", "2",
                              "--autoscaler", "hpa", "--min-replicas", "1", "--max-replicas", "4",
                              "--cold-start", "20"],
}
TRACE_SCHEDULERS = ("sarathi", "vllm-chunked", "vllm")
TRACE = "AzureLLMInferenceTrace_conv.csv"  # found as --trace finds it ($LLMSCHED_DATA, ../shared/data/traces)


def configs():
    from llmsched.schedulers.registry import scheduler_info, scheduler_names
    out = {}
    for name in scheduler_names():
        info = scheduler_info(name)
        extra = ["--oracle"] if info["needs_oracle"] else []
        for setting, args in SETTINGS.items():
            out[f"{name}__{setting}"] = ["--scheduler", name, *BASE, *args, *extra]
    from llmsched.workload.traces.readers import DataFileNotFound, resolve_data_file
    try:
        trace = resolve_data_file(TRACE)
    except DataFileNotFound:  # a checkout without the data: the trace configs are left out
        trace = None
    for key, args in FLEETS.items():
        out[key] = [*args, *FLEET_BASE]
    if trace is not None:
        for name in TRACE_SCHEDULERS:
            out[f"{name}__conv-trace"] = ["--scheduler", name, "--model", "llama-3-8b", "--gpu", "a100",
                                          "--trace", str(trace), "--num-requests", "3000", "--no-progress", *PINNED]
    return out


def run_one(key: str, args: list[str], out: Path, sketch: bool) -> str:
    target = out / key
    target.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", "import sys; from llmsched.cli import main; sys.exit(main())", "simulate", *args,
           "--out", str(target / "run")]
    if sketch:
        cmd.append("--sketch")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (target / "rc").write_text(f"{proc.returncode}\n")
    if proc.returncode:
        (target / "error").write_text(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "")
    return key


def digest(run_dir: Path) -> dict:
    out = {"rc": (run_dir / "rc").read_text().strip()}
    if (run_dir / "error").exists():
        out["error"] = (run_dir / "error").read_text()
    for name in ("requests.csv", "steps.csv"):
        path = run_dir / "run" / name
        if path.exists():
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    summary = run_dir / "run" / "summary.json"
    if summary.exists():
        data = json.loads(summary.read_text())
        for key in ("wall_time_s", "wall_s"):
            data.pop(key, None)
        data.get("run", {}).pop("wall_time", None)  # the run's own wall clock, in the summary since it streams
        out["summary.json"] = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    return out


def stored_or_fresh(out: Path) -> dict:
    """The digests of a run folder, recomputed from its runs where they are there (a digests.json written by an
    older digest would differ in what it leaves out), else as stored."""
    runs = sorted(p.name for p in out.iterdir() if (p / "rc").exists())
    if runs:
        return {k: digest(out / k) for k in runs}
    return json.loads((out / "digests.json").read_text())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--sketch", action="store_true")
    r.add_argument("--jobs", type=int, default=2)
    r.add_argument("--only", default="")
    c = sub.add_parser("compare")
    c.add_argument("old")
    c.add_argument("new")
    args = p.parse_args(argv)
    if args.command == "run":
        out = Path(args.out)
        every = configs()
        todo = {k: v for k, v in every.items() if args.only in k}
        if not todo:
            p.error(f"--only {args.only!r} names no config: a row is SCHEDULER__CASE or fleet__NAME (e.g. "
                    f"{', '.join(sorted(every)[:2])}, fleet__1P1D-sarathi-code); give a part of one")
        with ThreadPoolExecutor(args.jobs) as pool:
            for i, key in enumerate(pool.map(lambda kv: run_one(kv[0], kv[1], out, args.sketch), todo.items())):
                if (i + 1) % 25 == 0:
                    print(f"{i + 1}/{len(todo)}", flush=True)
        digests = {k: digest(out / k) for k in sorted(todo)}
        (out / "digests.json").write_text(json.dumps(digests, indent=1, sort_keys=True))
        failed = sum(1 for d in digests.values() if d["rc"] != "0")
        print(f"{len(digests)} configs run into {out} ({failed} refused their configuration)")
        return 0
    old, new = (stored_or_fresh(Path(d)) for d in (args.old, args.new))
    both = set(old) & set(new)
    differ = sorted(k for k in both if old[k] != new[k])
    for k in differ:
        print(f"DIFFERS {k}: {old[k]} != {new[k]}")
    one_side = sorted(set(old) ^ set(new))
    if one_side:  # a subset run (--only), or a matrix from before a config was added
        print(f"{len(one_side)} configs run on one side only, not compared: {', '.join(one_side[:6])}"
              + (" ..." if len(one_side) > 6 else ""))
    print(f"{len(both) - len(differ)} of {len(both)} identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

"""Simulator speed and memory, each row in a fresh process, optionally next to another checkout of llmsched.

Rows (``--rows``, comma-separated; default ``conv,replicas,running256``):

* ``conv``: ``llmsched simulate --trace AzureLLMInferenceTrace_conv.csv --out DIR`` (19,366 requests, Llama-3-8B
  on an A100) for sarathi and vllm-chunked: CPU seconds of the whole command (start-up, simulation, writing
  summary.json, requests.csv, steps.csv) and its peak RSS;
* ``x10``: the same trace repeated 10 times end to end (193,660 requests), with ``--sketch``;
* ``200k`` and ``1m``: 200,000 and 1,000,000 requests of the azure-conv lengths at 5 req/s (the conv trace's
  own load, which one replica keeps up with), vllm-chunked, ``--sketch --stream``: the logs are written during
  the run, so peak RSS should not grow from one row to the other (the baseline side runs without ``--stream``,
  which older checkouts lack; ``1m`` is slow: minutes);
* ``mooncake200k`` and ``mooncake1m``: the Mooncake conversation trace (12,031 requests, prompts with hash_ids)
  repeated end to end to 200,000 and 1,000,000 requests, each copy's block ids renumbered (new conversations),
  replayed at 2 req/s on 8 replicas of Llama-3.1-8B on H100s, round-robin, vllm-chunked, ``--sketch --stream``:
  each request's content is read from the file as the run reaches it, so peak RSS should grow only by the
  trace's arrival and length columns (24 bytes a request); this checkout only (older ones cannot read JSONL);
* ``prefix``: the Mooncake conversation trace (12,031 requests) at 2 req/s on 8 replicas of Llama-3.1-8B on H100s,
  vllm-chunked, with vLLM v1's prefix cache on and off (llmsched/engine/prefix_cache.py): simulation CPU of the
  same run with and without it (target: at most 1.25x); this checkout only;
* ``offload``: the ``prefix`` row with the cache on, without KV tiers and with a 200 GiB host-memory tier in each
  connector's model (vllm, lmcache; docs/kv-offload.md): the tiers' cost, at most 1.25x; this checkout only;
* ``disagg``: ``--disaggregate 1P1D`` against ``--replicas 2`` (the same two GPUs), 3,000 requests at 3 req/s of
  sharegpt, azure-code and azure-conv, Llama-3-8B on A100s, sarathi: ``experiment.run``'s CPU, the median of three
  runs (target: 1P1D within 1.3x of colocated); this checkout only;
* ``replicas``: simulation CPU per step with 1, 8 and 32 replicas (round-robin, 4 req/s and 2,000 requests per
  replica; the 1-replica row, a tenth of a second, is the median of five runs; several replicas run as lanes,
  llmsched/sim/lanes.py);
* ``routers``: the 32-replica row routed by ``least-outstanding`` (an index) and ``least-load`` (loads kept per
  replica version) instead of round-robin (both read replica state: the one event loop);
* ``configjson``: Llama-3.1-8B and Qwen3-30B-A3B (MoE) each as a preset and from its config.json
  (tests/data/gpu_runs), vllm-chunked on an RTX PRO 6000, ShareGPT at 4 req/s, 4,000 requests; the median of
  three runs: a config.json model must simulate as fast as its preset twin;
* ``running256``: simulation CPU per step in a closed loop of 256 users (ShareGPT lengths, 8,000 requests),
  sarathi (~80 of them running: its 512-token budget binds) and vllm-chunked (~240 running); the ``running``
  column is the mean over steps; the median of three runs.
* ``vllm-v1``: running256's vllm-chunked row with ``--batch-time roofline`` and with ``vllm-v1`` (the engine
  terms around the same roofline): what vLLM v1's terms cost a step (no baseline: older checkouts lack the kind).
* ``ledgers``: the policies with a reservation ledger (orca, fastertransformer, infermax, infermax-orca), azure-conv
  at 4 req/s, 4,000 requests, colocated; the median of three runs: what their decode-pool rules cost a colocated run.

``--baseline PATH`` runs every row a second time with ``PYTHONPATH=PATH`` (e.g. a worktree of an older commit)
and prints after/before ratios measured in the same run; ``--baseline pure`` runs this checkout's Python sources
(``LLMSCHED_PURE=1``) against its compiled modules (llmsched/compiled.py; the ``build`` column says which ran).
The machine is shared: compare ratios, not absolutes.

    python benchmarks/bench_simulator.py [--rows conv,x10,replicas,routers,running256,vllm-v1,configjson,200k,1m,
        mooncake200k,mooncake1m,prefix,offload,disagg,ledgers] [--baseline PATH|pure]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# What a child reports besides its times: which llmsched ran (compiled or the sources), and its peak RSS, the
# process's own VmHWM (ru_maxrss carries over the parent's RSS at fork: the bench itself, ~100 MB once pandas is
# loaded, which would floor every row at it).
CHILD_HELPERS = r"""
import os as _os, sys as _sys
if _os.environ.get("BENCH_FROM_SOURCE"):  # --per-module: these modules (and their declared dependents) from source
    import llmsched.compiled as _c
    _sys.meta_path.insert(0, _c.SourceFirst(_c.dependents(set(_os.environ["BENCH_FROM_SOURCE"].split(","))),
                                            _c.ROOT))

def build():
    import llmsched  # a checkout older than llmsched/compiled.py is pure Python
    return llmsched.compiled.STATE[0] if hasattr(llmsched, "compiled") else "pure"

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
"""

RUN_CHILD = CHILD_HELPERS + r"""
import json, sys, time
import llmsched
from llmsched.experiment import RunConfig, build_replicas, build_source, workload_params
from llmsched.routing.registry import make_router
from llmsched.sim.simulator import simulate
spec = json.loads(sys.argv[1])
repeat = spec.pop("repeat", 1)
whole = spec.pop("whole_run", False)  # time experiment.run: building the workload and the replicas included
cfg = RunConfig(**spec)
cpus = []
for _ in range(repeat):  # a short row: the median of several runs, each on a fresh workload and replicas
    if whole or cfg.runs_as_fleet:  # a fleet (disaggregated, autoscaled) runs only whole
        from llmsched.experiment import run
        t0 = time.process_time()
        result = run(cfg)
        cpus.append(time.process_time() - t0)
        continue
    source = build_source(cfg)
    replicas = build_replicas(cfg, workload_params(cfg, source))
    t0 = time.process_time()
    result = simulate(source, replicas, make_router(cfg.router), horizon=cfg.horizon, seed=cfg.seed)
    cpus.append(time.process_time() - t0)
cpu = sorted(cpus)[len(cpus) // 2]
running = result.steps.arrays()["num_running"]  # a view: reading the log adds nothing to the peak
print(json.dumps({"cpu_s": cpu, "steps": len(result.steps), "requests": len(result.requests),
                  "running": int(running.sum()) / max(1, len(running)), "peak_mb": peak_mb(), "module": llmsched.__file__,
                  "build": build()}))
"""


REPO = str(Path(__file__).resolve().parents[1])  # the "now" side: this checkout, whatever is installed


def child_env(pythonpath: str | None) -> dict:
    """The child imports llmsched from ``pythonpath`` (None: this checkout; "pure": its Python sources;
    "source:M1,M2": this checkout with those compiled modules from source). Children run in a scratch directory:
    ``python -c`` puts the working directory first on sys.path, ahead of PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("LLMSCHED_PURE", "BENCH_FROM_SOURCE")}
    if pythonpath == "pure":
        env["LLMSCHED_PURE"] = "1"
    if pythonpath and pythonpath.startswith("source:"):
        env["BENCH_FROM_SOURCE"] = pythonpath[len("source:"):]
        pythonpath = None
    env["PYTHONPATH"] = REPO if pythonpath in (None, "pure") else pythonpath
    return env


CLI_CHILD = CHILD_HELPERS + r"""
import json, resource, sys
import llmsched
from llmsched.cli import main
code = main(sys.argv[1:])
use = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"code": code, "cpu_s": use.ru_utime + use.ru_stime, "peak_mb": peak_mb(),
                  "module": llmsched.__file__, "build": build()}))
"""


def run_cli(argv: list[str], pythonpath: str | None) -> dict:
    """CPU seconds (user + system, the interpreter's start-up included) and peak RSS of one ``llmsched``
    command, measured by the command's own process. A baseline runs without ``--stream``."""
    if pythonpath not in (None, "pure") and not pythonpath.startswith("source:"):
        argv = [a for a in argv if a != "--stream"]
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, "-c", CLI_CHILD, *argv, "--out", out, "--no-progress"],
                              env=child_env(pythonpath), capture_output=True, text=True, cwd=out)
        if proc.returncode:
            raise RuntimeError(f"llmsched {' '.join(argv)} failed:\n{proc.stderr}")
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        if got["code"]:
            raise RuntimeError(f"llmsched {' '.join(argv)} exited {got['code']}:\n{proc.stderr}")
        got["steps"] = sum(1 for _ in open(Path(out) / "steps.csv")) - 1
    return got


def run_sim(cfg: dict, pythonpath: str | None) -> dict:
    """Simulation CPU seconds (``simulate`` alone: no start-up, no building of the workload and the replicas, no
    writing) and steps of one run in a fresh process (the median of ``repeat`` runs in it, when the spec says)."""
    with tempfile.TemporaryDirectory() as scratch:
        proc = subprocess.run([sys.executable, "-c", RUN_CHILD, json.dumps(cfg)], env=child_env(pythonpath),
                              capture_output=True, text=True, cwd=scratch)
    if proc.returncode:
        raise RuntimeError(f"run {cfg} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def repeated_trace(path: Path, times: int, out: Path) -> Path:
    """``path`` (an Azure CSV) repeated ``times`` times end to end, each copy shifted by the trace's span."""
    import pandas as pd
    df = pd.read_csv(path)
    stamps = pd.to_datetime(df["TIMESTAMP"])
    span = stamps.max() - stamps.min() + pd.Timedelta(seconds=1)
    copies = []
    for k in range(times):
        copy = df.copy()
        copy["TIMESTAMP"] = (stamps + k * span).dt.strftime("%Y-%m-%d %H:%M:%S.%f")
        copies.append(copy)
    pd.concat(copies).to_csv(out, index=False)
    return out


def repeated_mooncake(path: Path, total: int, out: Path) -> Path:
    """``path`` (a Mooncake JSONL trace) repeated end to end until ``total`` lines, each copy's timestamps shifted
    by the trace's span and its hash ids by the largest id plus one."""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    span = rows[-1]["timestamp"] - rows[0]["timestamp"] + 1000
    ids = 1 + max(max(r["hash_ids"]) for r in rows)
    with open(out, "w") as f:
        for k in range(total):
            r = rows[k % len(rows)]
            copy = k // len(rows)
            f.write(json.dumps({"timestamp": r["timestamp"] + copy * span, "input_length": r["input_length"],
                                "output_length": r["output_length"],
                                "hash_ids": [h + copy * ids for h in r["hash_ids"]]}) + "\n")
    return out


PINNED_KIND = "roofline"  # every row's batch-time kind unless it names one: rows compare like with like across
                          # checkouts made before and after vllm-v1 became the default (as the identity matrix)


def rows(names: list[str], tmp: Path):
    """(row label, kind, spec) for each requested row, the batch-time kind pinned where the row names none."""
    for label, kind, spec in unpinned_rows(names, tmp):
        if isinstance(spec, dict):
            spec = {"batch_time": PINNED_KIND, **spec}
        elif "--batch-time" not in spec:
            spec = [*spec, "--batch-time", PINNED_KIND]
        yield label, kind, spec


def unpinned_rows(names: list[str], tmp: Path):
    """(row label, kind, spec) for each requested row."""
    from llmsched.workload.traces.readers import resolve_data_file
    for name in names:
        if name == "conv":
            trace = str(resolve_data_file("AzureLLMInferenceTrace_conv.csv"))
            for sched in ("sarathi", "vllm-chunked"):
                yield f"conv trace, {sched}", "cli", ["simulate", "--scheduler", sched, "--trace", trace]
        elif name == "x10":
            trace = repeated_trace(resolve_data_file("AzureLLMInferenceTrace_conv.csv"), 10, tmp / "conv10.csv")
            yield "conv x10, vllm-chunked, --sketch", "cli", ["simulate", "--scheduler", "vllm-chunked",
                                                              "--trace", str(trace), "--sketch"]
        elif name in ("200k", "1m"):
            n = 200_000 if name == "200k" else 1_000_000
            yield f"{n:,} requests, --stream", "cli", [
                "simulate", "--scheduler", "vllm-chunked", "--workload", "azure-conv", "--rate", "5",
                "--num-requests", str(n), "--sketch", "--stream"]
        elif name in ("mooncake200k", "mooncake1m"):
            n = 200_000 if name == "mooncake200k" else 1_000_000
            trace = repeated_mooncake(resolve_data_file("conversation_trace.jsonl"), n, tmp / f"{name}.jsonl")
            yield f"Mooncake x{n / 12031:.0f}, 8 replicas, --stream", "cli-now", [
                "simulate", "--scheduler", "vllm-chunked", "--trace", str(trace), "--rate", "2", "--model",
                "llama-3.1-8b", "--gpu", "h100", "--replicas", "8", "--sketch", "--stream"]
        elif name == "prefix":
            for caching in (True, False):
                yield f"Mooncake conv, prefix cache {'on' if caching else 'off'}", "sim-now", {
                    "scheduler": "vllm-chunked", "trace": str(resolve_data_file("conversation_trace.jsonl")),
                    "rate": 2.0, "model": "llama-3.1-8b", "gpu": "h100", "replicas": 8, "keep_gaps": False,
                    "prefix_caching": caching}
        elif name == "offload":
            # the prefix row with KV tiers below the GPU (docs/kv-offload.md): each connector's model, and without
            for label, extra in (("no tiers", {}), ("cpu:200GiB, vllm", {"kv_offload": "cpu:200GiB"}),
                                 ("cpu:200GiB, lmcache", {"kv_offload": "cpu:200GiB", "kv_offload_mode": "lmcache"})):
                yield f"Mooncake conv, prefix cache, {label}", "sim-now", {
                    "scheduler": "vllm-chunked", "trace": str(resolve_data_file("conversation_trace.jsonl")),
                    "rate": 2.0, "model": "llama-3.1-8b", "gpu": "h100", "replicas": 8, "keep_gaps": False, **extra}
        elif name == "disagg":
            # 1P1D against two colocated replicas (the same GPUs) on a prompt-heavy, a balanced and a conversation
            # mix (docs/disaggregation.md, "Simulation speed"), on the default batch time: both timed through
            # experiment.run (the colocated one's workload and replicas built inside the timing too, as a fleet's
            # pools are), the median of three runs
            for workload in ("sharegpt", "azure-code", "azure-conv"):
                for label, layout in (("colocated x2", {"replicas": 2}), ("1P1D", {"disaggregate": "1P1D"})):
                    yield f"{workload}, {label}", "sim-now", {
                        "scheduler": "sarathi", "workload": workload, "rate": 3.0, "num_requests": 3000,
                        "model": "llama-3-8b", "gpu": "a100", "batch_time": "vllm-v1", "repeat": 3,
                        "whole_run": True, **layout}
        elif name == "replicas":
            for n in (1, 8, 32):
                yield f"{n} replica(s), sarathi", "sim", {
                    "scheduler": "sarathi", "workload": "azure-conv", "rate": 4.0 * n, "num_requests": 2000 * n,
                    "replicas": n, "router": "round-robin", "repeat": 5 if n == 1 else 1}
        elif name == "routers":
            for router in ("least-outstanding", "least-load"):
                yield f"32 replicas, {router}", "sim", {
                    "scheduler": "sarathi", "workload": "azure-conv", "rate": 128.0, "num_requests": 64_000,
                    "replicas": 32, "router": router}
        elif name == "running256":
            # 256 users, each sending its next request when the last ends: sarathi's 512-token budget keeps
            # ~80 of them running (ShareGPT prompts take most of it), vllm-chunked's 2,048 ~240 (the "running"
            # column: the mean over steps)
            for sched in ("sarathi", "vllm-chunked"):
                yield f"256 users, {sched}", "sim", {
                    "scheduler": sched, "workload": "sharegpt", "concurrency": 256, "rate": None,
                    "num_requests": 8000, "max_num_seqs": 256, "num_blocks": 200_000, "repeat": 3}
        elif name == "vllm-v1":
            # running256's vllm-chunked row through vLLM v1's engine terms (batchtime/vllm_v1.py: CUDA-graph
            # padding, async scheduling's overlap and late admission) around the same roofline
            for kind in ("roofline", "vllm-v1"):
                yield f"256 users, vllm-chunked, {kind}", "sim", {
                    "scheduler": "vllm-chunked", "workload": "sharegpt", "concurrency": 256, "rate": None,
                    "num_requests": 8000, "max_num_seqs": 256, "num_blocks": 200_000, "batch_time": kind,
                    "repeat": 3}
        elif name == "ledgers":
            # the policies that keep a reservation ledger (Orca, FasterTransformer, InferMax's default and its Orca
            # setting) on 4,000 azure-conv requests, colocated: what their decode-pool rules cost where nothing is
            # held outside the running set (docs/disaggregation.md)
            for sched in ("orca", "fastertransformer", "infermax", "infermax-orca"):
                yield f"azure-conv, {sched}", "sim", {
                    "scheduler": sched, "workload": "azure-conv", "rate": 4.0, "num_requests": 4000, "repeat": 3}
        elif name == "configjson":
            # a model from its config.json against its preset twin: the same shapes, so the same steps; the
            # MoE one runs the roofline's expert terms every step
            runs = Path(REPO) / "tests" / "data" / "gpu_runs"
            for preset, folder in (("llama-3.1-8b", "h200-llama-3.1-8b"), ("qwen3-30b-a3b", "h200-qwen3-30b-a3b")):
                for label, name_or_path in ((f"preset {preset}", preset), (f"config.json {preset}",
                                                                            str(runs / folder))):
                    yield label, "sim", {
                        "scheduler": "vllm-chunked", "model": name_or_path, "gpu": "rtx-pro-6000",
                        "workload": "sharegpt", "rate": 4.0, "num_requests": 4000, "max_num_seqs": 128,
                        "max_num_batched_tokens": 2048, "repeat": 3}
        else:
            raise SystemExit(f"unknown row {name!r}; rows: conv, x10, 200k, 1m, mooncake200k, mooncake1m, prefix, "
                             f"offload, disagg, replicas, routers, running256, vllm-v1, configjson, ledgers")


def refuse_stale_build(allowed: bool) -> None:
    """Figures of a build that an edit has made stale are the sources' figures under the build's name: refuse
    them, unless asked (a checkout with no build at all measures its sources, and says so in the build column)."""
    from llmsched import compiled
    kind, why = compiled.state()
    if kind == "partial" or kind == "pure" and any(compiled.extension(m) for m in compiled.MODULES):
        if not allowed and not os.environ.get("LLMSCHED_PURE"):
            raise SystemExit(f"this checkout's build is stale ({why}); rebuild with `pip install -e . --no-deps` "
                             f"(or pass --allow-stale)")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", default="conv,replicas,running256")
    p.add_argument("--baseline", default=None,
                   help="PYTHONPATH of an older llmsched to compare with, or 'pure': this one's Python sources")
    p.add_argument("--per-module", action="store_true",
                   help="each row with one compiled module at a time from source (with the modules whose "
                        "declarations cimport it), against all compiled: what compiling each module earns")
    p.add_argument("--allow-stale", action="store_true",
                   help="measure even when this checkout's build is not current for every module (the figures are "
                        "then of its sources, in part or whole)")
    args = p.parse_args()
    refuse_stale_build(args.allow_stale)
    if args.per_module:
        return per_module(args.rows.split(","))
    sides = [("now", None)] + ([("before", args.baseline)] if args.baseline else [])
    print(f"{'row':<36}{'side':>7}{'build':>9}{'CPU s':>8}{'steps':>10}{'us/step':>9}{'running':>9}{'peak MB':>9}"
          f"{'now/before':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, kind, spec in rows(args.rows.split(","), Path(tmp)):
            got = {}
            for side, path in sides:
                if kind.endswith("-now") and side == "before":
                    print(f"{label:<36}{side:>7}  (this checkout only)", flush=True)
                    continue
                got[side] = run_cli(spec, path) if kind.startswith("cli") else run_sim(spec, path)
                r = got[side]
                if side == "before" and path != "pure" and r["module"] == got["now"]["module"]:
                    raise SystemExit(f"--baseline {path}: the child imported {r['module']}, the same llmsched as "
                                     f"now; give the root of another checkout")
                ratio = f"{got['now']['cpu_s'] / r['cpu_s']:.2f}x" if side == "before" else ""
                running = f"{r['running']:.0f}" if "running" in r else ""
                print(f"{label:<36}{side:>7}{r['build']:>9}{r['cpu_s']:>8.2f}{r['steps']:>10}"
                      f"{1e6 * r['cpu_s'] / r['steps']:>9.1f}{running:>9}{r['peak_mb']:>9.0f}{ratio:>12}", flush=True)
    return 0


def per_module(names: list[str]) -> int:
    """For each row: CPU with every module compiled, then with each compiled module from source in turn (the
    all-compiled run repeated between them, as the machine's load drifts): the ratio is what compiling it earns."""
    from llmsched import compiled
    groups = []
    for m in compiled.MODULES:
        group = compiled.dependents({m})
        if group not in groups:
            groups.append(group)
    print(f"{'row':<36}{'from source':<44}{'CPU s':>8}{'all compiled':>14}{'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for label, kind, spec in rows(names, Path(tmp)):
            run = (lambda path: run_cli(list(spec), path)) if kind == "cli" else (lambda path: run_sim(dict(spec), path))
            for group in groups:
                base = run(None)["cpu_s"]
                got = run("source:" + ",".join(sorted(group)))["cpu_s"]
                base = (base + run(None)["cpu_s"]) / 2
                name = ",".join(m.replace("llmsched.", "") for m in sorted(group))
                print(f"{label:<36}{name:<44}{got:>8.2f}{base:>14.2f}{got / base:>7.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

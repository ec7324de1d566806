"""Colocated vs 1P1D vs 2P1D on prompt-heavy, balanced and decode-heavy traffic (``llmsched reproduce pd-crossover``,
llmsched/cli/reproduce_pd_crossover.py): where disaggregation pays and where it does not.

The sources disagree in a way a simulator can settle: vLLM's documentation says disaggregation does not improve
throughput but gives control over TTFT and the tail of ITL (docs.vllm.ai, "Disaggregated Prefilling
(experimental)", "Why disaggregated prefilling?"); llm-d recommends it for prompt-heavy traffic (input:output near
10:1 or more) on fast networks (llm-d, "Well-lit path: P/D disaggregation"). Each workload here is a length mix
of one shape (prompt and output drawn uniform within ±50% of their means, written as a length file), each
deployment Llama-3-8B on H100s with vLLM's chunked-prefill policy (``vllm-chunked``) on every replica, the KV over
400 Gb/s InfiniBand:

* **colocated ×2** and **1P1D**: 2 GPUs; **colocated ×3** and **2P1D**: 3 GPUs;
* the capacity (the shared definition, llmsched/capacity: the highest rate that is stable and meets the SLOs) of
  each, per GPU, under two SLO sets: ``relaxed`` (TTFT p90 ≤ 2 s, TBT p99 ≤ 100 ms) and ``strict`` (TBT p99 ≤
  50 ms), since the sources' claims are about the tail of ITL;
* at one common rate per workload (80% of colocated ×2's relaxed capacity) each deployment's TTFT p90 and TBT p99.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ..capacity import find_capacities, parse_slos
from ..executors import make_executor
from ..experiment import run
from ..metrics.summary import summarize
from ..hardware.batch_defaults import FORMER_DEFAULTS
from ..run_config import RunConfig

WORKLOADS = {"prompt-heavy": (4000, 400), "balanced": (1000, 1000), "decode-heavy": (200, 2000)}  # mean lengths
DEPLOYMENTS = {"colocated x2": (dict(replicas=2), 2), "1P1D": (dict(disaggregate="1P1D"), 2),
               "colocated x3": (dict(replicas=3), 3), "2P1D": (dict(disaggregate="2P1D"), 3)}
SLO_SETS = {"relaxed": "ttft_p90<=2s,tbt_p99<=100ms", "strict": "ttft_p90<=2s,tbt_p99<=50ms"}
BASE = dict(model="llama-3-8b", gpu="h100", scheduler="vllm-chunked", router="least-outstanding")
LENGTH_ROWS = 4000


def length_file(folder: Path, name: str, seed: int) -> str:
    """``name``'s lengths: prompt and output uniform within ±50% of the workload's means."""
    prompt, output = WORKLOADS[name]
    rng = np.random.default_rng([7, seed])
    path = folder / f"lengths-{name}.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["num_prefill_tokens", "num_decode_tokens"])
        for p, o in zip(rng.integers(prompt // 2, prompt * 3 // 2 + 1, LENGTH_ROWS),
                        rng.integers(output // 2, output * 3 // 2 + 1, LENGTH_ROWS)):
            w.writerow([int(p), int(o)])
    return str(path)


def config(name: str, lengths: str, deployment: str, rate: float, duration: float, seed: int) -> RunConfig:
    # the limits the figures were made with (vllm serve's on an H100 are 1024 sequences: hardware/batch_defaults.py)
    return RunConfig(**BASE, **FORMER_DEFAULTS, **DEPLOYMENTS[deployment][0], lengths=lengths, rate=rate,
                     duration=duration, seed=seed)


def reproduce(*, fast: bool = False, out: str = "reproduce-pd-crossover", duration: float = 120.0,
              seed: int = RunConfig.seed, jobs: int = 2, resolution: float = 0.05) -> dict:
    """Every workload x deployment: capacity per GPU, and the latencies at a common rate (module docstring)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    if fast:
        duration, resolution = 40.0, 0.15
    rows = []
    with make_executor("local", jobs=jobs) as executor:
        for name in WORKLOADS:
            lengths = length_file(folder, name, seed)
            bases = {d: config(name, lengths, d, 1.0, duration, seed) for d in DEPLOYMENTS}
            found = {k: find_capacities(bases, parse_slos(text), resolution, (seed,), executor)
                     for k, text in SLO_SETS.items()}
            common = 0.8 * (found["relaxed"]["colocated x2"].capacity or 0.0)
            for d, (_, gpus) in DEPLOYMENTS.items():
                row = {"workload": name, "mean_prompt": WORKLOADS[name][0], "mean_output": WORKLOADS[name][1],
                       "deployment": d, "gpus": gpus, "common_rate": common}
                for k in SLO_SETS:
                    cap = found[k][d].capacity
                    row[f"{k}_capacity_rps"] = cap
                    row[f"{k}_capacity_rps_per_gpu"] = cap / gpus if cap else None
                if common > 0:
                    s = summarize(run(config(name, lengths, d, common, duration, seed)))
                    row.update(ttft_p90_s=s["latency"]["ttft"]["p90"], tbt_p99_s=s["latency"]["tbt"]["p99"])
                rows.append(row)
                print(f"{name:13s} {d:13s} capacity a GPU: relaxed {_fmt(row['relaxed_capacity_rps_per_gpu'])}, "
                      f"strict {_fmt(row['strict_capacity_rps_per_gpu'])} req/s"
                      + (f"; at {common:.3g} req/s TTFT p90 {row['ttft_p90_s'] * 1e3:.0f} ms, TBT p99 "
                         f"{row['tbt_p99_s'] * 1e3:.0f} ms" if common > 0 else ""), flush=True)
    result = {"slos": SLO_SETS, "base": BASE, "duration_s": duration, "resolution": resolution, "rows": rows,
              "winner_per_gpu": {k: winners(rows, k) for k in SLO_SETS}}
    (folder / "results.json").write_text(json.dumps(result, indent=1))
    with open(folder / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=sorted({k for r in rows for k in r}))
        w.writeheader()
        w.writerows(rows)
    print(f"per-GPU capacity winner: {result['winner_per_gpu']}; wrote {folder}/results.json, results.csv")
    return result


def winners(rows: list[dict], slos: str) -> dict:
    """Per workload, the deployment with the most capacity a GPU under SLO set ``slos``."""
    best = {}
    for r in rows:
        v = r[f"{slos}_capacity_rps_per_gpu"] or 0.0
        if v > best.get(r["workload"], ("", -1.0))[1]:
            best[r["workload"]] = (r["deployment"], v)
    return {w: d for w, (d, _) in best.items()}


def _fmt(x) -> str:
    return "—" if x is None else f"{x:.3g}"

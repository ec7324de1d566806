"""docs/fidelity.md's "Client-side latencies" tables: every run the project holds replayed with validate-serving.

* engine-side: each engine log (requests.jsonl) against the engine-side figures, as before the client boundary;
* client-side: each run measured at a client (the H100 runs' client stamps, the CPU capture, the inference-perf
  stages), before (the engine-side prediction, all the project gave before, against the client's measurement) and
  after (the client-side replay through the run's front end).

Each row: the signed % error of TTFT P50, TPOT P50, E2E P50, output throughput and TTFT P90, and the median
|error| of each column. Prints markdown and writes the rows as JSON (``--out``).

    PYTHONPATH=$PWD python scripts/client_boundary_tables.py --out client-tables.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmsched.validate.serving import validate  # noqa: E402
from llmsched.validate.serving_run import load_runs  # noqa: E402

COLUMNS = (("ttft", "p50"), ("tpot", "p50"), ("e2e", "p50"), ("throughput", "output_tps"), ("ttft", "p90"))
SHARED = ROOT.parent / "shared" / "data" / "ground_truth"
ENGINE_RUNS = [(SHARED / n, "rtx-pro-6000") for n in ("rtxpro6000-llama-3.1-8b", "rtxpro6000-qwen3-32b-tp2",
                                                     "rtxpro6000-qwen3-30b-a3b-dp2-ep")] + \
    [(ROOT / "tests/data/gpu_runs" / n, None) for n in ("h200-llama-3.1-8b", "h200-qwen3-32b", "h200-qwen3-30b-a3b",
                                                       "h100-llama-3.1-8b", "h100-llama-3.1-8b-mooncake",
                                                       "h100-qwen3-30b-a3b-warm",
                                                       "h200-llama-3.1-8b-serve-sharegpt-8")]
CLIENT_RUNS = [(ROOT / "tests/data/gpu_runs" / n, None, {}) for n in ("h100-llama-3.1-8b", "h100-llama-3.1-8b-mooncake",
                                                                     "h100-qwen3-30b-a3b-warm",
                                                                     "h200-llama-3.1-8b-serve-sharegpt-8")] + \
    [(ROOT / "tests/data/inference_perf_h100", "h100", {})] + \
    [(ROOT / "tests/data/cpu_client_run" / r, "l4", {"batch_time": "linear"}) for r in ("rate-2", "rate-8")]


def cpu_params(folder: Path) -> dict:
    """The CPU capture's own step model (meta.json cpu_step_model): it prices the engine so the comparison is the
    front end's."""
    model = json.loads((folder / "meta.json").read_text())["cpu_step_model"]
    return {"const": model["const"], "per_token": model["per_token"]}


def cells(row: dict) -> list:
    return [row["errors"][m][s] for m, s in COLUMNS]


def line(name: str, values: list) -> str:
    return f"| {name} | " + " | ".join("–" if v is None else f"{v:+.1f}%" for v in values) + " |"


def medians(rows: list[list]) -> list:
    out = []
    for k in range(len(COLUMNS)):
        v = [abs(r[k]) for r in rows if r[k] is not None]
        out.append(float(np.median(v)) if v else None)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out")
    p.add_argument("--only", choices=("engine", "client"))
    args = p.parse_args(argv)
    head = "| run | TTFT P50 | TPOT P50 | E2E P50 | throughput | TTFT P90 |\n|---|---|---|---|---|---|"
    report = {"engine": [], "client": []}
    if args.only != "client":
        print("engine-side (engine logs against the engine-side figures)\n" + head)
        for folder, gpu in ENGINE_RUNS:
            run = load_runs(folder, None, "engine")[0]
            row = validate(run, gpu)
            report["engine"].append({"run": run.name, "errors": cells(row)})
            print(line(run.name, cells(row)), flush=True)
        print(line("median abs", medians([r["errors"] for r in report["engine"]])).replace("+", ""))
    if args.only != "engine":
        print("\nclient-side: before (engine-side prediction) -> after (client-side replay)\n" + head)
        for folder, gpu, extra in CLIENT_RUNS:
            params = cpu_params(folder) if extra.get("batch_time") == "linear" else None
            for run in load_runs(folder, None, "client"):
                kw = dict(gpu=gpu, batch_time=extra.get("batch_time", "vllm-v1"), batch_time_params=params)
                before, after = validate(run, simulated_at="engine", **kw), validate(run, **kw)
                report["client"].append({"run": run.name, "before": cells(before), "after": cells(after)})
                print(line(run.name + " before", cells(before)), flush=True)
                print(line(run.name + " after", cells(after)), flush=True)
        for side in ("before", "after"):
            print(line(f"median abs, {side}", medians([r[side] for r in report["client"]])).replace("+", ""))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

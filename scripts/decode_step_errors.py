"""Pure decode steps of a captured GPU run against the engine model's decode step, by batch size.

A capture's step log (``steps.csv`` of scripts/vllm_gpu_replay.py, ``steps.jsonl`` of scripts/client_capture.py)
has one row per engine step as the front end received its outputs. With async scheduling the engine runs steps
back to back while work remains, so the gap between two consecutive outputs is a step's time. A step with no
prompt tokens after a step with none is a pure decode step: its batch is its generated tokens, and its requests
are those between their first and last token at that moment (kept only where the two counts agree within one),
each with its prompt plus the share of its output produced by then as context. This prints the median real and
predicted step and the median signed error, overall and by batch size. Nothing is fitted: the model is
``vllm-v1`` with the run's own CUDA-graph sizes and limits, as validate-serving replays it.

    PYTHONPATH=$PWD python scripts/decode_step_errors.py tests/data/gpu_runs/h100-llama-3.1-8b --gpu h100
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

BUCKETS = ((1, 16), (16, 48), (48, 96), (96, 256), (256, 1025))


def step_log(run: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each step's output time, prompt tokens and generated tokens."""
    if (run / "steps.jsonl").exists():
        rows = [json.loads(line) for line in (run / "steps.jsonl").read_text().splitlines() if line.strip()]
        return tuple(np.array([float(r[k] or 0) for r in rows]) for k in ("t", "prompt_tokens", "generation_tokens"))
    rows = list(csv.DictReader(open(run / "steps.csv")))
    return tuple(np.array([float(r[k] or 0) for r in rows]) for k in ("t", "prompt_tokens", "generation_tokens"))


def decode_steps(run: Path, model) -> dict:
    t, prompt, generated = step_log(run)
    reqs = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines() if line.strip()]
    first = np.array([r["first_token_ts"] for r in reqs])
    last = np.array([r["last_token_ts"] for r in reqs])
    inputs = np.array([r["input_toks"] for r in reqs], dtype=float)
    outputs = np.array([r["output_toks"] for r in reqs], dtype=float)
    real, predicted, batch = [], [], []
    for i in range(2, len(t)):
        if prompt[i] or prompt[i - 1] or not generated[i]:
            continue
        active = (first <= t[i]) & (last >= t[i])
        if abs(int(active.sum()) - generated[i]) > 1:
            continue
        done = np.clip((t[i] - first[active]) / np.maximum(last[active] - first[active], 1e-9), 0, 1)
        context = int((inputs[active] + done * outputs[active]).sum())
        real.append(t[i] - t[i - 1])
        predicted.append(model.decode_sum_time(int(generated[i]), context))
        batch.append(generated[i])
    real, predicted, batch = map(np.array, (real, predicted, batch))
    if not len(real):
        raise SystemExit(f"{run}: no pure decode steps whose batch matches the requests in flight")
    error = predicted / real - 1
    rows = [{"batch": "all", "steps": len(real), "real_ms": np.median(real) * 1e3,
             "predicted_ms": np.median(predicted) * 1e3, "error_pct": np.median(error) * 100}]
    for lo, hi in BUCKETS:
        m = (batch >= lo) & (batch < hi)
        if m.sum() >= 5:
            rows.append({"batch": f"{lo}-{hi - 1}", "steps": int(m.sum()), "real_ms": np.median(real[m]) * 1e3,
                         "predicted_ms": np.median(predicted[m]) * 1e3, "error_pct": np.median(error[m]) * 100})
    return {"run": run.name, "rows": rows}


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from llmsched.batchtime.registry import make_batch_time_model
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", type=Path, help="captured run folders (requests.jsonl, steps, meta.json)")
    p.add_argument("--gpu", required=True, help="the GPU preset the runs ran on")
    args = p.parse_args(argv)
    print("| run | batch | steps | real (ms) | predicted (ms) | error |\n|---|---|---|---|---|---|")
    for run in args.runs:
        meta = json.loads((run / "meta.json").read_text())
        seen, kwargs = meta["engine_defaults_seen"], meta["engine_kwargs"]
        model = make_batch_time_model("vllm-v1", str(run / "config.json"), args.gpu,
                                      capture_sizes=seen["cudagraph_capture_sizes"],
                                      max_num_seqs=kwargs["max_num_seqs"],
                                      max_num_batched_tokens=kwargs["max_num_batched_tokens"])
        for row in decode_steps(run, model)["rows"]:
            print(f"| {run.name} | {row['batch']} | {row['steps']} | {row['real_ms']:.2f} | {row['predicted_ms']:.2f} "
                  f"| {row['error_pct']:+.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

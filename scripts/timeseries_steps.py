"""Single-step times read from a real run's timeseries.csv, against the roofline's.

A shared ground-truth run (../shared/data/ground_truth) logs, once a second, the prompt and generated tokens and
the running requests. In a second with no prompt tokens every running request decodes once a step, so a decode
step lasts ``running / generated`` seconds; its batch is the requests between their first and last token at the
second's middle, each with its prompt plus the share of its output produced by then as context. This prints, per
run, each such second's real and predicted decode step (the roofline without host terms: the GPU's work) and the
median error, and the saturated prefill rate (seconds with 8 or more waiting requests and seats free) against a 2,048-token chunk's
predicted time. Used by docs/fidelity.md; nothing here is fitted.

    python scripts/timeseries_steps.py ../shared/data/ground_truth/rtxpro6000-qwen3-32b-tp2 --gpu rtx-pro-6000
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from llmsched.batchtime.registry import make_batch_time_model
from llmsched.hardware.models import model


def decode_seconds(folder: Path):
    reqs = [json.loads(line) for line in (folder / "requests.jsonl").read_text().splitlines() if line.strip()]
    start = min(r["queued_ts"] for r in reqs)
    for row in csv.DictReader((folder / "timeseries.csv").open()):
        running, generated = int(row["running"]), float(row["gen_throughput"])
        if float(row["prompt_throughput"]) or running < 8 or not generated:
            continue
        at = start + float(row["t"]) - 0.5
        contexts = [r["input_toks"] + 1 + (at - r["first_token_ts"]) / max(r["last_token_ts"] - r["first_token_ts"],
                                                                           1e-9) * (r["output_toks"] - 1)
                    for r in reqs if r["first_token_ts"] <= at <= r["last_token_ts"]]
        yield float(row["t"]), running / generated, contexts


SATURATED = 8  # waiting requests: the engine fills every step's token budget


def prefill_rate(folder: Path, max_num_seqs: int) -> float | None:
    """Tokens a second while requests wait with seats free: every step then fills its token budget."""
    rows = [r for r in csv.DictReader((folder / "timeseries.csv").open())
            if int(r["waiting"]) >= SATURATED and int(r["running"]) < max_num_seqs - SATURATED]
    if not rows:
        return None
    return float(np.mean([float(r["prompt_throughput"]) + float(r["gen_throughput"]) for r in rows[:10]]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--gpu", required=True)
    args = p.parse_args()
    for folder in args.runs:
        meta = json.loads((folder / "meta.json").read_text())["engine_kwargs"]
        if meta.get("data_parallel_size", 1) > 1:
            print(f"{folder.name}: data-parallel ranks share the timeseries; one rank's steps cannot be read off it")
            continue
        spec = model(str(folder / "config.json")).with_tp(meta["tensor_parallel_size"])
        bt = make_batch_time_model("roofline", spec, args.gpu, step_overhead=0.0)
        errors = []
        for t, real, contexts in decode_seconds(folder):
            predicted = bt.decode_sum_time(len(contexts), int(sum(contexts)))
            errors.append(predicted / real - 1)
            print(f"{folder.name} t={t:.0f}s decodes {len(contexts)} mean context {np.mean(contexts):.0f}: real "
                  f"{real * 1e3:.1f} ms, predicted {predicted * 1e3:.1f} ms")
        if errors:
            print(f"{folder.name}: {len(errors)} decode-only seconds, median error {np.median(errors) * 100:+.1f}%")
        rate = prefill_rate(folder, meta["max_num_seqs"])
        if rate:
            print(f"{folder.name}: saturated (its first 10 seconds with 8+ waiting) {rate:.0f} tokens/s = "
                  f"{2048 / rate * 1e3:.0f} ms a 2,048-token step; predicted {bt.prefill_time(2048) * 1e3:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Every real run the project holds, replayed two ways, with the error of each against what vLLM measured:

* ``validate-serving RUN`` (its engine arguments, vLLM v1's scheduler and engine terms, vLLM's KV cache);
* ``simulate --trace RUN/requests.jsonl --model RUN/config.json --gpu GPU --scheduler vllm-chunked`` with the
  run's engine arguments (``--max-num-seqs``, ``--max-num-batched-tokens`` and the token budget, ``--block-size``,
  ``--tp``, ``--dp``, ``--expert-parallel``) and every other setting at its default (the batch-time model, the KV
  cache's size, the GPU memory share): what a user who replays the log with its engine's limits gets.

    python scripts/replay_errors.py [--json OUT.json] [--batch-time KIND] [RUN ...]

Prints one markdown table a replay (TTFT, TPOT and E2E P50, output throughput; signed % error against the run's
own engine-side figures) and the median |error| over the runs. Run it from a checkout of another commit
(``PYTHONPATH=OTHER python scripts/replay_errors.py``) for that commit's figures: it uses only functions that
predate it.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = (ROOT / ".." / "shared" / "data" / "ground_truth").resolve()
RUNS = [SHARED / "rtxpro6000-llama-3.1-8b", SHARED / "rtxpro6000-qwen3-32b-tp2",
        SHARED / "rtxpro6000-qwen3-30b-a3b-dp2-ep"] + \
    [ROOT / "tests" / "data" / "gpu_runs" / name for name in
     ("h200-llama-3.1-8b", "h200-qwen3-32b", "h200-qwen3-30b-a3b", "h100-llama-3.1-8b", "h100-llama-3.1-8b-mooncake",
      "h100-qwen3-30b-a3b-warm")]
GPU_OF = {"rtxpro6000": "rtx-pro-6000"}       # the shared runs' meta.json names no GPU
CELLS = (("ttft", "p50"), ("tpot", "p50"), ("e2e", "p50"), ("throughput", "output_tps"))


def gpu_for(folder: Path) -> str | None:
    prefix = folder.name.split("-")[0]
    return GPU_OF.get(prefix)


def validate_serving(folder: Path, batch_time: str | None) -> dict:
    from llmsched.validate.serving import validate
    from llmsched.validate.serving_run import load_run
    run = load_run(folder)
    row = validate(run, gpu_for(folder), **({"batch_time": batch_time} if batch_time else {}))
    return {"errors": row["errors"], "num_blocks": row["num_blocks"]}


def simulate_trace(folder: Path, batch_time: str | None) -> dict:
    from llmsched.experiment import run as run_config
    from llmsched.run_config import RunConfig
    from llmsched.validate.serving import errors, measured, simulated
    from llmsched.validate.serving_run import gpu_of, load_run
    run = load_run(folder)
    args = run.args
    cfg = RunConfig(trace=str(run.log.path), rate=None, model=str(folder / "config.json"),
                    gpu=gpu_of(run, gpu_for(folder)), tp=args.tensor_parallel_size, dp=args.data_parallel_size,
                    expert_parallel=args.enable_expert_parallel, scheduler="vllm-chunked",
                    scheduler_params={"token_budget": args.max_num_batched_tokens}, max_num_seqs=args.max_num_seqs,
                    max_num_batched_tokens=args.max_num_batched_tokens, block_size=args.block_size,
                    **({"batch_time": batch_time} if batch_time else {}))
    result = run_config(cfg)
    try:
        sim = simulated(result, with_itl=False)
    except ValueError as e:           # requests left unfinished: the replay cannot be compared
        return {"errors": None, "num_blocks": result.meta["kv_blocks"], "note": str(e)}
    return {"errors": errors(measured(run), sim), "num_blocks": result.meta["kv_blocks"],
            "batch_time": result.meta["batch_time"]["name"], "scheduler": cfg.scheduler}


def table(rows: dict, title: str) -> str:
    lines = [f"### {title}", "", "| run | KV blocks | TTFT P50 | TPOT P50 | E2E P50 | throughput |", "|---|---|---|---|---|---|"]
    cols = {cell: [] for cell in CELLS}
    for name, row in rows.items():
        if row["errors"] is None:
            lines.append(f"| {name} | {row['num_blocks']:,} | {row.get('note', 'no comparison')} | | | |")
            continue
        cells = []
        for metric, stat in CELLS:
            value = row["errors"][metric][stat]
            cols[(metric, stat)].append(abs(value))
            cells.append(f"{value:+.1f}%")
        lines.append(f"| {name} | {row['num_blocks']:,} | " + " | ".join(cells) + " |")
    medians = [f"{statistics.median(v):.1f}%" if v else "-" for v in cols.values()]
    lines.append("| median \\|error\\| | | " + " | ".join(medians) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path, help="run folders (default: every run the project holds)")
    p.add_argument("--json", type=Path, help="write the errors here too")
    p.add_argument("--batch-time", help="a batch-time kind or profile for both replays (default: each one's own)")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    out = {"validate-serving": {}, "simulate --trace": {}}
    for folder in args.runs or RUNS:
        folder = folder.resolve()
        out["validate-serving"][folder.name] = validate_serving(folder, args.batch_time)
        out["simulate --trace"][folder.name] = simulate_trace(folder, args.batch_time)
        print(f"done {folder.name}", file=sys.stderr, flush=True)
    for kind, rows in out.items():
        print(table(rows, kind))
        print()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

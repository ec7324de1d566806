"""docs/fidelity.md's "Which model runner sizes the KV cache" tables: vLLM's KV formula (hardware/vllm_memory.py)
against the blocks vLLM allocated in each GPU run, and what it gives at vLLM's serve defaults.

With ``--before COMMIT`` each table has a column from that commit's ``vllm_memory.py`` too (read with ``git show``),
so a change to the formula shows its before and after side by side.

    PYTHONPATH=$PWD python scripts/kv_budget_table.py [--before 64a8b84]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmsched.batchtime.vllm_v1 import cudagraph_capture_sizes  # noqa: E402
from llmsched.hardware import vllm_memory  # noqa: E402
from llmsched.hardware.batch_defaults import vllm_batch_defaults  # noqa: E402
from llmsched.hardware.gpus import gpu  # noqa: E402
from llmsched.hardware.kv_sizing import run_memory  # noqa: E402
from llmsched.hardware.models import model  # noqa: E402

RUNS = sorted((ROOT / "tests" / "data" / "gpu_runs").glob("*/meta.json"))
DEFAULTS = (("llama-3.1-8b", "h100", 1), ("llama-3.1-8b", "h200", 1), ("llama-3.1-8b", "a100", 1),
            ("llama-3.1-8b", "l40s", 1), ("qwen3-32b", "h100", 1), ("llama-3.1-70b", "h100", 4),
            ("qwen3-30b-a3b", "h100", 1), ("llama-3.1-8b", "rtx-4090", 1))


def module_at(commit: str):
    """``hardware/vllm_memory.py`` as it was at ``commit``, imported beside today's package."""
    text = subprocess.run(["git", "show", f"{commit}:llmsched/hardware/vllm_memory.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "vllm_memory_before.py"
    path.write_text(text.replace("from .gpus", "from llmsched.hardware.gpus")
                    .replace("from .models", "from llmsched.hardware.models"))
    spec = importlib.util.spec_from_file_location("vllm_memory_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def run_blocks(memory_module, meta_path: Path, measured: bool) -> tuple[int, int]:
    """(blocks by the formula, blocks vLLM allocated) for one run; ``measured``: with vLLM's reported terms."""
    meta = json.loads(meta_path.read_text())
    memory = run_memory(meta, meta_path, cudagraph_capture_sizes)
    terms = {k: meta["memory_gib"][k] for k in ("weights", "non_torch", "peak_activation")} if measured else None
    budget = memory_module.vllm_kv_budget(
        model(meta["engine_kwargs"]["model"]), gpu(meta_path.parent.name.split("-")[0]),
        max_num_batched_tokens=memory.limits.max_num_batched_tokens, max_num_seqs=memory.limits.max_num_seqs,
        gpu_memory_utilization=memory.limits.gpu_memory_utilization, vllm_version=memory.vllm_version,
        capture_sizes=memory.limits.capture_sizes, measured=terms)
    return budget.blocks, memory.blocks


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--before", help="a commit whose vllm_memory.py gives a before column")
    args = p.parse_args(argv)
    sides = ([("before", module_at(args.before))] if args.before else []) + [("now", vllm_memory)]
    names = " | ".join([f"estimated, {s}" for s, _ in sides] + [f"measured terms, {s}" for s, _ in sides])
    print(f"| run | {names} |\n|---|" + "---|" * (2 * len(sides)))
    for meta in RUNS:
        cells = []
        for measured in (False, True):
            for _, module in sides:
                ours, reported = run_blocks(module, meta, measured)
                cells.append(f"{100 * (ours / reported - 1):+.2f}%")
        print(f"| {meta.parent.name} | " + " | ".join(cells) + " |")
    print("\n| model | GPU | TP | limits | " + " | ".join(f"peak {s} (GiB) | blocks {s}" for s, _ in sides) + " |")
    print("|---|---|---|---|" + "---|---|" * len(sides))
    for name, card, tp in DEFAULTS:
        spec = model(name).with_parallel(tp=tp) if tp > 1 else model(name)
        limits = vllm_batch_defaults(card)
        kw = dict(max_num_batched_tokens=limits.max_num_batched_tokens, max_num_seqs=limits.max_num_seqs,
                  capture_sizes=len(cudagraph_capture_sizes(limits.max_num_seqs, limits.max_num_batched_tokens)))
        cells = []
        for _, module in sides:
            budget = module.vllm_kv_budget(spec, card, **kw)
            cells += [f"{budget.activation_peak / (1 << 30):.2f}", f"{budget.blocks:,}"]
        print(f"| {name} | {card} | {tp} | {limits.max_num_batched_tokens} / {limits.max_num_seqs} | "
              + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

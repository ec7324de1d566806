"""Measured step times in the formats they are published in, as points a batch-time model can predict.

Three formats, told apart by their header:

* **Splitwise** (``perf_model.csv`` of Mutinifni/splitwise-sim; Patel et al., ISCA 2024): whole-model timings on
  DGX-A100/DGX-H100, five repeats per (model, hardware, tensor_parallel, prompt_size, batch_size, token_size).
  Each shape gives a *prefill* point (``prompt_time``: ``batch_size`` prompts of ``prompt_size`` tokens in one
  step) and a *decode* point (``token_time``: the mean iteration of ``batch_size`` decodes over the generation,
  whose contexts run from prompt+1 to prompt+token_size; the step time is linear in the context, so the mean
  iteration is the iteration at the mean context). Repeats are reduced to their median.
* **Vidur** per-operator ``mlp.csv``: per-layer non-attention seconds per (num_tokens, tp) (*layer* points).
* **steps.csv** of ``llmsched profile`` / ``llmsched vllm run`` (real vLLM steps): one point per step; the model
  and GPU are not in the file and must be named. A step's composition is rebuilt from its columns: prefill
  chunks share ``prefill_tokens`` equally; cached context (``context_sum`` minus the new tokens) goes to the
  decodes when there are any, else to the chunks (exact for decode-only steps, an approximation for mixed ones).

Points that cannot be real are excluded with a reason, never silently: a Splitwise shape whose prefill is
faster than its linear layers' FLOPs at the GPU's *peak* rate (two TP-2 shapes at batch 64, where the batch
evidently did not run whole), and the power-capped H100 rows (no preset models a power cap).
"""
from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..batchtime.base import Batch
from ..hardware.gpus import gpu as gpu_preset
from ..hardware.models import model as model_preset
from ..user_files import csv_number

SPLITWISE_FILE = "Splitwise perf_model.csv"
SPLITWISE_COLUMNS = ("model", "hardware", "prompt_size", "batch_size", "token_size", "prompt_time", "token_time",
                     "tensor_parallel")
STEPS_COLUMNS = ("duration", "prefill_tokens", "num_prefills", "num_decodes", "context_sum")
SPLITWISE_MODELS = {"llama2-70b": "llama-2-70b", "bloom-176b": "bloom-176b"}
SPLITWISE_GPUS = {"a100-80gb": "a100", "h100-80gb": "h100"}


@dataclass(frozen=True)
class Point:
    """One measurement: ``phase`` is prefill, decode or layer; ``measured`` in seconds."""

    dataset: str
    model: str          # preset name at tp=1
    gpu: str
    tp: int
    phase: str
    measured: float
    shape: str
    batch: Batch | None = None     # prefill/decode steps
    tokens: int = 0                # layer points

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.dataset, self.model, self.gpu, self.tp)


@dataclass
class DataSet:
    name: str
    path: Path
    points: list[Point] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)


def load(path: str | Path, model: str | None = None, gpu: str | None = None) -> DataSet:
    """Read ``path`` (Splitwise, Vidur mlp.csv, or steps.csv: ``model`` and ``gpu`` name the hardware of a
    steps.csv)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--data {path}: no such file")
    with path.open(newline="") as f:
        header = next(csv.reader(f), [])
    columns = set(header)
    if set(SPLITWISE_COLUMNS) <= columns:
        return load_splitwise(path)
    if any(c.startswith("time_stats.") for c in columns) and "num_tokens" in columns:
        return load_vidur(path)
    if set(STEPS_COLUMNS) <= columns:
        if not model or not gpu:
            raise ValueError(f"--data {path}: a steps.csv does not say its model and GPU; pass --model and --gpu "
                             f"(presets, e.g. --model llama-3-8b --gpu a100)")
        return load_steps(path, model, gpu)
    raise ValueError(f"--data {path}: not a Splitwise perf_model.csv, a Vidur mlp.csv or a steps.csv (columns "
                     f"{', '.join(header[:6])}...)")


def load_splitwise(path: Path) -> DataSet:
    data = DataSet("splitwise", path)
    groups: dict[tuple, list[dict]] = {}
    with path.open(newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            sizes = [csv_number(path, line, row, c, int, True, SPLITWISE_FILE)
                     for c in ("tensor_parallel", "prompt_size", "batch_size", "token_size")]
            for column in ("prompt_time", "token_time"):
                csv_number(path, line, row, column, float, True, SPLITWISE_FILE)
            key = (row["model"], row["hardware"], *sizes)
            groups.setdefault(key, []).append(row)
    skipped: dict[str, int] = {}
    for (name, hardware, tp, prompt, batch, generated), rows in sorted(groups.items()):
        if name not in SPLITWISE_MODELS or hardware not in SPLITWISE_GPUS:
            skipped[f"{name} on {hardware}"] = skipped.get(f"{name} on {hardware}", 0) + 1
            continue
        spec, device = model_preset(SPLITWISE_MODELS[name]), gpu_preset(SPLITWISE_GPUS[hardware])
        prefill = statistics.median(float(r["prompt_time"]) for r in rows) / 1e3
        decode = statistics.median(float(r["token_time"]) for r in rows) / 1e3
        shape = f"prompt {prompt} × batch {batch}, {generated} generated"
        floor = 2 * spec.layers * spec.layer_linear_params * prompt * batch / tp / device.flops
        if prefill < floor:
            data.excluded.append(f"{name} {hardware} tp{tp} {shape}: prefill {prefill * 1e3:.0f} ms is below the "
                                 f"{floor * 1e3:.0f} ms its linear layers need at peak FLOP/s")
            continue
        common = dict(dataset="splitwise", model=spec.name, gpu=device.name, tp=tp, shape=shape)
        data.points.append(Point(**common, phase="prefill", measured=prefill, batch=Batch([prompt] * batch,
                                                                                          [0] * batch, [])))
        mean_ctx = prompt + (generated + 1) // 2
        data.points.append(Point(**common, phase="decode", measured=decode, batch=Batch([], [], [mean_ctx] * batch)))
    for what, n in sorted(skipped.items()):
        reason = "power-capped: no preset models a power cap" if "pcap" in what else "no preset"
        data.excluded.append(f"{what}: {n} shapes ({reason})")
    return data



def load_vidur(path: Path) -> DataSet:
    from ..batchtime.profiled import load_vidur_profile

    profile = load_vidur_profile(path)
    data = DataSet("vidur", path)
    for tokens, tp, seconds in zip(profile.num_tokens, profile.tp, profile.seconds):
        data.points.append(Point("vidur", profile.model.name, profile.gpu.name, int(tp), "layer", float(seconds),
                                 f"{int(tokens)} tokens", tokens=int(tokens)))
    return data


def load_steps(path: Path, model: str, gpu: str) -> DataSet:
    spec, device = model_preset(model), gpu_preset(gpu)
    data = DataSet("steps", path)
    with path.open(newline="") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            try:
                duration = float(row["duration"])
                tokens, prefills = int(row["prefill_tokens"]), int(row["num_prefills"])
                decodes, context = int(row["num_decodes"]), int(row["context_sum"])
            except (TypeError, ValueError):
                raise ValueError(f"{path} line {i}: duration, prefill_tokens, num_prefills, num_decodes and "
                                 f"context_sum must be numbers") from None
            if not math.isfinite(duration) or min(tokens, prefills, decodes, context) < 0:
                raise ValueError(f"{path} line {i}: duration {row['duration']}, prefill_tokens {tokens}, num_prefills "
                                 f"{prefills}, num_decodes {decodes}, context_sum {context}: the duration must be "
                                 f"finite and the counts >= 0")
            if duration <= 0 or (prefills == 0 and decodes == 0):
                data.excluded.append(f"line {i}: empty step or non-positive duration")
                continue
            batch = _rebuild(tokens, prefills, decodes, context)
            phase = "decode" if prefills == 0 else ("prefill" if decodes == 0 else "mixed")
            data.points.append(Point("steps", spec.base_name, device.name, spec.tp, phase, duration,
                                     f"{prefills} prefills ({tokens} tokens), {decodes} decodes, Σctx {context}",
                                     batch=batch))
    return data


def _rebuild(tokens: int, prefills: int, decodes: int, context: int) -> Batch:
    chunks = [tokens // prefills + (1 if i < tokens % prefills else 0) for i in range(prefills)] if prefills else []
    cached = max(0, context - tokens - decodes)
    if decodes:
        share = [cached // decodes + (1 if i < cached % decodes else 0) for i in range(decodes)]
        return Batch(chunks, [0] * prefills, [1 + s for s in share])
    return Batch(chunks, [cached // prefills] * prefills, [])

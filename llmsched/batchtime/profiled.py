"""Vidur's per-operator GPU profiles: read them, compare the roofline with them, fit its efficiencies.

A profile file (``vidur_<gpu>_<org>_<model>_mlp.csv``, Vidur's ``data/profiling/compute/<gpu>/<model>/mlp.csv``)
has one row per (num_tokens, num_tensor_parallel_workers) with ``time_stats.<op>.{min,max,mean,median,std}``
in milliseconds for the non-attention operators of one layer, plus the model's dimensions. The time of one
layer is the sum of the nine per-layer operators (:data:`LAYER_OPS`; the embedding runs once per model, not
per layer, and is left out, as InferMax does, Kim et al. §2.3). The roofline's counterpart is
:meth:`RooflineBatchTime.layer_nonattention_time`. No profile data is stored in the repository: the script
``scripts/calibrate_profiles.py`` reads the files the user names and writes only the fitted figures.
"""
from __future__ import annotations

import csv
import itertools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..hardware.gpus import GPUSpec, gpu as _gpu
from ..hardware.models import MODELS, ModelSpec
from ..user_files import csv_number
from .base import BatchTimeModel
from .roofline import RooflineBatchTime

LAYER_OPS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj", "post_attention_layernorm",
             "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
SHAPE_COLUMNS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size", "use_gated_mlp",
                 "num_tokens", "num_tensor_parallel_workers")

# Bari et al. Fig. 6a ([R] agrimUT/SLAI scripts/plot1_results.csv): Mistral-7B-Instruct-v0.2
# on one RTX 6000 Ada, Sarathi with one 2048-token prompt processed in chunks of c; mean batch time (ms) over the
# chunks, every batch prefill-only with the context growing chunk by chunk.
FIG6A_MISTRAL_RTX6000ADA = ((64, 22.72), (128, 24.07), (256, 28.82), (384, 37.80), (512, 46.51), (768, 57.08),
                            (1024, 74.69))


@dataclass(frozen=True)
class VidurProfile:
    """One profile file: per-layer non-attention seconds (sum of the operators' ``statistic``) per row."""

    path: Path
    gpu: GPUSpec
    model: ModelSpec                 # tp=1; rows with tp > 1 are compared with ``model.with_tp(tp)``
    num_tokens: np.ndarray
    tp: np.ndarray
    seconds: np.ndarray

    @property
    def label(self) -> str:
        return self.path.name


def load_vidur_profile(path: str | Path, gpu: str | GPUSpec | None = None,
                       statistic: str = "median") -> VidurProfile:
    """Read a Vidur ``mlp.csv`` profile. The GPU comes from ``gpu`` or from a ``vidur_<gpu>_`` file name."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"profile file {path} not found")
    if gpu is None:
        match = re.match(r"vidur_([a-z0-9-]+?)_", path.name.lower())
        if not match:
            raise ValueError(f"cannot tell the GPU of {path.name}: name it vidur_<gpu>_... or pass gpu=")
        gpu = match.group(1)
    device = _gpu(gpu)
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        columns = set(reader.fieldnames or ())
        wanted = [f"time_stats.{op}.{statistic}" for op in LAYER_OPS]
        missing = [c for c in (*SHAPE_COLUMNS, *wanted) if c not in columns]
        if missing:
            raise ValueError(f"{path.name} is not a Vidur mlp profile: missing columns {', '.join(missing)}")
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path.name} has no rows")
    first = rows[0]
    shape = {k: first[k] for k in SHAPE_COLUMNS[:6]}
    spec = _model_from_shape(shape, path.name)

    def cell(line: int, row: dict, column: str, kind):
        return csv_number(path, line, row, column, kind, False, "Vidur mlp.csv")

    tokens = np.array([cell(i, r, "num_tokens", int) for i, r in enumerate(rows, 2)])
    tp = np.array([cell(i, r, "num_tensor_parallel_workers", int) for i, r in enumerate(rows, 2)])
    seconds = np.array([sum(cell(i, r, c, float) for c in wanted) for i, r in enumerate(rows, 2)]) / 1e3
    return VidurProfile(path, device, spec, tokens, tp, seconds)


def _model_from_shape(shape: dict, label: str) -> ModelSpec:
    hidden, heads = int(shape["n_embd"]), int(shape["n_head"])
    kv_heads, ffn = int(shape["n_kv_head"]), int(shape["n_expanded_embd"])
    gated = str(shape["use_gated_mlp"]).strip().lower() in ("true", "1")
    for spec in MODELS.values():
        if spec.tp == 1 and (spec.hidden, spec.heads, spec.kv_heads, spec.ffn, spec.gated_mlp) == \
                (hidden, heads, kv_heads, ffn, gated):
            return spec
    vocab = int(shape["vocab_size"])
    layer = ModelSpec(name=f"profile:{label}", layers=1, hidden=hidden, heads=heads, kv_heads=kv_heads,
                      head_dim=hidden // heads, ffn=ffn, vocab=vocab, params=1, max_model_len=4096,
                      gated_mlp=gated, source=f"shape columns of {label}")
    return replace(layer, params=layer.shape_params)


def chunked_prefill_mean_time(model: BatchTimeModel, prompt: int, chunk: int) -> float:
    """Mean step time of prefilling ``prompt`` tokens alone in chunks of ``chunk`` (the last one shorter)."""
    times, done = [], 0
    while done < prompt:
        c = min(chunk, prompt - done)
        times.append(model.prefill_time(c, done))
        done += c
    return sum(times) / len(times)


def _components(profile: VidurProfile, staircase: bool, sharpness: float) -> list[tuple[np.ndarray, ...]]:
    """Per tp group: (row indices, GEMM compute s, GEMM memory s, element-wise s) at unit efficiencies."""
    groups = []
    for tp in np.unique(profile.tp):
        idx = np.flatnonzero(profile.tp == tp)
        unit = RooflineBatchTime(profile.model.with_tp(int(tp)), profile.gpu, compute_eff=1.0, mem_eff=1.0,
                                 layer_overhead=0.0, staircase=staircase, sharpness=sharpness, calibration="off")
        groups.append((idx, *unit.layer_components(profile.num_tokens[idx])))
    return groups


def predict(profile: VidurProfile, compute_eff: float, mem_eff: float, layer_overhead: float = 0.0,
            staircase: bool = False, sharpness: float = 2.0) -> np.ndarray:
    """The roofline's per-layer non-attention seconds for every row of ``profile``."""
    return _predict_from(_components(profile, staircase, sharpness), len(profile.seconds), compute_eff, mem_eff,
                         layer_overhead, sharpness)


def _predict_from(groups, n: int, compute_eff: float, mem_eff: float, layer_overhead: float,
                  sharpness: float) -> np.ndarray:
    out = np.empty(n)
    for idx, compute, memory, elementwise in groups:
        a, b = compute / compute_eff, memory / mem_eff
        linear = np.maximum(a, b) if math.isinf(sharpness) else (a ** sharpness + b ** sharpness) ** (1 / sharpness)
        out[idx] = linear + elementwise / mem_eff + layer_overhead
    return out


def error_stats(predicted: np.ndarray, measured: np.ndarray) -> dict:
    """Median, mean and max absolute % error, and the signed median % error (bias)."""
    pct = 100.0 * (predicted - measured) / measured
    return {"rows": int(len(pct)), "median_abs_pct": float(np.median(np.abs(pct))),
            "mean_abs_pct": float(np.mean(np.abs(pct))), "max_abs_pct": float(np.max(np.abs(pct))),
            "median_pct": float(np.median(pct))}


def profile_errors(profile: VidurProfile, per_tp: bool = True, **params) -> list[dict]:
    """Error rows of the roofline (``params`` as for :func:`predict`) against one profile: all rows, then one
    row per tensor-parallel degree."""
    predicted = predict(profile, **params)
    rows = [{"file": profile.label, "tp": "all", **error_stats(predicted, profile.seconds)}]
    if per_tp:
        for tp in np.unique(profile.tp):
            mask = profile.tp == tp
            rows.append({"file": profile.label, "tp": int(tp), **error_stats(predicted[mask], profile.seconds[mask])})
    return rows


def fit_efficiencies(profiles: list[VidurProfile], staircase: bool = False, sharpness: float = 2.0,
                     fit_layer_overhead: bool = True) -> dict:
    """Fit ``compute_eff``, ``mem_eff`` (and ``layer_overhead``) to the rows of ``profiles`` (one GPU).

    Method: minimise the mean squared log ratio log(predicted/measured) over all rows (a relative error, so
    the 1-token rows weigh as much as the 32k-token rows): a grid search over compute_eff, mem_eff in
    [0.2, 1] (step 0.05) and layer_overhead in [0, 40] µs (step 5 µs), then Nelder–Mead from the best grid
    point (restarted twice). Deterministic; no SciPy needed.
    """
    if not profiles:
        raise ValueError("fit_efficiencies needs at least one profile")
    gpus = {p.gpu.name for p in profiles}
    if len(gpus) > 1:
        raise ValueError(f"fit one GPU at a time; got profiles of {', '.join(sorted(gpus))}")
    prepared = [(_components(p, staircase, sharpness), len(p.seconds), np.log(p.seconds)) for p in profiles]

    def loss(x: tuple[float, float, float]) -> float:
        ce, me, lo = x
        if not (0 < ce <= 1 and 0 < me <= 1 and lo >= 0):
            return math.inf
        total, count = 0.0, 0
        for groups, n, log_measured in prepared:
            r = np.log(_predict_from(groups, n, ce, me, lo, sharpness)) - log_measured
            total += float(r @ r)
            count += n
        return total / count

    effs = np.arange(0.2, 1.0001, 0.05)
    overheads = np.arange(0, 41e-6, 5e-6) if fit_layer_overhead else [0.0]
    start = min(itertools.product(effs, effs, overheads), key=loss)

    def params(z) -> tuple[float, float, float]:                       # layer_overhead in units of 100 µs
        return float(z[0]), float(z[1]), float(z[2]) * 1e-4 if fit_layer_overhead else 0.0

    z = np.array([start[0], start[1], start[2] / 1e-4][:3 if fit_layer_overhead else 2])
    for _ in range(3):                                                  # restarts shake off a collapsed simplex
        z = nelder_mead(lambda v: loss(params(v)), z, 0.05)
    best = params(z)
    best_loss = loss(best)
    ce, me, lo = best
    return {"compute_eff": round(ce, 4), "mem_eff": round(me, 4), "layer_overhead": round(lo, 9),
            "sharpness": sharpness, "rms_log_error": round(math.sqrt(best_loss), 5)}


def nelder_mead(f, x0: np.ndarray, step: float, tol: float = 1e-10, max_iter: int = 2000) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (standard reflection/expansion/contraction/shrink coefficients)."""
    n = len(x0)
    simplex = [np.asarray(x0, dtype=float)] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(max_iter):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if abs(values[-1] - values[0]) <= tol * (abs(values[0]) + tol) and \
                max(np.abs(x - simplex[0]).max() for x in simplex[1:]) < 1e-7:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex[1:]]
                values = [values[0]] + [f(x) for x in simplex[1:]]
    return simplex[int(np.argmin(values))]

"""Table 1's step times from measurements: vLLM 0.6.3 on an A100 PCIe (Mohanty et al. §4.1), operator by
operator.

The paper fits (c_p, t_p, c_d, t_d) to the step times of its own engine (§4.3–4.4, Figs 2–3) and does not
publish them. This model rebuilds those step times from public measurements, never from Table 1:

* **Non-attention layer work** (QKV/output projections, rotary, norms, MLP, residual add): Vidur's per-operator
  profile of Llama-3-8B on an A100 80GB (``../shared/data/profiles/vidur_a100_meta-llama_Meta-Llama-3-8B_mlp.csv``,
  the median of each operator per token count, tensor parallelism 1), linearly interpolated in the number of
  tokens. For another model of the same layer family (Granite-3.1-8B: same hidden size, heads and KV heads,
  intermediate 12,800 instead of 14,336) the three MLP operators are scaled by the ratio of intermediate sizes and
  the projections by the ratio of their widths (a GEMM's time is proportional to its width in both the
  compute- and the memory-bound regime).
* **Attention and LM head** (no public profile): the foundation's roofline terms (``RooflineBatchTime``; prefill
  attention causal FlashAttention FLOPs at ``attn_compute_eff``, FlashAttention-2 reaches 50–73% of the A100's
  peak in its forward pass, Dao 2023 §4.1; decode attention reads the KV cache at the profile-fitted memory
  efficiency; the LM head for one row per sequence), evaluated on the paper's GPU (A100 PCIe, 1,935 GB/s).
* **vLLM's per-step host cost** (scheduling, input preparation, sampling, output processing: serial with the GPU
  in vLLM 0.6.x without multi-step scheduling): ``host_step + host_per_seq · sequences``. Public figures for
  vLLM of that generation on one GPU: a 4 ms GPU bubble per decode step (vLLM RFC #6854, "Multi-Step
  Scheduling", 2024-07: "each highlighted redbox is about 4ms of GPU bubble", 5–13 ms overall) and about 20 ms
  of sampling + input preparation + output processing + scheduling at a batch of 200 (vLLM issue #6801,
  "Performance Roadmap", 2024-08). An affine cost through both points: 4 ms + 0.08 ms per sequence.
  ``host_scale`` scales both (vLLM 0.6's asynchronous output processing hides part of it; the sensitivity
  sweep varies it).

The roofline's generic ``step_overhead`` is replaced by the host cost above; nothing else of it is used.
"""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...batchtime.base import Batch, BatchTimeModel
from ...batchtime.profiled import LAYER_OPS
from ...batchtime.roofline import RooflineBatchTime
from ...hardware.models import ModelSpec, model as model_preset

PROFILE = "vidur_a100_meta-llama_Meta-Llama-3-8B_mlp.csv"
PROFILE_MODEL = "llama-3-8b"
HOST_STEP = 4e-3        # s per step: vLLM RFC #6854 (GPU bubble per decode step)
HOST_PER_SEQ = 0.08e-3  # s per sequence: (20 ms at 200 sequences, vLLM issue #6801, − 4 ms) / 200
MLP_OPS = ("mlp_up_proj", "mlp_act", "mlp_down_proj")
PROJ_OPS = ("attn_pre_proj", "attn_post_proj")


def find_profile(name: str | Path = PROFILE) -> Path:
    """``name`` if it exists, else under $LLMSCHED_DATA(/profiles), else ../shared/data/profiles beside the current
    directory or the repository."""
    given = Path(name).expanduser()
    tried = [given]
    if not given.is_absolute():
        env = os.environ.get("LLMSCHED_DATA")
        if env:
            tried += [Path(env) / given, Path(env) / "profiles" / given]
        tried += [Path.cwd().parent / "shared" / "data" / "profiles" / given,
                  Path(__file__).resolve().parents[2].parent / "shared" / "data" / "profiles" / given]
    for place in dict.fromkeys(tried):
        if place.is_file():
            return place
    raise FileNotFoundError(f"profile {str(name)!r} not found; looked in: {', '.join(map(str, dict.fromkeys(tried)))}. "
                            f"It is Vidur's A100 Llama-3-8B profile (microsoft/vidur data/profiling/compute/a100/"
                            f"meta-llama/Meta-Llama-3-8B/mlp.csv): give its path with --profile or set LLMSCHED_DATA")


@dataclass(frozen=True)
class LayerProfile:
    """Per-layer non-attention seconds of one model shape at each profiled token count (tp = 1)."""

    tokens: np.ndarray
    seconds: np.ndarray
    source: str

    def __call__(self, tokens: int) -> float:
        t, s = self.tokens, self.seconds
        if tokens <= t[-1]:
            return float(np.interp(tokens, t, s))
        return float(s[-1] + self.tail_slope * (tokens - t[-1]))

    @property
    def tail_slope(self) -> float:
        """Seconds per token beyond the profile: the least-squares slope over its upper half (compute-bound;
        the slope between two neighbouring rows is mostly noise)."""
        upper = self.tokens >= self.tokens[-1] / 2
        return float(np.polyfit(self.tokens[upper], self.seconds[upper], 1)[0])


@lru_cache(maxsize=8)
def layer_profile(path: str, model: str) -> LayerProfile:
    """The profile at ``path`` (a Llama-3-8B Vidur mlp.csv) adapted to ``model``'s layer widths."""
    target, base = model_preset(model), model_preset(PROFILE_MODEL)
    _check_family(target, base, path)
    mlp = target.ffn / base.ffn
    proj = (target.q_dim + 2 * target.kv_dim + target.q_dim) / (base.q_dim + 2 * base.kv_dim + base.q_dim)
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"profile {p} not found: the Vidur A100 Llama-3-8B profile is in ../shared/data/"
                                f"profiles (give its path with --profile)")
    with p.open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if int(r["num_tensor_parallel_workers"]) == 1]
    if not rows:
        raise ValueError(f"{p.name}: no rows at tensor parallelism 1")
    per_row = np.zeros(len(rows))
    for op in LAYER_OPS:
        scale = mlp if op in MLP_OPS else proj if op in PROJ_OPS else 1.0
        per_row += scale * np.array([float(r[f"time_stats.{op}.median"]) for r in rows]) / 1e3
    counts = np.array([int(r["num_tokens"]) for r in rows])
    tokens = np.unique(counts)                    # a token count profiled more than once: the mean of its rows
    seconds = np.array([per_row[counts == t].mean() for t in tokens])
    return LayerProfile(tokens.astype(float), seconds, f"{p.name} (median per operator, tp 1), MLP ×{mlp:.3f}, projections "
                                         f"×{proj:.3f} for {target.name}")


def _check_family(target: ModelSpec, base: ModelSpec, path: str) -> None:
    if (target.hidden, target.heads, target.kv_heads, target.head_dim, target.gated_mlp) != \
            (base.hidden, base.heads, base.kv_heads, base.head_dim, base.gated_mlp):
        raise ValueError(f"{target.name}: the profile {Path(path).name} is of {base.name}'s layer shape (hidden "
                         f"{base.hidden}, {base.heads}/{base.kv_heads} heads, gated MLP); only the MLP width and "
                         f"projection widths are rescaled, so use a model with the same hidden size and heads")


class MeasuredVLLMStepTime(BatchTimeModel):
    """Step time = layers · profile(tokens) + roofline attention and LM head + vLLM's host cost."""

    name = "vllm-0.6.3-measured"

    def __init__(self, model: str, profile: str | Path, gpu: str = "a100-pcie", host_scale: float = 1.0,
                 host_step: float = HOST_STEP, host_per_seq: float = HOST_PER_SEQ):
        if host_scale < 0:
            raise ValueError(f"host_scale must be >= 0, got {host_scale}")
        self.model_name, self.gpu_name = model, gpu
        self.layers = layer_profile(str(profile), model)
        self.roof = RooflineBatchTime(model, gpu)
        self.L = self.roof.model.layers
        self.host_step, self.host_per_seq = host_scale * host_step, host_scale * host_per_seq
        self.host_scale = host_scale

    def step_time(self, batch: Batch) -> float:
        rows = len(batch.prefill_new) + len(batch.decode_ctx)
        tokens = sum(batch.prefill_new) + len(batch.decode_ctx)
        if tokens == 0:
            return 0.0
        roof = self.roof
        attention_and_head = (roof.step_time(batch) - self.L * roof.layer_nonattention_time(tokens)
                              - roof.step_overhead - rows * roof.per_seq_overhead)
        return self.L * self.layers(tokens) + attention_and_head + self.host_step + rows * self.host_per_seq

    def describe(self) -> dict:
        return {"name": self.name, "model": self.model_name, "gpu": self.gpu_name, "profile": self.layers.source,
                "host_step": self.host_step, "host_per_seq": self.host_per_seq, "host_scale": self.host_scale,
                "attention": "roofline (attn_compute_eff "
                             f"{roof_attr(self.roof, 'attn_compute_eff')}, decode at mem_eff "
                             f"{roof_attr(self.roof, 'mem_eff')})"}


def roof_attr(roof: RooflineBatchTime, name: str):
    return roof.describe().get(name)

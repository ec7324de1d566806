"""Bari et al.'s Theorem 1 figure r/T̄ᴿ and Theorem 2's condition on n, as ``llmsched theory rad-bound``
(llmsched/cli/theory_rad_bound.py) reports them.

r/T̄ᴿ bounds every policy only in the paper's cost model (eq. 7, no fixed cost per batch); under the simulator's
roofline it is the throughput of RAD's own batching regime, which hybrid batchers exceed
(llmsched/theory/rad_slai/theorems.py). The output says so and prints the sound bound of
llmsched/theory/throughput_bound.py beside it.
"""
from __future__ import annotations

import math

import numpy as np

from ..batchtime.registry import make_batch_time_model
from ..experiment import RunConfig
from ..hardware.gpus import gpu as gpu_preset
from ..hardware.models import model as model_preset
from ..workload.lengths.length_presets import length_preset
from ..workload.lengths.distributions import Capped
from .rad_slai.bound_check import TiledPrompts
from .rad_slai.theorems import rad_bound, saturated_throughput, theorem2_holds, theorem2_min_n
from .throughput_bound import engine_limits, throughput_bound

# Bari, Hegde, de Veciana, "Optimal Scheduling Algorithms for LLM Inference: Theory and Practice" (POMACS 2025),
# §7: Mistral-7B on one RTX 6000 Ada, whose GEMM tiles give the step time its staircase; the bound defaults to
# that setting rather than the run's
PAPER_MODEL = "mistral-7b"
PAPER_GPU = "rtx-6000-ada"
PAPER_BATCH_TIME = "roofline-staircase"


def compute(*, workload: str = RunConfig.workload, model: str = PAPER_MODEL, gpu: str = PAPER_GPU,
            batch_time: str = PAPER_BATCH_TIME, replicas: int = RunConfig.replicas, max_total_tokens: int | None = None,
            tile_prompts: bool = False, convention: str = "engine", samples: int = 20000, seed: int = RunConfig.seed,
            n: int | None = None, rate: float | None = None) -> dict:
    """T̄ᴿ and r/T̄ᴿ over ``samples`` draws of the ``workload``'s lengths (prompts tiled to t*_lcm where
    ``tile_prompts``), the sound bound beside it, and Theorem 2's check of RAD's ``n`` at ``rate`` when both are
    given."""
    if samples < 2:
        raise ValueError(f"--samples must be >= 2, got {samples}")
    if replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {replicas}")
    g = gpu_preset(gpu)
    m = model_preset(model)
    bt = make_batch_time_model(batch_time, m, g)
    t_col = getattr(bt, "t_col", g.t_col)
    t_lcm = math.lcm(g.t_row, t_col, g.t_red)
    lengths = length_preset(workload)
    if max_total_tokens:
        lengths = Capped(lengths, max_total_tokens)
    if tile_prompts:
        lengths = TiledPrompts(lengths, t_lcm)
    prompts, outputs = lengths.sample(samples, np.random.default_rng(seed))
    bound = rad_bound(bt, prompts, outputs, t_col, t_lcm, replicas, convention)
    out = {"workload": workload, "model": m.name, "gpu": g.name, "batch_time": batch_time,
           **bound.as_dict(),
           "capacity_meaning": "RAD's regime: the most RAD's t*_col-request, t*_lcm-token batches serve; an upper "
                               "bound for every policy only in the paper's cost model (Bari et al. eq. 7)"}
    limits = engine_limits(RunConfig(model=m.name, gpu=g.name, batch_time=batch_time))
    sound = throughput_bound(bt, prompts, outputs, limits, replicas)
    out["sound_bound_rps"] = sound.requests_per_s
    out["sound_bound"] = sound.as_dict()
    if n is not None or rate is not None:
        if n is None or rate is None:
            raise ValueError("the Theorem 2 check needs both --n and --rate")
        eps = 1 - rate * bound.t_bar / bound.replicas
        out["theorem2"] = {"n": n, "rate": rate, "eps": eps,
                           "min_n": theorem2_min_n(t_col, bound.t_max, bound.t_bar, eps) if 0 < eps < 1 else None,
                           "holds": theorem2_holds(n, rate, bound),
                           "saturated_rps_per_replica_at_least": saturated_throughput(n, bound.t_bar,
                                                                                      bound.t_max, t_col)}
    return out

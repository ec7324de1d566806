"""The ``engine`` batch-time model: the roofline plus what a serving engine adds on top of the GPU's work.

Terms (see :mod:`.roofline` for the formulas) and where each figure comes from:

* tensor-parallel all-reduce: ring algorithm, 2 per layer, ``2(tp−1)/tp · tokens·hidden·2 B`` over the GPU's
  link at ``comm_eff`` of its datasheet rate, plus ``2(tp−1)`` hops of the preset's ``link_latency`` (NCCL's
  tuning model) and a 10 µs base per all-reduce; ``comm_eff`` is *fitted* (the achieved all-reduce bandwidth
  depends on the engine's communication library and settings);
* host: kernel launches, ``layers · (host_layer + host_prefill_layer in a step with a prefill)``, overlapped
  with the GPU's work (a smoothed maximum of sharpness ``host_sharpness``), plus the serial host work
  ``host_step + rows · host_per_seq``; all *fitted*;
* decode attention: ``decode_gqa`` (a GQA-aware kernel, or one reading a KV copy per query head) is *chosen*
  by the calibration loss; ``decode_attn_eff`` stays at ``mem_eff``;
* linear layers, element-wise ops, LM head, prefill attention: the roofline with the efficiencies fitted to
  Vidur's per-operator profiles (``calibration.json``).

Fitted figures live in ``engine_calibration.json``, written by ``scripts/calibrate_timing.py`` from a declared
calibration part of the measurements only (docs/batch-time.md reports errors on the rest). A GPU without its
own fit uses its chip family's, else the mean of the calibrated machines (a documented extrapolation).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..hardware.gpus import GPUSpec, gpu as _gpu
from ..hardware.models import ModelSpec
from .roofline import ENGINE_TERMS, RooflineBatchTime

ENGINE_CALIBRATION_PATH = Path(__file__).with_name("engine_calibration.json")
DEFAULT_ENGINE = "splitwise-dgx"
FITTED_TERMS = ("comm_eff", "host_layer", "host_prefill_layer", "host_per_seq", "host_step", "host_sharpness",
                "decode_gqa")


@lru_cache(maxsize=1)
def load_engine_calibration() -> dict:
    """``engine_calibration.json`` ({} when absent)."""
    if not ENGINE_CALIBRATION_PATH.exists():
        return {}
    return json.loads(ENGINE_CALIBRATION_PATH.read_text())


def engine_params(gpu: GPUSpec | str, engine: str = DEFAULT_ENGINE) -> tuple[dict, str]:
    """The fitted engine terms for ``gpu`` (by name, then chip family, else the mean over the engine's
    calibrated GPUs) and a line saying which."""
    device = _gpu(gpu)
    engines = load_engine_calibration().get("engines", {})
    if engine not in engines:
        raise ValueError(f"unknown engine {engine!r}; calibrated engines: {', '.join(sorted(engines)) or 'none'} "
                         f"(run scripts/calibrate_timing.py)")
    table = engines[engine]["gpus"]
    for key in (device.name, device.family):
        if key in table:
            return {k: v for k, v in table[key].items() if k in ENGINE_TERMS}, f"{engine} fit for {key}"
    mean = {k: sum(t[k] for t in table.values()) / len(table) for k in FITTED_TERMS if k != "decode_gqa"}
    mean["decode_gqa"] = all(t.get("decode_gqa", True) for t in table.values())
    return mean, f"{engine} fit, mean of {', '.join(sorted(table))} (no fit for {device.name})"


class EngineBatchTime(RooflineBatchTime):
    """The roofline with the engine terms switched on (fitted figures, overridable by keyword)."""

    def __init__(self, model: ModelSpec | str, gpu: GPUSpec | str, *, engine: str = DEFAULT_ENGINE, **params):
        device = _gpu(gpu)
        fitted, source = engine_params(device, engine)
        # its terms were fitted with decode attention at mem_eff: the measured copy rate would move them
        merged = {"allreduce_hop_latency": device.link_latency, "measured_stream": False, **fitted, **params}
        super().__init__(model, device, **merged)
        self.name = "engine"
        self.engine, self.engine_source = engine, source

    def describe(self) -> dict:
        return {**super().describe(), "engine": self.engine, "engine_source": self.engine_source}

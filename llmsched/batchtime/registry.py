"""Batch-time models by name: ``make_batch_time_model("roofline", "llama-3-8b", "a100")``."""
from __future__ import annotations

import inspect

from ..hardware.gpus import GPUSpec
from ..hardware.models import ModelSpec
from .base import BatchTimeModel
from .linear import LinearBatchTime
from .roofline import RooflineBatchTime
from .serving_engine import DEFAULT_ENGINE, EngineBatchTime

_ROOFLINE_PARAMS = tuple(p for p in inspect.signature(RooflineBatchTime.__init__).parameters
                         if p not in ("self", "model", "gpu", "staircase"))
_CALIBRATED_PARAMS = tuple(p for p in _ROOFLINE_PARAMS if p != "calibration")
_ENGINE_PARAMS = ("engine",) + _ROOFLINE_PARAMS
_LINEAR_PARAMS = ("const", "per_token", "per_context", "per_prefill", "extra", "t_col", "source", "file",
                  "steps_csv", "terms", "loss")


def _roofline(model, gpu, **params) -> BatchTimeModel:
    return RooflineBatchTime(model, gpu, **params)


def _roofline_staircase(model, gpu, **params) -> BatchTimeModel:
    return RooflineBatchTime(model, gpu, staircase=True, **params)


def _calibrated(model, gpu, **params) -> BatchTimeModel:
    return RooflineBatchTime(model, gpu, calibration="require", **params)


def _engine(model, gpu, engine=DEFAULT_ENGINE, **params) -> BatchTimeModel:
    return EngineBatchTime(model, gpu, engine=engine, **params)


def _linear(model=None, gpu=None, *, file=None, steps_csv=None, terms=None, loss="relative", t_col=128,
            source="", **coefficients) -> BatchTimeModel:
    given = [name for name, value in (("file=", file), ("steps_csv=", steps_csv), ("coefficients", coefficients))
             if value]
    if len(given) > 1:
        raise ValueError(f"linear batch time: give one of file=, steps_csv= or coefficients, not {' and '.join(given)}")
    if file is not None:
        return LinearBatchTime.load(file)
    if coefficients:
        return LinearBatchTime(**coefficients, t_col=t_col, source=source)
    fit_args = {"loss": loss, "t_col": t_col, **({"terms": tuple(terms)} if terms is not None else {})}
    if steps_csv is not None:
        return LinearBatchTime.fit(steps_csv, **fit_args)[0]
    if model is None or gpu is None:
        raise ValueError("linear batch time needs coefficients (const=, per_token=, ...), file= (a saved JSON), "
                         "steps_csv= (a steps.csv to fit), or model= and gpu= (to approximate the roofline)")
    return LinearBatchTime.approximate(RooflineBatchTime(model, gpu), **fit_args)[0]


def _kind(factory, summary: str, params: tuple[str, ...], needs_hardware: bool = True) -> dict:
    return {"factory": factory, "summary": summary, "params": params, "needs_hardware": needs_hardware}


# name → {"factory", "summary" (one line for `llmsched presets`), "params" (accepted keywords), "needs_hardware"}
BATCH_TIME_MODELS: dict[str, dict] = {
    "roofline": _kind(_roofline, "FLOPs and bytes moved vs the GPU's peak rates, with efficiencies from "
                                 "calibration.json where fitted (else documented defaults)", _ROOFLINE_PARAMS),
    "roofline-staircase": _kind(_roofline_staircase, "roofline with seed 000's tile staircase: linear layers cost "
                                                     "t_col·⌈tokens/t_col⌉ tokens of compute", _ROOFLINE_PARAMS),
    "calibrated": _kind(_calibrated, "roofline with the efficiencies fitted to Vidur's profiles for this GPU (or "
                                     "its chip family); an error for uncalibrated GPUs", _CALIBRATED_PARAMS),
    "engine": _kind(_engine, "roofline + tensor-parallel all-reduce, host (launch/scheduling) floor and decode "
                             "attention efficiency fitted to measured whole-model steps (engine_calibration.json)",
                    _ENGINE_PARAMS),
    "linear": _kind(_linear, "a + b·tokens + c·Σcontext + d·#prefills (+ extra terms): from coefficients, a saved "
                             "JSON (file=), a fit to steps.csv (steps_csv=), or approximating model/gpu's roofline",
                    _LINEAR_PARAMS, needs_hardware=False),
}


def make_batch_time_model(kind: str = "roofline", model: ModelSpec | str | None = None,
                          gpu: GPUSpec | str | None = None, **params) -> BatchTimeModel:
    """Build a batch-time model of ``kind`` (see :data:`BATCH_TIME_MODELS`) for ``model`` on ``gpu``."""
    entry = BATCH_TIME_MODELS.get(kind)
    if entry is None:
        raise ValueError(f"unknown batch-time model {kind!r}; valid kinds: {', '.join(BATCH_TIME_MODELS)}")
    unknown = sorted(set(params) - set(entry["params"]))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)} for batch-time model {kind!r}; valid: "
                         f"{', '.join(entry['params'])}")
    if entry["needs_hardware"] and (model is None or gpu is None):
        raise ValueError(f"batch-time model {kind!r} needs model= and gpu= (presets or specs)")
    return entry["factory"](model, gpu, **params)

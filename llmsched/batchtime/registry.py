"""Batch-time models by name: ``make_batch_time_model("roofline", "llama-3-8b", "a100")``."""
from __future__ import annotations

import inspect
import warnings

from ..bounds import MAX_STEP_COEFFICIENT
from ..engine.limits import MAX_NUM_BATCHED_TOKENS, MAX_NUM_SEQS
from ..hardware.gpus import GPUSpec
from ..hardware.models import ModelSpec
from .base import BatchTimeModel
from .linear import LinearBatchTime
from .named import load_profile, profile_names
from .roofline import RooflineBatchTime
from .serving_engine import DEFAULT_ENGINE, EngineBatchTime
from .vllm_v1 import CPU_PER_SEQ, DEFAULT_MAX_CAPTURE, VLLMV1BatchTime, cudagraph_capture_sizes

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
        for term, value in coefficients.items():  # seconds per step, token, context token, prefill: bounds.py
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > MAX_STEP_COEFFICIENT:
                raise ValueError(f"linear coefficient {term} = {value:g} s is more than {MAX_STEP_COEFFICIENT:g} s: "
                                 f"no GPU's step takes that per unit (a typo or a unit slip: give seconds)")
        return LinearBatchTime(**coefficients, t_col=t_col, source=source)
    fit_args = {"loss": loss, "t_col": t_col, **({"terms": tuple(terms)} if terms is not None else {})}
    if steps_csv is not None:
        return LinearBatchTime.fit(steps_csv, **fit_args)[0]
    if model is None or gpu is None:
        raise ValueError("linear batch time needs coefficients (const=, per_token=, ...), file= (a saved JSON), "
                         "steps_csv= (a steps.csv to fit), or model= and gpu= (to approximate the roofline)")
    return LinearBatchTime.approximate(RooflineBatchTime(model, gpu), **fit_args)[0]


_VLLM_V1_OWN = ("gpu_model", "capture_sizes", "max_num_seqs", "max_num_batched_tokens", "max_capture",
                "async_scheduling", "cpu_step", "cpu_per_seq", "source")


def _vllm_v1(model, gpu, *, gpu_model="roofline", capture_sizes=None, max_num_seqs=MAX_NUM_SEQS.default,
             max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS.default, max_capture=DEFAULT_MAX_CAPTURE,
             async_scheduling=True, cpu_step=0.0, cpu_per_seq=CPU_PER_SEQ, source="", **gpu_params) -> BatchTimeModel:
    entry = BATCH_TIME_MODELS.get(gpu_model)
    if entry is None or gpu_model == "vllm-v1":
        inner = [k for k in BATCH_TIME_MODELS if k != "vllm-v1"]
        raise ValueError(f"vllm-v1: gpu_model {gpu_model!r} is not a GPU batch-time model; valid: {', '.join(inner)}")
    if "step_overhead" in entry["params"]:
        gpu_params.setdefault("step_overhead", 0.0)  # the engine's host terms replace the roofline's default
    inner = make_batch_time_model(gpu_model, model, gpu, **gpu_params)
    sizes = capture_sizes if capture_sizes is not None else \
        cudagraph_capture_sizes(int(max_num_seqs), int(max_num_batched_tokens), int(max_capture))
    return VLLMV1BatchTime(inner, capture_sizes=sizes, async_scheduling=async_scheduling, cpu_step=cpu_step,
                           cpu_per_seq=cpu_per_seq, source=source)


def _kind(factory, summary: str, params: tuple[str, ...], needs_hardware: bool = True,
          run_fields: tuple[str, ...] = ()) -> dict:
    """``run_fields``: run settings (RunConfig field names) the kind takes as parameters of the same name, filled
    from the run unless given."""
    return {"factory": factory, "summary": summary, "params": params, "needs_hardware": needs_hardware,
            "run_fields": run_fields}


# name → {"factory", "summary" (one line for `llmsched presets`), "params" (accepted keywords), "needs_hardware"}
BATCH_TIME_MODELS: dict[str, dict] = {
    "roofline": _kind(_roofline, "FLOPs and bytes moved vs the GPU's peak rates, with efficiencies from "
                                 "calibration.json where fitted (else documented defaults)", _ROOFLINE_PARAMS),
    "roofline-staircase": _kind(_roofline_staircase, "roofline with Bari et al.'s tile staircase: linear layers cost "
                                                     "t_col·⌈tokens/t_col⌉ tokens of compute", _ROOFLINE_PARAMS),
    "calibrated": _kind(_calibrated, "roofline with the efficiencies fitted to Vidur's profiles for this GPU (or "
                                     "its chip family); an error for uncalibrated GPUs", _CALIBRATED_PARAMS),
    "engine": _kind(_engine, "roofline + tensor-parallel all-reduce, host (launch/scheduling) floor and decode "
                             "attention efficiency fitted to measured whole-model steps (engine_calibration.json)",
                    _ENGINE_PARAMS),
    "linear": _kind(_linear, "a + b·tokens + c·Σcontext + d·#prefills (+ extra terms): from coefficients, a saved "
                             "JSON (file=), a fit to steps.csv (steps_csv=), or approximating model/gpu's roofline",
                    _LINEAR_PARAMS, needs_hardware=False),
    "vllm-v1": _kind(_vllm_v1, "vLLM v1's engine around a GPU model (gpu_model=, default roofline): decode and "
                               "mixed steps padded to CUDA-graph sizes, host work overlapped by async scheduling",
                     _VLLM_V1_OWN + tuple(dict.fromkeys(_ROOFLINE_PARAMS + _ENGINE_PARAMS + _LINEAR_PARAMS)),
                     run_fields=("max_num_seqs", "max_num_batched_tokens")),
}


def resolve_kind(name: str) -> tuple[str, dict]:
    """A kind's name, or a stored profile's (batchtime/named.py): the kind and the profile's parameters."""
    if name in BATCH_TIME_MODELS:
        return name, {}
    profile = load_profile(name)
    if profile is None or profile["kind"] not in BATCH_TIME_MODELS:
        profiles = profile_names()
        where = f" (profile {profile['path']} names kind {profile['kind']!r})" if profile else ""
        raise ValueError(f"unknown batch-time model {name!r}{where}; valid kinds: {', '.join(BATCH_TIME_MODELS)}"
                         + (f"; stored profiles: {', '.join(profiles)}" if profiles else ""))
    params = dict(profile["params"])
    if "measured_stream" in BATCH_TIME_MODELS[profile["kind"]]["params"]:
        # a profile that does not say was fitted before decode attention read at the card's measured copy rate
        params.setdefault("measured_stream", False)
    return profile["kind"], params


def make_batch_time_model(kind: str = "roofline", model: ModelSpec | str | None = None,
                          gpu: GPUSpec | str | None = None, **params) -> BatchTimeModel:
    """Build a batch-time model of ``kind`` (see :data:`BATCH_TIME_MODELS`, or a stored profile's name) for
    ``model`` on ``gpu``; ``params`` override a profile's. A profile fitted on other GPUs is used with a warning:
    its efficiencies are those GPUs'."""
    if kind not in BATCH_TIME_MODELS and gpu is not None:
        warn_other_gpu(load_profile(kind), gpu if isinstance(gpu, str) else gpu.name)
    kind, stored = resolve_kind(kind)
    params = {**stored, **params}
    entry = BATCH_TIME_MODELS[kind]
    unknown = sorted(set(params) - set(entry["params"]))
    if unknown:
        raise ValueError(f"unknown parameter(s) {', '.join(unknown)} for batch-time model {kind!r}; valid: "
                         f"{', '.join(dict.fromkeys(entry['params']))}")
    if entry["needs_hardware"] and (model is None or gpu is None):
        raise ValueError(f"batch-time model {kind!r} needs model= and gpu= (presets or specs)")
    return entry["factory"](model, gpu, **params)


def warn_other_gpu(profile: dict | None, gpu: str) -> None:
    fitted_on = (profile or {}).get("gpus") or []
    if fitted_on and gpu not in fitted_on:
        warnings.warn(f"batch-time profile {profile['name']!r} was calibrated on {', '.join(fitted_on)}, not {gpu}: "
                      f"its efficiencies are that GPU family's (fit one for {gpu} with `llmsched validate-serving "
                      f"--calibrate`, or use --batch-time {profile['kind']})")

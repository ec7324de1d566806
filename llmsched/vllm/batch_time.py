"""The batch-time model the plug-in gives its policy, chosen at start-up without a manual step.

In order:

1. ``LLMSCHED_PROFILE`` (a name or a .json path): a profile measured by ``llmsched profile``; refused unless it
   was measured on the model being served (same shape fingerprint).
2. The profile stored for this model, this hardware and this vLLM version (``profiles.default_profile_path``),
   when ``llmsched profile`` has been run for them.
3. Otherwise an **online fit**: a linear model (``const + per_token·tokens + per_context·Σcontext +
   per_prefill·#prefills``, the papers' form) refitted from the engine's own step times every ``EVERY`` steps,
   starting from a roofline of the served model's shape (its config) on this hardware: a GPU preset's datasheet
   figures, or on a CPU the matmul rate and memory bandwidth measured at start-up. The prior only serves until
   ``MIN_STEPS`` steps have been seen; policies that copy the model once (FairBatching's predictor, WAIT's
   iteration coefficients, deferred-prefill's K) copy the model as it is when they first need it.
"""
from __future__ import annotations

import logging
import time
from collections import deque

import numpy as np

from ..batchtime.linear import BASE_TERMS, LinearBatchTime

logger = logging.getLogger("llmsched.vllm")
MIN_STEPS = 16  # steps seen before the first online fit
EVERY = 16      # refit period (steps)
WINDOW = 256    # most recent steps the fit uses
STALL = 10.0    # steps longer than this many times the window's median are left out of the fit


class OnlineBatchTime(LinearBatchTime):
    """A linear model refitted in place from observed steps (non-negative least squares, relative loss)."""

    name = "linear-online"

    def __init__(self, prior: LinearBatchTime, min_steps: int = MIN_STEPS, every: int = EVERY,
                 window: int = WINDOW, prior_source: str = ""):
        c = prior.coefficients
        super().__init__(c["const"], c["per_token"], c["per_context"], c["per_prefill"], t_col=prior.t_col,
                         source=f"online fit to this engine's steps; prior: {prior_source or prior.source}")
        self.min_steps, self.every = min_steps, every
        self.prior = dict(c)
        self._rows: deque = deque(maxlen=window)
        self.steps = self.fits = 0
        self.report = None

    def observe(self, prefill_tokens: int, num_prefills: int, num_decodes: int, context_sum: int,
                duration: float) -> None:
        self._rows.append((duration, prefill_tokens, num_prefills, num_decodes, context_sum))
        self.steps += 1
        n = self.steps - self.min_steps
        if n >= 0 and n % self.every == 0:
            self.refit()

    def window(self) -> np.ndarray:
        """The steps the next fit uses: rows of (duration, prefill tokens, prefills, decodes, context sum)."""
        return np.asarray(self._rows, dtype=float)

    def refit(self) -> None:
        a = np.asarray(self._rows, dtype=float)
        a = a[a[:, 0] <= STALL * np.median(a[:, 0])]  # stalls (first-call warm-up, other processes) are not load
        cols = dict(zip(("duration", "prefill_tokens", "num_prefills", "num_decodes", "context_sum"), a.T))
        try:
            fitted, report = LinearBatchTime.fit(cols, BASE_TERMS)
        except ValueError:  # degenerate steps (e.g. all identical): keep the current coefficients
            return
        c = fitted.coefficients
        self.coefficients.update({t: c[t] for t in BASE_TERMS})
        self._a, self._b, self._c, self._d = c["const"], c["per_token"], c["per_context"], c["per_prefill"]
        self.fits += 1
        self.report = report
        if self.fits == 1:
            logger.info("llmsched: online batch-time fit from %d steps: %s (%s)", len(a),
                        {k: f"{v:.3g}" for k, v in c.items() if k in BASE_TERMS}, report)

    def describe(self) -> dict:
        return {**super().describe(), "fits": self.fits, "report": str(self.report) if self.report else None}


def served_model_spec(hf_config, max_model_len: int):
    """The ``ModelSpec`` of the model vLLM serves, from its Hugging Face config."""
    from ..hardware.models import ModelSpec
    text = getattr(hf_config, "get_text_config", lambda: hf_config)()
    hidden = int(text.hidden_size)
    heads = int(text.num_attention_heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    ffn = int(getattr(text, "intermediate_size", None) or 4 * hidden)
    layers = int(text.num_hidden_layers)
    vocab = int(text.vocab_size)
    tied = bool(getattr(text, "tie_word_embeddings", False))
    per_layer = hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden + 3 * hidden * ffn
    params = layers * per_layer + vocab * hidden * (1 if tied else 2)
    return ModelSpec(name=str(getattr(text, "_name_or_path", "") or "served-model"), layers=layers, hidden=hidden,
                     heads=heads, kv_heads=kv_heads, head_dim=head_dim, ffn=ffn, vocab=vocab, params=params,
                     max_model_len=int(max_model_len), tied_embeddings=tied,
                     source="the served model's config (vLLM's hf_config)")


def measured_host(model) -> "object":
    """This machine as a roofline 'GPU': the bf16 matmul rate and copy bandwidth torch reaches here (measured).

    Measured on one thread, the matmul rate then times the engine's thread count: a multi-threaded matmul waits at
    its thread barrier whenever another process holds a core, and on a loaded 2-core machine two threads read 6-15
    GFLOP/s where one reads 350-420 (24 November 2026). A prior that slow made FairBatching's PAB reject a
    230-token prompt as unservable in time; an optimistic prior only lasts until the online fit replaces it."""
    import torch
    from ..hardware.gpus import GPUSpec
    threads = max(1, torch.get_num_threads())
    x = torch.randn(128, model.hidden, dtype=torch.bfloat16)
    w = torch.randn(model.hidden, model.ffn, dtype=torch.bfloat16)
    big = torch.empty(16 << 20, dtype=torch.uint8)
    torch.set_num_threads(1)
    try:
        torch.mm(x, w)
        big.clone()
        best_mm = best_cp = float("inf")
        deadline = time.perf_counter() + 0.1
        for i in range(100):  # the best of short tries for up to 0.1 s (at least 5)
            if i >= 5 and time.perf_counter() > deadline:
                break
            t = time.perf_counter()
            torch.mm(x, w)
            best_mm = min(best_mm, time.perf_counter() - t)
            t = time.perf_counter()
            big.clone()
            best_cp = min(best_cp, time.perf_counter() - t)
    finally:
        torch.set_num_threads(threads)
    flops = threads * 2 * 128 * model.hidden * model.ffn / max(best_mm, 1e-9)
    bw = 2 * big.numel() / max(best_cp, 1e-9)
    return GPUSpec("host-measured", flops=flops, mem_bw=bw, mem_bytes=1 << 34, host_bw=bw, interconnect_bw=bw,
                   sms=threads, t_row=1, t_col=1, t_red=1,
                   source=f"measured at start-up: bf16 matmul {flops / 1e9:.1f} GFLOP/s ({threads} x one thread's), "
                          f"copy {bw / 1e9:.1f} GB/s (one thread)")


def hardware_gpu():
    """The GPU preset of the device vLLM runs on, or None (CPU, or a GPU without a preset)."""
    try:
        import torch
        if not torch.cuda.is_available():
            return None
        name = torch.cuda.get_device_name(0).lower()
    except Exception:  # noqa: BLE001 (no usable CUDA: treat as CPU)
        return None
    from ..hardware.gpus import GPUS
    for key in sorted(GPUS, key=len, reverse=True):
        if key in name.replace(" ", "").replace("-", ""):
            return GPUS[key]
    return None


def roofline_prior(spec, max_tokens: int, max_context: int, max_decodes: int) -> tuple[LinearBatchTime, str]:
    """A linear approximation of the roofline of ``spec`` on this hardware, and where the hardware figures came
    from."""
    from ..batchtime.roofline import RooflineBatchTime
    gpu = hardware_gpu()
    hw = gpu or measured_host(spec)
    roof = RooflineBatchTime(spec, hw, calibration="auto" if gpu else "off")
    lin, _ = LinearBatchTime.approximate(roof, max_tokens=max_tokens, max_context=max_context,
                                         max_decodes=max_decodes)
    c = lin.coefficients
    return lin, (f"roofline of the served model's shape on {hw.name} ({hw.source}): {c['const'] * 1e3:.3g} ms + "
                 f"{c['per_token'] * 1e6:.3g} us/token + {c['per_context'] * 1e9:.3g} ns/context token")


def stored_profile(vllm_config):
    """Where the profile of the served model on this hardware and vLLM version is (or would be) stored."""
    from .profiles import default_profile_path
    return default_profile_path(vllm_config.model_config.model, vllm_config.model_config.hf_config)


def resolve_batch_time(settings, vllm_config, limits: tuple[int, int, int]):
    """(batch-time model, one-line description) for the plug-in's view; raises ValueError with the fix."""
    from .profiles import load_profile_for, model_fingerprint
    hf = vllm_config.model_config.hf_config
    fingerprint = model_fingerprint(hf)
    if settings.profile:
        model, path = load_profile_for(settings.profile, fingerprint)
        return model, f"profile {path}"
    path = stored_profile(vllm_config)
    if path.exists():
        model, _ = load_profile_for(str(path), fingerprint)
        return model, f"profile {path} (found for this model, hardware and vLLM version)"
    max_tokens, max_context, max_decodes = limits
    spec = served_model_spec(hf, max_context)
    prior, source = roofline_prior(spec, max_tokens, max_context, max_decodes)
    return OnlineBatchTime(prior, prior_source=source), (f"online fit to this engine's step times (no profile at "
                                                         f"{path}); until {MIN_STEPS} steps: {source}")

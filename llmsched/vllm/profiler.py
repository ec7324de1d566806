"""Measure vLLM's step times over a grid of batch compositions and fit the papers' linear batch-time form.

Probes are batches of requests submitted together through the plug-in (policy ``vllm-chunked``): ``n`` requests
of ``ctx`` prompt tokens each and a few output tokens give prefill steps (chunks up to the token budget, over
cached context from 0 upwards), mixed steps, and decode steps of ``n`` requests at contexts ``ctx..ctx+k``. Every
step is recorded with its composition (steps.csv's columns), and ``LinearBatchTime.fit`` fits
``const + per_token·tokens + per_context·Σcontext + per_prefill·#prefills``.

The time fitted is a step's **cycle**: from its start to the next step's start while the engine stays busy (every
probe's requests are submitted at once, so it does until the probe's last step, which is left out). A step's own
duration (``schedule()`` to ``update_from_output()``) misses what the engine does between steps and what the
simulator's clock must still advance by: ``update_from_output()``, the output processor's detokenisation and stop
checks, the engine loop. Fitted to durations alone, the simulator ran ahead of the engine (measured: the gap is
``between_steps`` of the probe steps).
"""
from __future__ import annotations

import json
from pathlib import Path

from ..batchtime.linear import BASE_TERMS, LinearBatchTime
from ..metrics.writers import write_json
from ..request import Request
from .engine import EngineConfig
from .profiles import default_profile_path, hardware_key, model_fingerprint, profile_path, vllm_version
from .settings import load_settings


def probe_grid(max_seqs: int, max_context: int, output_tokens: int = 8):
    """(number of requests, prompt length) pairs: powers of two up to the limits."""
    counts = [n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256) if n <= max_seqs]
    contexts = [c for c in (32, 128, 512, 1024, 2048, 4096) if c + output_tokens <= max_context]
    return [(n, c) for n in counts for c in contexts]


def profile(llm, engine: EngineConfig, output_tokens: int = 8, repeats: int = 1):
    """Run the probes on ``llm``; returns (steps columns dict, fitted model, fit report)."""
    from .runner import replay
    settings = load_settings({}, scheduler="vllm-chunked")
    cols: dict[str, list] = {k: [] for k in ("duration", "prefill_tokens", "num_prefills", "num_decodes",
                                             "context_sum", "step_duration")}
    rid = 0
    for _ in range(repeats):
        for n, ctx in probe_grid(engine.max_num_seqs, engine.max_model_len, output_tokens):
            reqs = []
            for _ in range(n):
                reqs.append(Request(rid, 0.0, ctx, output_tokens))
                rid += 1
            steps = replay(llm, reqs, settings).steps
            start = list(steps.start)
            cols["duration"].extend(b - a for a, b in zip(start, start[1:]))
            cols["step_duration"].extend(list(steps.duration)[:-1])
            for k in ("prefill_tokens", "num_prefills", "num_decodes", "context_sum"):
                cols[k].extend(list(getattr(steps, k))[:-1])
    # Absolute loss: the fit's prediction is the mean cycle, so simulated time adds up to the engine's; the default
    # relative loss weights short steps up and, with other processes' stalls in the data, fitted them 2-3x low.
    model, report = LinearBatchTime.fit({k: v for k, v in cols.items() if k != "step_duration"}, BASE_TERMS,
                                        loss="absolute")
    return cols, model, report


def between_steps(cols) -> float:
    """The median share of a step's cycle spent outside ``schedule()``..``update_from_output()``."""
    import numpy as np
    cycle, inner = np.asarray(cols["duration"]), np.asarray(cols["step_duration"])
    return float(np.median(1 - inner / cycle)) if len(cycle) else 0.0


def save(model: LinearBatchTime, report, llm, engine: EngineConfig, name: str | None = None) -> Path:
    """Save the fit as profile ``name``, or by default at the path keyed by model, hardware and vLLM version
    (``profiles.default_profile_path``); returns the path. The model's fingerprint goes with it."""
    hf = llm.llm_engine.vllm_config.model_config.hf_config
    path = profile_path(name) if name else default_profile_path(engine.model, hf)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.source = f"llmsched profile: vLLM steps on {Path(engine.model).resolve()}"
    model.save(path, report)
    data = json.loads(path.read_text())
    data["meta"] = {"model": str(Path(engine.model).resolve()), "fingerprint": model_fingerprint(hf),
                    "hardware": hardware_key(), "vllm": vllm_version(), "engine": vars(engine)}
    write_json(data, path)
    return path

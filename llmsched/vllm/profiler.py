"""Measure vLLM's step times over a grid of batch compositions and fit the papers' linear batch-time form.

Probes are batches of requests submitted together through the plug-in (policy ``vllm-chunked``): ``n`` requests
of ``ctx`` prompt tokens each and a few output tokens give prefill steps (chunks up to the token budget, over
cached context from 0 upwards), mixed steps, and decode steps of ``n`` requests at contexts ``ctx..ctx+k``. Every
step is recorded with its composition (steps.csv's columns), and ``LinearBatchTime.fit`` fits
``const + per_token·tokens + per_context·Σcontext + per_prefill·#prefills + per_decode·#decodes +
has_prefill·[any prefill]``: the per-decode term is each decode's own sampling and input preparation, the
prefill term a step's fixed cost of running prompts (Kim et al.'s b_p); without them the fit, dominated by long
prefill steps, put a one-decode step 18% above its measured cycle (11% with both; R² 0.981 -> 0.984 on the
same probes). Then one-request probes after pauses of 0 to 0.5 s measure the slowdown of a step after the engine
sat idle (``batchtime/wake.py``), saved with the fit.

The time fitted is a step's **cycle**: from its start to the next step's start while the engine stays busy (every
probe's requests are submitted at once, so it does until the probe's last step, which is left out). A step's own
duration (``schedule()`` to ``update_from_output()``) misses what the engine does between steps and what the
simulator's clock must still advance by: ``update_from_output()``, the output processor's detokenisation and stop
checks, the engine loop. Fitted to durations alone, the simulator ran ahead of the engine (measured: the gap is
``between_steps`` of the probe steps).
"""
from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from ..batchtime.linear import BASE_TERMS, LinearBatchTime
from ..batchtime.wake import WakeCost
from ..metrics.writers import write_json
from ..request import Request
from .launch import EngineConfig
from .profiles import default_profile_path, hardware_key, model_fingerprint, profile_path, vllm_version
from .settings import load_settings


def probe_grid(max_seqs: int, max_context: int, output_tokens: int = 8):
    """(number of requests, prompt length) pairs: powers of two up to the limits."""
    counts = [n for n in (1, 2, 4, 8, 16, 32, 64, 128, 256) if n <= max_seqs]
    contexts = [c for c in (32, 128, 512, 1024, 2048, 4096) if c + output_tokens <= max_context]
    return [(n, c) for n in counts for c in contexts]


PROFILE_TERMS = BASE_TERMS + ("per_decode", "has_prefill")
WAKE_PAUSES = (0.005, 0.02, 0.05, 0.2, 0.5)  # seconds idle before a wake probe (0 = back to back: the baseline)
WAKE_PROMPT = 128


def fresh_cache(llm, engine: EngineConfig) -> None:
    """Empty vLLM's prefix cache (an engine with one, as ``fidelity`` starts for workloads with content) before a
    probe batch: probe prompts (``launch.prompt_ids``) repeat every 997 request ids, so a later batch could find
    an earlier one's blocks and time a prefill it did not compute."""
    if engine.prefix_caching:
        llm.reset_prefix_cache()


def profile(llm, engine: EngineConfig, output_tokens: int = 8, repeats: int = 1, wake_repeats: int = 12):
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
            fresh_cache(llm, engine)
            steps = replay(llm, reqs, settings).steps
            start = list(steps.start)
            cols["duration"].extend(b - a for a, b in zip(start, start[1:]))
            cols["step_duration"].extend(list(steps.duration)[:-1])
            for k in ("prefill_tokens", "num_prefills", "num_decodes", "context_sum"):
                cols[k].extend(list(getattr(steps, k))[:-1])
    # Absolute loss: the fit's prediction is the mean cycle, so simulated time adds up to the engine's; the default
    # relative loss weights short steps up and, with other processes' stalls in the data, fitted them 2-3x low.
    model, report = LinearBatchTime.fit({k: v for k, v in cols.items() if k != "step_duration"}, PROFILE_TERMS,
                                        loss="absolute")
    if wake_repeats:
        fresh_cache(llm, engine)
        model.wake = measure_wake(llm, settings, rid, wake_repeats)
    return cols, model, report


def measure_wake(llm, settings, first_id: int, repeats: int) -> WakeCost:
    """Fit the cold-start slowdown: the first step's cycle of a one-request probe (a ``WAKE_PROMPT``-token
    prefill) after each pause in ``WAKE_PAUSES``, over the same probe's median cycle run back to back, minus 1."""
    from .runner import replay
    rid = first_id
    idle, cycles = [], []
    for pause in ((0.0,) + WAKE_PAUSES) * repeats:  # a back-to-back probe (warm: the one before ran) per round
        time.sleep(pause)
        steps = replay(llm, [Request(rid, 0.0, WAKE_PROMPT, 2)], settings).steps
        rid += 1
        start = list(steps.start)
        if len(start) >= 2:
            idle.append(pause)  # replay's own set-up before the first step adds ~0.1 ms
            cycles.append(start[1] - start[0])
    busy = statistics.median(c for c, g in zip(cycles, idle) if g == 0.0)
    pairs = [(g, c / busy - 1) for g, c in zip(idle, cycles) if g > 0]
    return WakeCost.fit([g for g, _ in pairs], [e for _, e in pairs])


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

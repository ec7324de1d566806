"""Measure vLLM's step times over a grid of batch compositions and fit the papers' linear batch-time form.

Probes are batches of requests submitted together through the plug-in (policy ``vllm-chunked``): ``n`` requests
of ``ctx`` prompt tokens each and a few output tokens give prefill steps (chunks up to the token budget, over
cached context from 0 upwards), mixed steps, and decode steps of ``n`` requests at contexts ``ctx..ctx+k``. Every
step is recorded with its composition (steps.csv's columns), and ``LinearBatchTime.fit`` fits
``const + per_token·tokens + per_context·Σcontext + per_prefill·#prefills``.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..batchtime.linear import BASE_TERMS, LinearBatchTime
from ..metrics.writers import write_json
from ..request import Request
from .engine import EngineConfig
from .profiles import profile_path
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
                                             "context_sum")}
    rid = 0
    for _ in range(repeats):
        for n, ctx in probe_grid(engine.max_num_seqs, engine.max_model_len, output_tokens):
            reqs = []
            for _ in range(n):
                reqs.append(Request(rid, 0.0, ctx, output_tokens))
                rid += 1
            steps = replay(llm, reqs, settings).steps
            for k in cols:
                cols[k].extend(getattr(steps, k))
    model, report = LinearBatchTime.fit(cols, BASE_TERMS)
    return cols, model, report


def save(model: LinearBatchTime, report, name: str, meta: dict) -> Path:
    path = profile_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    model.source = f"llmsched profile {name}: vLLM steps on {meta.get('model', '?')}"
    model.save(path, report)
    data = json.loads(path.read_text())
    data["meta"] = meta
    write_json(data, path)
    return path

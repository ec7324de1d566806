"""Prompt types from a length distribution: bins of the output length (Ao et al. §6.2 groups LMSYS decode
lengths into 10 bins of 50 tokens; Nested WAIT's segments are the bins' upper edges).

Lengths here are the engine's (output tokens, the first sampled by the prefill); a bin whose longest output is
E tokens becomes the paper type with l' = E − 1 decode iterations (see :mod:`llmsched.schedulers.wait`).
"""
from __future__ import annotations

import numpy as np

from .fluid_model import PromptType


MAX_BINS = 10_000  # types from a length distribution: finer than one output length each says nothing more

def length_samples(lengths: str, n: int = 20000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(prompts, outputs) drawn from a length preset or this package's workloads, or all rows of a trace file."""
    from ...workload.lengths.length_presets import LENGTH_PRESETS, length_preset
    from .synthetic_workloads import WAIT_WORKLOADS
    if lengths in LENGTH_PRESETS or lengths in WAIT_WORKLOADS:
        dist = length_preset(lengths) if lengths in LENGTH_PRESETS else WAIT_WORKLOADS[lengths]().lengths
        return dist.sample(n, np.random.default_rng(seed))
    from ...workload.traces.readers import read_trace
    try:
        trace = read_trace(lengths, zero_lengths="clamp")
    except FileNotFoundError:
        raise ValueError(f"lengths {lengths!r} is neither a length preset ({', '.join(LENGTH_PRESETS)}), a WAIT "
                         f"workload ({', '.join(WAIT_WORKLOADS)}) nor a trace file that exists") from None
    if not len(trace.prompt_lens):
        raise ValueError(f"{lengths}: the trace has no requests; give a trace with at least one row, or a length preset")
    return trace.prompt_lens, trace.output_lens


def parse_edges(text: str) -> list[int]:
    try:
        edges = sorted({int(x) for x in str(text).split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"edges {text!r}: write increasing output lengths in tokens, e.g. '50,100,150'") from None
    if not edges or edges[0] < 1:
        raise ValueError(f"edges {text!r}: give output lengths >= 1 tokens")
    return edges


def types_from_lengths(prompts, outputs, rate: float, bins: int = 10, edges: list[int] | None = None
                       ) -> list[PromptType]:
    """One type per output bin: rate ∝ the bin's share, prompt = the bin's mean prompt, l' = the bin's upper edge
    − 1. Without ``edges`` the bins hold equal shares (quantiles); the last bin reaches the longest output."""
    prompts, outputs = np.asarray(prompts), np.asarray(outputs)
    if edges is None:
        if not 1 <= bins <= MAX_BINS:
            raise ValueError(f"bins must be from 1 to {MAX_BINS:,} (a type per output length at most), got {bins}")
        edges = sorted({int(np.ceil(q)) for q in np.quantile(outputs, np.arange(1, bins + 1) / bins)})
    edges = list(edges)
    edges[-1] = max(edges[-1], int(outputs.max()))
    index = np.searchsorted(np.asarray(edges), outputs, side="left")
    out = []
    for j, edge in enumerate(edges):
        sel = index == j
        if sel.any():
            out.append(PromptType(float(rate * sel.mean()), max(1, int(round(prompts[sel].mean()))), edge - 1))
    return out

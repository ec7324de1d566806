"""The paper's request model exactly: every prompt d_0 tokens, then Geometric(α) decode iterations.

In Mohanty et al.'s model (§1.4) the prefill phase emits each new prompt's first token and the prompt then stays for
J ~ Geometric(α) ≥ 1 decode iterations, so no prompt leaves during a prefill. In this engine the first token
comes from the prefill step too, so the output length is 1 + J. (The foundation's ``Geometric`` draws the
output length itself from Geometric(α): then a fraction α of prompts leave at their prefill step, the vLLM
behaviour, which the renewal formula ignores.)
"""
from __future__ import annotations

import numpy as np

from ...workload.lengths.distributions import LengthDist, check_count, positive_float, positive_int


class DecodeGeometric(LengthDist):
    def __init__(self, prompt: int, decode_mean: float):
        self.prompt = positive_int("DecodeGeometric prompt", prompt)
        self.decode_mean = positive_float("DecodeGeometric decode_mean", decode_mean)
        if self.decode_mean <= 1:
            raise ValueError(f"DecodeGeometric decode_mean must be > 1 iteration, got {decode_mean!r}")

    @property
    def alpha(self) -> float:
        return 1.0 / self.decode_mean

    def sample(self, n, rng):
        n = check_count(n)
        return np.full(n, self.prompt, np.int64), 1 + rng.geometric(self.alpha, n).astype(np.int64)

    def describe(self) -> dict:
        return {"kind": "decode-geometric", "prompt": self.prompt, "decode_mean": self.decode_mean}


class BenchmarkFiltered(LengthDist):
    """Draws of ``dist`` kept only when both lengths are >= ``min_len`` and prompt + output <= ``max_total``: the
    vLLM benchmark's ShareGPT filter, here at the paper's implied context of 1024 tokens."""

    def __init__(self, dist: LengthDist, max_total: int, min_len: int = 4):
        self.dist = dist
        self.max_total = positive_int("BenchmarkFiltered max_total", max_total)
        self.min_len = positive_int("BenchmarkFiltered min_len", min_len)
        if 2 * self.min_len > self.max_total:
            raise ValueError(f"BenchmarkFiltered: max_total {max_total} leaves no room for two lengths >= {min_len}")

    def sample(self, n, rng):
        n = check_count(n)
        prompts, outputs = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
        kept, tries = 0, 0
        while kept < n:
            tries += 1
            if tries > 1000:
                raise ValueError(f"BenchmarkFiltered: almost no draws of {self.dist.describe()} fit "
                                 f"{self.max_total} tokens")
            p, o = self.dist.sample(max(4 * (n - kept), 64), rng)
            keep = (p >= self.min_len) & (o >= self.min_len) & (p + o <= self.max_total)
            prompts.append(p[keep])
            outputs.append(o[keep])
            kept += int(keep.sum())
        return np.concatenate(prompts)[:n], np.concatenate(outputs)[:n]

    def describe(self) -> dict:
        return {"kind": "benchmark-filtered", "max_total": self.max_total, "min_len": self.min_len,
                "dist": self.dist.describe()}

"""How many prompt tokens a prefix cache could serve, offline: the exact target a simulated cache that evicts
nothing must meet.

Requests are taken one after another in arrival order, each finding the blocks of every request before it. A
request's cached tokens are its leading full KV blocks already seen, and never its whole prompt: at most
``(prompt_len - 1) // block_size`` blocks, because vLLM v1 always computes the last prompt token (its logits give
the first output token). Seen blocks are those of earlier prompts and, with ``outputs``, of earlier replies too
(the KV of ``prompt + output - 1`` tokens, which vLLM caches as the blocks fill), so a session's next turn finds
its previous turn. A request without a content shares nothing.

The count runs per piece of content (llmsched.content), not per block: for each piece (identified by its key,
which names everything before it) it keeps how far into the piece full blocks have been seen, so memory follows
the distinct pieces, not the tokens.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class PrefixStats:
    block_size: int
    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    with_content: int = 0  # requests that have a content (the others share nothing)
    cached: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # per request, when kept

    @property
    def hit_rate(self) -> float:
        """Cached over prompt tokens."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def describe(self) -> dict:
        return {"block_size": self.block_size, "requests": self.requests, "with_content": self.with_content,
                "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                "hit_rate": round(self.hit_rate, 6)}


def prefix_stats(requests: Iterable, block_size: int = 16, outputs: bool = True, keep: bool = False) -> PrefixStats:
    """Cached tokens of ``requests`` (in arrival order) with a cache that evicts nothing (see the module docstring);
    ``keep``: also each request's count, in ``PrefixStats.cached``."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be an integer >= 1, got {block_size!r}")
    stats = PrefixStats(block_size)
    seen: dict[int, int] = {}  # piece key -> the furthest full-block end seen inside the piece (tokens from its start)
    per = []
    for req in requests:
        content, prompt = req.content, req.prompt_len
        hit = 0
        if content is not None:
            stats.with_content += 1
            hit = leading_hits(content, seen, block_size, (prompt - 1) // block_size * block_size)
            record(content, seen, block_size, prompt + req.output_len - 1 if outputs else prompt)
        stats.requests += 1
        stats.prompt_tokens += prompt
        stats.cached_tokens += hit
        if keep:
            per.append(hit)
    if keep:
        stats.cached = np.array(per, np.int64)
    return stats


def _pieces(content, limit: int):
    """(key, start, end) of each piece reaching into the first ``limit`` tokens (the reply last, open-ended)."""
    keys, start = content.keys(), 0
    for k, end in enumerate(content.ends):
        if start >= limit:
            return
        yield keys[k], start, end
        start = end
    if start < limit:
        yield keys[-1], start, limit


def leading_hits(content, seen: dict, block_size: int, limit: int) -> int:
    """Tokens in the leading blocks, ending at most at ``limit``, that ``seen`` holds."""
    hit = 0
    for key, start, end in _pieces(content, limit):
        last = min(end, limit) // block_size * block_size  # the last block end inside this piece
        if last <= start:
            continue  # no block ends here: the next piece decides
        covered = start + seen.get(key, 0)
        if covered < last:
            return max(hit, covered // block_size * block_size)
        hit = last
    return hit


def record(content, seen: dict, block_size: int, tokens: int) -> None:
    """Marks the full blocks of the first ``tokens`` tokens as seen."""
    for key, start, end in _pieces(content, tokens):
        last = min(end, tokens) // block_size * block_size
        if last > start and seen.get(key, 0) < last - start:
            seen[key] = last - start

"""Workload columns in chunks: drawn as a run consumes them, with the values one draw of the whole column gives.

numpy's generators draw value by value (every distribution the workloads use: uniform, exponential, gamma,
lognormal, geometric, bounded integers), so ``k`` draws followed by ``m`` give what one draw of ``k + m`` gives;
``tests/test_lazy_columns.py`` checks it for each distribution and chunk sizes down to 1.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import numpy as np

CHUNK = 4_096  # requests drawn at a time; 65,536 peaked 9 MB higher at 100,000 requests, at the same CPU

Draw = Callable[[np.random.Generator, int], np.ndarray]


def check_chunk(size) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"chunk size must be an integer >= 1, got {size!r}")
    return int(size)


def pieces(column, size: int) -> Iterator:
    """A column held whole, handed out ``size`` entries at a time (for what cannot be drawn in chunks)."""
    size = check_chunk(size)
    return (column[a:a + size] for a in range(0, len(column), size))


def drawn_columns(n: int, rng: np.random.Generator, size: int, *draws: Draw) -> Iterator[tuple[np.ndarray, ...]]:
    """Chunks of the columns ``draw(rng, n)``, one per draw, as drawing them whole one after the other would give.

    Each column after the first starts where the one before it would end: that generator state is found now by
    drawing the column before it once, a chunk at a time, and dropping the values (CPU, not memory). ``rng``
    itself is not advanced.
    """
    size = check_chunk(size)
    starts = [copy.deepcopy(rng)]
    for draw in draws[:-1]:
        skip = copy.deepcopy(starts[-1])
        for a in range(0, n, size):
            draw(skip, min(size, n - a))
        starts.append(skip)
    return (tuple(draw(g, min(size, n - a)) for draw, g in zip(draws, starts)) for a in range(0, n, size))

"""d0, d1 of WAIT's iteration time d0 + d1·(KV tokens in the batch), fitted to any batch-time model."""
from __future__ import annotations

import numpy as np

from ...batchtime.base import Batch, BatchTimeModel
from ...batchtime.linear import LinearBatchTime, batch_columns


def wait_batches(max_decodes: int = 256, max_context: int = 2048, max_prompt: int = 512):
    """Decode-dominated batches, where Ao et al. §1.3 says the linear form holds: decode-only batches of
    1..max requests at contexts up to max_context, each also with one short prefill."""
    sizes = sorted({1 << k for k in range(12) if 1 << k <= max_decodes} | {max_decodes})
    contexts = sorted({1 << k for k in range(4, 16) if 1 << k <= max_context} | {max_context})
    for n in sizes:
        for ctx in contexts:
            yield Batch([], [], [ctx] * n)
            yield Batch([min(max_prompt, ctx)], [0], [ctx] * n)


def wait_coefficients(model: BatchTimeModel, max_decodes: int = 256, max_context: int = 2048,
                      max_prompt: int = 512) -> tuple[float, float, object]:
    """(d0, d1, fit report): least squares (relative errors) of ``model`` over :func:`wait_batches`."""
    batches = list(wait_batches(max_decodes, max_context, max_prompt))
    cols = batch_columns(batches)
    cols["duration"] = np.array([model.step_time(b) for b in batches])
    lin, report = LinearBatchTime.fit(cols, terms=("const", "per_context"))
    return lin.coefficients["const"], lin.coefficients["per_context"], report

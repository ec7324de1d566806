"""Cost of one ``step_time`` call per batch-time model: the simulator calls it once per simulated step.

    python benchmarks/bench_batch_time.py
"""
from __future__ import annotations

import time

from llmsched.batchtime import Batch, make_batch_time_model

BATCH = Batch([256], [1024], list(range(500, 564)))  # one prefill chunk and 64 decodes


def us_per_call(model, n: int = 20000) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            model.step_time(BATCH)
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main() -> None:
    print(f"{'model':<34}{'µs/call':>9}")
    for kind, model, gpu in [("roofline", "llama-3-8b", "a100"), ("roofline-staircase", "llama-3-8b", "a100"),
                             ("roofline", "llama-3-70b-tp4", "a100"), ("engine", "llama-2-70b-tp4", "h100"),
                             ("linear", "llama-3-8b", "a100")]:
        m = make_batch_time_model(kind, model, gpu)
        print(f"{kind + ' ' + model + '/' + gpu:<34}{us_per_call(m):>9.2f}")


if __name__ == "__main__":
    main()

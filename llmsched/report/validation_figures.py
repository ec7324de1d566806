"""``llmsched validate-serving``'s figure: the measured and the simulated latency CDFs of each run, side by side."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .sheet import Sheet

METRICS = (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E"))
SIDES = (("real", dict(color="black", linestyle="solid", linewidth=1.5)),
         ("simulated", dict(color="#d62728", linestyle="dashed", linewidth=1.5)))


def plot_validation_cdfs(rows: list[dict], path) -> Path:
    """One row of panels per run (TTFT, TPOT, E2E in ms): each run's ``samples`` (sorted seconds) real and
    simulated, the panel titled with the simulated P50's error (or "not compared" where the run's own figure is not
    comparable)."""
    sheet = Sheet(len(rows), len(METRICS))
    for axes, row in zip(sheet.axes, rows):
        for ax, (metric, name) in zip(axes, METRICS):
            for side, kw in SIDES:
                if row["samples"][side] is None:  # an aggregate report (inference-perf): percentiles, no samples
                    continue
                values = np.asarray(row["samples"][side][metric]) * 1e3
                ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=side, **kw)
            error = row["errors"][metric]["p50"]
            said = "not compared" if error is None else f"P50 {error:+.1f}%"  # e.g. a client's miscounted TPOT
            ax.set_title(f"{row['run']}: {name} ({said})", fontsize=10)
            ax.set_xlabel(f"{name} (ms)")
            ax.set_ylabel("fraction ≤ x")
            ax.set_ylim(0, 1.01)
            ax.grid(True, alpha=0.3)
    sheet.legend()
    return sheet.save(path)

"""``llmsched validate-timing``'s figure: predicted against measured step times."""
from __future__ import annotations

from pathlib import Path

from ..report.sheet import Sheet
from .calibrate import is_calibration


def plot_predicted_vs_measured(pairs: dict, path: Path) -> None:
    """Predicted against measured step time, one panel per batch-time model: colour by split, marker by phase;
    the diagonal solid and ±10% dotted. One legend beside the panels (every panel has the same series)."""
    sheet = Sheet(1, len(pairs), panel=(3.6, 3.6))
    for ax, (kind, items) in zip(sheet.axes[0], pairs.items()):
        for phase, marker in (("prefill", "o"), ("decode", "s"), ("mixed", "^"), ("layer", ".")):
            for split, color in (("calibration", "tab:blue"), ("held-out", "tab:red")):
                sel = [(p.measured, y) for p, y in items if p.phase == phase
                       and ("calibration" if is_calibration(p.dataset, p.model, p.tp) else "held-out") == split]
                if sel:
                    xs, ys = zip(*sel)
                    ax.scatter([x * 1e3 for x in xs], [y * 1e3 for y in ys], s=10, marker=marker, color=color,
                               alpha=0.6, label=f"{phase}, {split}")
        lo = min(min(p.measured, y) for p, y in items) * 1e3
        hi = max(max(p.measured, y) for p, y in items) * 1e3
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.plot([lo, hi], [lo * 1.1, hi * 1.1], "k:", lw=0.6)
        ax.plot([lo, hi], [lo * 0.9, hi * 0.9], "k:", lw=0.6)
        ax.set(xscale="log", yscale="log", xlabel="measured (ms)", ylabel="predicted (ms)", title=kind)
        ax.grid(True, which="major", alpha=0.3)
    sheet.legend(title="phase, split (line: exact, dotted: ±10%)")
    sheet.save(path)

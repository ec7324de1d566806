"""Axis ticks a person reads at a glance: plain numbers on log axes (100, not 10²)."""
from __future__ import annotations

from matplotlib.ticker import FuncFormatter, LogLocator


def plain(v, _pos=None) -> str:
    return f"{v:g}"


def plain_log_ticks(axis, lo: float, hi: float) -> None:
    """Log-axis ticks as plain numbers (100, not 10²), minor ticks at 2x and 5x, labelled within two decades."""
    axis.set_major_formatter(FuncFormatter(plain))
    axis.set_minor_locator(LogLocator(subs=(2, 5)))  # not all eight: a tick is costly, and 2x/5x read as well
    if lo > 0 and hi / lo <= 100:
        axis.set_minor_formatter(FuncFormatter(plain))
    else:
        axis.set_minor_formatter(FuncFormatter(lambda v, p: ""))

"""Per-request and per-step records, run summaries, files and figures.

The plot functions load matplotlib on first use, so importing this package stays cheap.
"""
from .requests import TBT_MISS_TOLERANCE, RequestLog
from .sketch import QuantileSketch
from .steps import StepLog
from .latency_stats import merged_sketch
from .summary import summarize, summary_row
from .writers import format_table, to_jsonable, write_json, write_run, write_table

_PLOTS = ("plot_latency_cdfs", "plot_kv_usage", "plot_sweep")

__all__ = ["RequestLog", "StepLog", "QuantileSketch", "TBT_MISS_TOLERANCE", "summarize", "summary_row",
           "merged_sketch", "write_run", "write_table", "write_json", "format_table", "to_jsonable", *_PLOTS]


def __getattr__(name):
    if name in _PLOTS:
        from . import plots
        return getattr(plots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

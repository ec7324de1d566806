"""Per-request and per-step records, run summaries and files (their figures: ``llmsched.report``)."""
from .requests import TBT_MISS_TOLERANCE, RequestLog
from .sketch import QuantileSketch
from .steps import StepLog
from .latency_stats import merged_sketch
from .summary import summarize, summary_row
from .writers import format_table, to_jsonable, write_json, write_run, write_table

__all__ = ["RequestLog", "StepLog", "QuantileSketch", "TBT_MISS_TOLERANCE", "summarize", "summary_row",
           "merged_sketch", "write_run", "write_table", "write_json", "format_table", "to_jsonable"]

"""The error a trace file that cannot be read as it stands gets (CSV and JSONL readers alike)."""


class TraceError(ValueError):
    """A trace file that cannot be read as it stands."""

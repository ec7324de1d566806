"""A policy's own figures (``Scheduler.stats``) over several replicas: one table for the summary."""
from __future__ import annotations


def summed(parts: list[dict]) -> dict:
    """The replicas' policy figures added key by key (numbers add, tables merge)."""
    out: dict = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict):
                out[key] = summed([out.get(key, {}), value])
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = out.get(key, 0) + value
            else:
                out.setdefault(key, value)
    return out

"""Named length distributions derived from public traces, shipped as small quantile tables.

The tables (presets/*.json) are written by scripts/derive_length_presets.py from the files the user names; each
records its source file, row count, licence and the file's own quantiles, so the shipped figures can be checked.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from llmsched.workload.lengths import QuantileTable

PRESET_DIR = Path(__file__).with_name("presets")


def _catalogue() -> dict[str, dict]:
    presets = {}
    for path in sorted(PRESET_DIR.glob("*.json")):
        with open(path) as f:
            meta = json.load(f)
        presets[meta["name"]] = {"description": meta["description"], "source": meta["source"]["file"],
                                 "rows": meta["source"]["rows"], "licence": meta["source"]["licence"],
                                 "path": path}
    return presets


LENGTH_PRESETS: dict[str, dict] = _catalogue()


@lru_cache(maxsize=None)
def _table(name: str) -> QuantileTable:
    return QuantileTable.load(LENGTH_PRESETS[name]["path"])


def length_preset(name: str) -> QuantileTable:
    """The named preset's length distribution (sharegpt, azure-conv, azure-code, arxiv-summarization, lmsys)."""
    if name not in LENGTH_PRESETS:
        raise ValueError(f"unknown length preset {name!r}; valid names: {', '.join(LENGTH_PRESETS)}")
    return _table(name)

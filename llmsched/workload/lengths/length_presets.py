"""Named length distributions derived from public traces, shipped as small quantile tables.

The tables (presets/*.json) are written by scripts/derive_length_presets.py from the files the user names; each
records its source file, row count, licence and the file's own quantiles, so the shipped figures can be checked.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from llmsched.workload.lengths.distributions import Capped, LengthDist, QuantileTable

PRESET_DIR = Path(__file__).with_name("presets")

# Presets whose source file was built with a cap on prompt+output: sampling the quantile table can pair a long
# prompt with a long output the file never holds, so samples are capped the same way (proportionally, as
# SLAI's generator caps at 8192; Bari et al. §7). Vidur's arXiv summarization file holds no row above 4096 tokens
# (Llama-2's context; 18 rows at exactly 4096): uncapped, 0.86% of the table's draws went past it, up to 4504.
SOURCE_CAPS = {"sharegpt": 8192, "arxiv-summarization": 4096}


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


def length_preset(name: str) -> LengthDist:
    """The named preset's length distribution (sharegpt, azure-conv, azure-code, arxiv-summarization, lmsys)."""
    if name not in LENGTH_PRESETS:
        raise ValueError(f"unknown length preset {name!r}; valid names: {', '.join(LENGTH_PRESETS)} (and "
                         f"--workload shared-prefix, a generator of shared system prompts)")
    table = _table(name)
    cap = SOURCE_CAPS.get(name)
    return Capped(table, cap, how="proportional") if cap else table

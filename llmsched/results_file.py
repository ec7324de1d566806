"""Where a reproduction's numbers land: ``results.json`` in the ``--out`` folder, one format for every command."""
from __future__ import annotations

import json
from pathlib import Path


def write_results(out_dir, data: dict, indent: int = 1) -> Path:
    """Write ``data`` as ``OUT/results.json`` (numpy scalars as floats) and return the path."""
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    target = path / "results.json"
    target.write_text(json.dumps(data, indent=indent, default=float) + "\n")
    return target

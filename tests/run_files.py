"""The files a user gets from ``llmsched simulate --out`` for a run, as text: what the identity tests compare."""
from __future__ import annotations

import json

from llmsched.metrics.writers import write_run


def written_files(result, summary: dict, out) -> dict[str, str]:
    """requests.csv, steps.csv and summary.json (less its wall time) of ``result`` written to ``out``."""
    result.meta = {}
    write_run(result, summary, out)
    files = {name: (out / name).read_text() for name in ("requests.csv", "steps.csv")}
    files["summary.json"] = json.dumps(without_wall_time(json.loads((out / "summary.json").read_text())))
    return files


def without_wall_time(data):
    if isinstance(data, dict):
        return {k: without_wall_time(v) for k, v in data.items() if k != "wall_time"}
    return data

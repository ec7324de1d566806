"""Which file of a real run's folder is its per-request log: the one choice ``validate-serving`` makes for a run
folder and ``--trace`` makes when given the folder itself."""
from __future__ import annotations

from pathlib import Path

# the names a per-request log has: llmsched's captures and engine logs, inference-perf's per-request report,
# AIPerf's per-request export
LOG_NAMES = ("requests.jsonl", "per_request_lifecycle_metrics.json", "profile_export.jsonl")
NOT_LOGS = ("meta.json", "config.json")  # a run folder's engine arguments and model, never its log


def run_log(folder: Path) -> Path:
    """``folder``'s per-request log: the first of LOG_NAMES there, else its one ``*.json`` other than meta.json and
    config.json (a ``vllm bench serve`` result, a GuideLLM report); several candidates or none is an error naming
    them."""
    for name in LOG_NAMES:
        if (folder / name).is_file():
            return folder / name
    benches = [p for p in sorted(folder.glob("*.json")) if p.name not in NOT_LOGS]
    if len(benches) == 1:
        return benches[0]
    found = ", ".join(p.name for p in benches) or "none"
    raise ValueError(f"{folder}: no {' or '.join(LOG_NAMES)}, and {len(benches)} other .json files ({found}); "
                     f"name the log (validate-serving --log NAME; --trace FILE)")

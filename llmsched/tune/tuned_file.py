"""A tuned-parameters file: what `llmsched tune` found best for one scheduler, read back by `capacity`,
`compare`, `plan` (and every command with run options) through ``--tuned FILE``.

The file is JSON: ``scheduler``, its ``scheduler_params``, the ``run`` fields tuned with it (``max_num_seqs``,
``max_num_batched_tokens``) and, for a person, what it was tuned on and the capacities found. Only the first three
change a run; options given on the command line (``--param``, ``--max-num-seqs``) win over the file.
"""
from __future__ import annotations

import json
from pathlib import Path

KIND = "llmsched-tuned"
VERSION = 1


def tuned_record(scheduler: str, scheduler_params: dict, run: dict, **about) -> dict:
    return {"kind": KIND, "version": VERSION, "scheduler": scheduler, "scheduler_params": scheduler_params,
            "run": run, **about}


def read_tuned(path: str | Path) -> dict:
    """The file's record, checked: a scheduler name, a table of its parameters, a table of run fields."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ValueError(f"--tuned {path}: cannot read it ({e.strerror}); give the best.json `llmsched tune` "
                         f"wrote") from None
    except ValueError:
        raise ValueError(f"--tuned {path}: not JSON; give the best.json `llmsched tune` wrote") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise ValueError(f"--tuned {path}: not a tuned-parameters file (no \"kind\": \"{KIND}\"); give the "
                         f"best.json `llmsched tune` wrote")
    if not isinstance(data.get("scheduler"), str):
        raise ValueError(f"--tuned {path}: \"scheduler\" must be a scheduler name")
    for key in ("scheduler_params", "run"):
        if not isinstance(data.get(key, {}), dict):
            raise ValueError(f"--tuned {path}: \"{key}\" must be a table of NAME: VALUE")
    data.setdefault("scheduler_params", {})
    data.setdefault("run", {})
    data["path"] = str(path)
    return data


def write_tuned(path: str | Path, record: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return path

"""Named batch-time profiles: a kind and its parameters stored under a name that ``--batch-time`` takes.

``llmsched validate-serving --calibrate NAME`` writes one (the efficiency terms it fitted on the runs it was given,
with those runs named in the file); the package ships the ones docs/fidelity.md reports, in ``profiles/``. A
name is looked up in ``$LLMSCHED_BATCH_TIME_PROFILES`` (a folder), then ``~/.llmsched/batch-time``, then the
package's own.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

PACKAGE_DIR = Path(__file__).with_name("profiles")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def profile_dirs() -> list[Path]:
    env = os.environ.get("LLMSCHED_BATCH_TIME_PROFILES")
    user = Path(env) if env else Path.home() / ".llmsched" / "batch-time"
    return [user, PACKAGE_DIR]


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"profile name {name!r}: use lower-case letters, digits, '.', '_' and '-' (e.g. "
                         f"rtx-pro-6000-vllm)")
    return name


def load_profile(name: str) -> dict | None:
    """The stored profile called ``name`` (the first folder of :func:`profile_dirs` holding it), or None."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return None
    for folder in profile_dirs():
        path = folder / f"{name}.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except json.JSONDecodeError as e:
                raise ValueError(f"batch-time profile {path}: not valid JSON ({e})") from None
            if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or \
                    not isinstance(data.get("params"), dict):
                raise ValueError(f"batch-time profile {path}: needs \"kind\" (a batch-time kind) and \"params\" "
                                 f"(an object); write it with `llmsched validate-serving --calibrate {name}`")
            return {**data, "path": str(path)}
    return None


def profile_names() -> list[str]:
    names = set()
    for folder in profile_dirs():
        if folder.is_dir():
            names.update(p.stem for p in folder.glob("*.json") if NAME.fullmatch(p.stem))
    return sorted(names)


def save_profile(name: str, payload: dict, folder: Path | None = None) -> Path:
    """Write ``payload`` (with ``kind`` and ``params``) as profile ``name`` into ``folder`` (default the user's)."""
    check_name(name)
    folder = Path(folder) if folder is not None else profile_dirs()[0]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path

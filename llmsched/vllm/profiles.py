"""Saved step-time profiles: a fitted ``LinearBatchTime`` JSON under ``$LLMSCHED_PROFILES`` (default
``~/.llmsched/profiles``), found by name. The simulator loads one with
``--batch-time linear --bt-param file=PATH`` (``profile_path(name)`` gives PATH)."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ..batchtime.linear import LinearBatchTime

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def profiles_dir() -> Path:
    return Path(os.environ.get("LLMSCHED_PROFILES") or Path.home() / ".llmsched" / "profiles")


def profile_path(name: str) -> Path:
    """The file of profile ``name``; a path to a .json file is taken as it is."""
    if name.endswith(".json") or os.sep in name:
        return Path(name)
    if not NAME.match(name):
        raise ValueError(f"profile name {name!r}: use letters, digits, '.', '_' and '-' (or give a .json path)")
    return profiles_dir() / f"{name}.json"


def load_profile(name: str) -> LinearBatchTime:
    path = profile_path(name)
    if not path.exists():
        raise ValueError(f"profile {name!r} not found at {path}; make it with `llmsched profile --backend vllm "
                         f"--model DIR --name {name}`")
    return LinearBatchTime.load(path)

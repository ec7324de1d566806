"""Which modules the install compiles with Cython, and the guard that keeps a compiled module from hiding its source.

The Python sources are the reference. ``setup.py`` compiles the simulator's hot modules when Cython and a C
compiler are there (``LLMSCHED_NO_COMPILE=1`` skips it); a ``.pxd`` file beside some of them declares their
classes as extension types with object fields (the same values in struct slots instead of dict or slot lookups), so
a compiled run computes exactly what the source computes (tests/test_compiled.py compares the files byte for byte)
in about two thirds of the CPU time.

Python imports an extension module in preference to its ``.py``, so an edited source would be silently ignored until
the next build. The build records each compiled module's source hash (``compiled.json``); at import, if any source
differs, or extension files lie there without a record, every compiled module is imported from its source instead
(they declare each other's types: all or none) and a warning says how to rebuild. ``LLMSCHED_PURE=1`` always imports
the sources. Standard library only: ``setup.py`` reads ``MODULES`` before anything is installed.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

MODULES = (
    "llmsched.request",
    "llmsched.engine.kv_cache",
    "llmsched.engine.decode_group",
    "llmsched.engine.decode_run",
    "llmsched.engine.group_steps",
    "llmsched.engine.plan",
    "llmsched.engine.plan_check",
    "llmsched.engine.preemption",
    "llmsched.engine.replica",
    "llmsched.engine.tokens",
    "llmsched.engine.view",
    "llmsched.batchtime.roofline",
    "llmsched.metrics.requests",
    "llmsched.metrics.steps",
    "llmsched.routers",
    "llmsched.sim.lanes",
    "llmsched.sim.simulator",
    "llmsched.workload.workload",
    "llmsched.schedulers.base",
    "llmsched.schedulers.decode_pass",
    "llmsched.schedulers.fcfs",
    "llmsched.schedulers.sarathi",
    "llmsched.schedulers.vllm",
    "llmsched.schedulers.vllm_chunked",
    "llmsched.schedulers.watermark",
)
MANIFEST = "compiled.json"
ROOT = Path(__file__).resolve().parent  # the llmsched package directory


def sources(module: str, root: Path = ROOT) -> list[Path]:
    """The files a module is compiled from: its ``.py`` and, if there is one, its ``.pxd``."""
    base = root.joinpath(*module.split(".")[1:])
    pxd = base.with_suffix(".pxd")
    return [base.with_suffix(".py"), *([pxd] if pxd.exists() else [])]


def digest(module: str, root: Path = ROOT) -> str:
    h = hashlib.sha256()
    for path in sources(module, root):
        h.update(path.read_bytes())
    return h.hexdigest()


def extension(module: str, root: Path = ROOT) -> Path | None:
    """The compiled file of ``module`` lying in the package, if any (whatever built it)."""
    base = root.joinpath(*module.split(".")[1:])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = base.with_name(base.name + suffix)
        if path.exists():
            return path
    return None


def write_manifest(package_dir: Path, root: Path = ROOT) -> None:
    """Record the source hash of every module under ``root`` in ``package_dir`` (where the build put them)."""
    record = {module: digest(module, root) for module in MODULES}
    (package_dir / MANIFEST).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def state(root: Path = ROOT, environ=os.environ) -> tuple[str, str]:
    """("compiled" | "pure", why): what ``guard`` decides for the package at ``root``."""
    if environ.get("LLMSCHED_PURE"):
        return "pure", "LLMSCHED_PURE is set"
    manifest = root / MANIFEST
    if not manifest.exists():
        if any(extension(m, root) for m in MODULES):
            return "pure", f"compiled modules lie in {root} without {MANIFEST} (not built by setup.py)"
        return "pure", "not compiled (no Cython or no C compiler at install, or LLMSCHED_NO_COMPILE=1)"
    record = json.loads(manifest.read_text())
    changed = [m for m in MODULES if record.get(m) != digest(m, root)]
    if changed:
        return "pure", f"source changed since the build: {', '.join(changed)}"
    missing = [m for m in MODULES if extension(m, root) is None]
    if missing:
        return "pure", f"not every module compiled ({', '.join(missing)} missing): rebuild"
    return "compiled", "built from these sources"


class SourceFirst(importlib.abc.MetaPathFinder):
    """Imports the listed modules from their ``.py`` even where an extension module lies beside it."""

    def __init__(self, modules, root: Path):
        self.modules = frozenset(modules)
        self.root = root

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.modules:
            return None
        return importlib.util.spec_from_file_location(fullname, sources(fullname, self.root)[0])


STATE: tuple[str, str] = ("pure", "guard not run")


def guard() -> None:
    """Run by ``llmsched/__init__`` before any compiled module can load: sources win unless the build is current."""
    global STATE
    STATE = state()
    kind, why = STATE
    if kind == "compiled":
        return
    sys.meta_path.insert(0, SourceFirst(MODULES, ROOT))
    if any(extension(m) for m in MODULES) and not os.environ.get("LLMSCHED_PURE"):
        warnings.warn(f"llmsched: running the Python sources, not the compiled modules: {why}; rebuild with "
                      f"`pip install -e . --no-deps` or scripts/install.sh, or set LLMSCHED_PURE=1 to silence this",
                      stacklevel=2)

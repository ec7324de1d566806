"""Which modules the install compiles with Cython, and the guard that keeps a compiled module from hiding its source.

The Python sources are the reference. ``setup.py`` compiles the simulator's hot modules when Cython and a C
compiler are there (``LLMSCHED_NO_COMPILE=1`` skips it); Cython's generated C goes to ``build/cython``, never beside
the sources. A ``.pxd`` file beside some modules declares their classes as extension types with object fields (the
same values in struct slots instead of dict or slot lookups), so a compiled run computes exactly what the source
computes (tests/test_compiled.py compares the files byte for byte) in about two thirds of the CPU time.

Python imports an extension module in preference to its ``.py``, so an edited source would be silently ignored until
the next build. The build records each compiled module's source hash (``compiled.json``), with each source file's
size and modification time: at import a file whose size and time are those recorded is taken as unchanged without
reading it (every start pays for this check; hashing the sources was a tenth of a simulate's start-up), any other is
hashed. A module whose source (``.py`` or ``.pxd``) changed since the build, or whose extension is missing, is
imported from its source,
and so is every module whose declarations ``cimport`` it (their compiled code relies on its struct layout); the
others stay compiled, and a warning names the modules running from source and how to rebuild. Extension files
without a record, or ``LLMSCHED_PURE=1``, mean every module runs from source. Standard library only: ``setup.py``
reads ``MODULES`` before anything is installed.

What is compiled is what the benchmarks time (docs/simulator.md, "Compiled modules"): the request, the replica and
its KV/decode-group machinery, the view, the step and request logs, the event loop and lanes, the fleet loop and a
disaggregated request's modules, the roofline and vLLM v1's terms around it, the workload source and its client
sends, the routers and the baseline policies with their shared passes. The paper policies are not. Editing
a compiled policy runs that module (no other module cimports a policy's declarations) from source and leaves the
rest compiled; ``benchmarks/bench_simulator.py --per-module`` measures what each module's compilation earns.
"""
from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import warnings
from pathlib import Path

MODULES = (
    "llmsched.request",
    "llmsched.engine.kv_cache",
    "llmsched.engine.kv_network",
    "llmsched.engine.kv_tiers",
    "llmsched.engine.kv_transfer",
    "llmsched.engine.decode_group",
    "llmsched.engine.decode_run",
    "llmsched.engine.group_steps",
    "llmsched.engine.plan",
    "llmsched.engine.plan_check",
    "llmsched.engine.remote_kv",
    "llmsched.engine.preemption",
    "llmsched.engine.replica",
    "llmsched.engine.ring",
    "llmsched.engine.step_clock",
    "llmsched.engine.step_counters",
    "llmsched.engine.tier_store",
    "llmsched.engine.tokens",
    "llmsched.engine.view",
    "llmsched.batchtime.roofline",
    "llmsched.batchtime.vllm_v1",
    "llmsched.metrics.requests",
    "llmsched.metrics.steps",
    "llmsched.routing.simple",
    "llmsched.routing.least_loaded",
    "llmsched.routing.pab",
    "llmsched.routing.vllm_dp",
    "llmsched.fleet.deciders",
    "llmsched.fleet.disagg",
    "llmsched.fleet.kv_transfers",
    "llmsched.fleet.members",
    "llmsched.fleet.state",
    "llmsched.sim.fleet_loop",
    "llmsched.sim.lanes",
    "llmsched.sim.simulator",
    "llmsched.workload.client_sends",
    "llmsched.workload.workload",
    "llmsched.schedulers.base",
    "llmsched.schedulers.decode_pass",
    "llmsched.schedulers.fcfs",
    "llmsched.schedulers.running_first",
    "llmsched.schedulers.sarathi",
    "llmsched.schedulers.vllm",
    "llmsched.schedulers.vllm_chunked",
    "llmsched.schedulers.watermark",
)
MANIFEST = "compiled.json"
ROOT = Path(__file__).resolve().parent  # the llmsched package directory
CIMPORT = re.compile(r"^\s*(?:from\s+(llmsched(?:\.\w+)+)\s+cimport|cimport\s+(llmsched(?:\.\w+)+))", re.M)


def sources(module: str, root: Path = ROOT) -> list[Path]:
    """The files a module is compiled from: its ``.py`` and, if there is one, its ``.pxd``."""
    return [Path(path) for path in source_files(module, root)]


def source_files(module: str, root: Path = ROOT) -> list[str]:
    """``sources`` as strings (os.path: every start checks the build, and pathlib would be most of that)."""
    base = os.path.join(root, *module.split(".")[1:])
    pxd = base + ".pxd"
    return [base + ".py", pxd] if os.path.exists(pxd) else [base + ".py"]


def digest(module: str, root: Path = ROOT) -> str:
    h = hashlib.sha256()
    for path in source_files(module, root):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def signature(module: str, root: Path = ROOT) -> list[list[int]]:
    """[size, modification time in ns] of each file ``module`` is compiled from."""
    out = []
    for path in source_files(module, root):
        st = os.stat(path)
        out.append([st.st_size, st.st_mtime_ns])
    return out


def current(module: str, entry, root: Path = ROOT) -> bool:
    """Whether ``module``'s sources are those its record ``entry`` (from ``source_record``) was taken of."""
    if isinstance(entry, dict):
        return entry.get("stat") == signature(module, root) or entry.get("sha256") == digest(module, root)
    return entry == digest(module, root)  # a record of hashes alone (an older build)


def extension(module: str, root: Path = ROOT) -> Path | None:
    """The compiled file of ``module`` lying in the package, if any (whatever built it)."""
    base = os.path.join(root, *module.split(".")[1:])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.exists(base + suffix):
            return Path(base + suffix)
    return None


def cimports(module: str, root: Path = ROOT) -> set[str]:
    """The compiled modules whose declarations ``module``'s own ``.pxd`` cimports."""
    files = sources(module, root)[1:]
    found = {a or b for pxd in files for a, b in CIMPORT.findall(pxd.read_text())}
    return found & set(MODULES)


def dependents(stale: set[str], root: Path = ROOT) -> set[str]:
    """``stale`` and every module whose declarations cimport one of them, directly or through others."""
    out = set(stale)
    grew = True
    while grew:
        grew = False
        for m in MODULES:
            if m not in out and cimports(m, root) & out:
                out.add(m)
                grew = True
    return out


def source_record(root: Path = ROOT) -> dict[str, dict]:
    """The source hash and file signatures of every compiled module, taken when Cython reads the sources."""
    return {module: {"sha256": digest(module, root), "stat": signature(module, root)} for module in MODULES}


def write_manifest(package_dir: Path, record: dict[str, dict]) -> None:
    """Write ``record`` (``source_record`` taken before translating) in ``package_dir``, where the build put the
    modules: a source edited while the build ran then reads as changed, not as built."""
    (package_dir / MANIFEST).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def plan(root: Path = ROOT, environ=os.environ) -> tuple[str, str, frozenset[str]]:
    """(kind, why, modules to import from source): kind is "compiled" (all built and current), "partial" (the
    modules listed run from source, the rest compiled) or "pure" (every module from source)."""
    everything = frozenset(MODULES)
    if environ.get("LLMSCHED_PURE"):
        return "pure", "LLMSCHED_PURE is set", everything
    manifest = root / MANIFEST
    if not manifest.exists():
        if any(extension(m, root) for m in MODULES):
            return "pure", f"compiled modules lie in {root} without {MANIFEST} (not built by setup.py)", everything
        return "pure", "not compiled (no Cython or no C compiler at install, or LLMSCHED_NO_COMPILE=1)", everything
    record = json.loads(manifest.read_text())
    changed = {m for m in MODULES if not current(m, record.get(m), root)}
    missing = {m for m in MODULES if extension(m, root) is None}
    if not changed and not missing:
        return "compiled", "built from these sources", frozenset()
    source = dependents(changed | missing, root)
    if source == everything:
        return "pure", _reasons(changed, missing, source), everything
    return "partial", _reasons(changed, missing, source), frozenset(source)


def _reasons(changed: set[str], missing: set[str], source: set[str]) -> str:
    parts = []
    if changed:
        parts.append(f"source changed since the build: {', '.join(sorted(changed))}")
    if missing:
        parts.append(f"not compiled ({', '.join(sorted(missing))} missing)")
    rest = source - changed - missing
    if rest:
        parts.append(f"their declarations' dependents run from source too: {', '.join(sorted(rest))}")
    return "; ".join(parts)


def state(root: Path = ROOT, environ=os.environ) -> tuple[str, str]:
    """("compiled" | "partial" | "pure", why): what ``guard`` decides for the package at ``root``."""
    kind, why, _ = plan(root, environ)
    return kind, why


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
FROM_SOURCE: frozenset[str] = frozenset(MODULES)


def guard() -> None:
    """Run by ``llmsched/__init__`` before any compiled module can load: a module's source wins over a build that
    is not current for it."""
    global STATE, FROM_SOURCE
    kind, why, FROM_SOURCE = plan()
    STATE = (kind, why)
    if kind == "compiled":
        return
    sys.meta_path.insert(0, SourceFirst(FROM_SOURCE, ROOT))
    if any(extension(m) for m in MODULES) and not os.environ.get("LLMSCHED_PURE"):
        which = "every compiled module" if kind == "pure" else f"{len(FROM_SOURCE)} of {len(MODULES)} modules"
        warnings.warn(f"llmsched: running {which} from source, not the build: {why}; rebuild with "
                      f"`pip install -e . --no-deps` or scripts/install.sh, or set LLMSCHED_PURE=1 to silence this",
                      stacklevel=2)

"""The compiled install computes what the sources compute, and never hides an edited source (llmsched/compiled.py).

The identity test runs every registered scheduler on the fast-forward matrix's workloads twice, in fresh processes,
compiled and with ``LLMSCHED_PURE=1``, and compares the files a user gets byte for byte. It skips when this
checkout is not compiled (a fresh clone on PYTHONPATH, a pure install); ``LLMSCHED_REQUIRE_COMPILED=1`` (CI, which
installs the README's way) makes that a failure.
"""
from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llmsched import compiled

TESTS = Path(__file__).resolve().parent

CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import llmsched.compiled
import llmsched.engine.replica
from llmsched.experiment import RunConfig
from test_fast_forward import WORKLOADS, _cases, _files
from pathlib import Path
out = Path(sys.argv[1])
workloads = {**WORKLOADS, "replicas-lanes": dict(workload="azure-conv", rate=20.0, num_requests=80, replicas=3,
                                                 router="round-robin")}
cases = [*_cases(), *((name, "replicas-lanes") for name in ("sarathi", "vllm-chunked", "vllm", "fcfs"))]
for name, key in cases:
    files = _files(RunConfig(scheduler=name, oracle=True, seed=5, **workloads[key]), out, f"{name}-{key}")
    (out / f"{name}-{key}.json").write_text(json.dumps(files))
# KV tiers below a small GPU cache (engine/tier_store.py's typed segments): host-tier evictions alone, then loads too
tiers = (("vllm", "0.5GiB"), ("vllm", "0.7GiB"), ("lmcache", "0.7GiB"))
for mode, size in tiers:
    cfg = RunConfig(scheduler="vllm-chunked", workload="shared-prefix", rate=20.0, num_requests=300, num_blocks=400,
                    kv_offload=f"cpu:{size}", kv_offload_mode=mode, seed=5)
    (out / f"tiers-{mode}-{size}.json").write_text(json.dumps(_files(cfg, out, f"tiers-{mode}-{size}")))
# fleets in the fleet loop (sim/fleet_loop.py): disaggregated, and scaled while it runs
fleets = {"fleet-1P1D": dict(disaggregate="1P1D", workload="azure-code", rate=4.0, num_requests=200),
          "fleet-2P1D-llm-d": dict(disaggregate="2P1D", pd_decider="llm-d", workload="sharegpt", rate=6.0,
                                   num_requests=200),
          "fleet-autoscaled": dict(replicas=1, autoscaler="hpa", cold_start=5.0, workload="azure-conv", rate=8.0,
                                   num_requests=600)}
for name, fields in fleets.items():
    cfg = RunConfig(scheduler="sarathi", seed=5, **fields)
    (out / f"{name}.json").write_text(json.dumps(_files(cfg, out, name)))
print(json.dumps({"state": llmsched.compiled.STATE, "replica": llmsched.engine.replica.__file__,
                  "cases": len(cases) + len(tiers) + len(fleets)}))
"""


def _run(out: Path, pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LLMSCHED_PURE"}
    if pure:
        env["LLMSCHED_PURE"] = "1"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", CHILD, str(out), str(TESTS)], env=env, capture_output=True,
                          text=True, cwd=out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_compiled_runs_are_identical_to_the_sources(tmp_path):
    kind, why = compiled.state()
    if kind != "compiled":
        if os.environ.get("LLMSCHED_REQUIRE_COMPILED"):
            pytest.fail(f"LLMSCHED_REQUIRE_COMPILED is set but llmsched is not compiled: {why}")
        pytest.skip(f"llmsched is not compiled here: {why}")
    fast = _run(tmp_path / "compiled", pure=False)
    slow = _run(tmp_path / "pure", pure=True)
    assert fast["state"][0] == "compiled" and not fast["replica"].endswith(".py")
    assert slow["state"][0] == "pure" and slow["replica"].endswith(".py")
    names = sorted(p.name for p in (tmp_path / "pure").glob("*.json"))
    assert len(names) == slow["cases"] > 100
    for name in names:
        a = json.loads((tmp_path / "compiled" / name).read_text())
        b = json.loads((tmp_path / "pure" / name).read_text())
        assert a.keys() == b.keys(), name
        for key in b:
            assert a[key] == b[key], f"{name}: {key} differs between the compiled and the pure run"


@pytest.fixture
def package(tmp_path):
    """A copy of the compiled modules' sources, laid out as the package is, with a current record."""
    root = tmp_path / "llmsched"
    for module in compiled.MODULES:
        for path in compiled.sources(module):
            target = root / path.relative_to(compiled.ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    return root


def _built(root: Path) -> None:
    """Pretend the build ran: an (empty) extension file per module and the record of their sources."""
    import importlib.machinery
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for module in compiled.MODULES:
        py = compiled.sources(module, root)[0]
        py.with_name(py.stem + suffix).touch()
    compiled.write_manifest(root, compiled.source_record(root))


def test_a_current_build_is_used(package):
    _built(package)
    assert compiled.state(package, environ={}) == ("compiled", "built from these sources")


def test_no_build_means_the_sources(package):
    kind, why = compiled.state(package, environ={})
    assert kind == "pure" and "not compiled" in why


def test_an_edited_source_runs_alone_from_source(package):
    """Editing one module runs that module from source and leaves the rest compiled."""
    _built(package)
    py = compiled.sources("llmsched.sim.simulator", package)[0]
    py.write_text(py.read_text() + "\n# edited\n")
    kind, why, source = compiled.plan(package, environ={})
    assert kind == "partial" and source == {"llmsched.sim.simulator"}
    assert "llmsched.sim.simulator" in why and "llmsched.request" not in why


def test_an_edited_declaration_takes_its_dependents_along(package):
    """The view's, the decode-group path's, the group fast-forward's, the received requests' and the fleet loop's
    declarations cimport the replica's: a replica running from source takes them with it (the group path's and
    the replica's cimport each other)."""
    _built(package)
    dependents = {"llmsched.engine.view", "llmsched.engine.group_steps", "llmsched.engine.decode_run",
                  "llmsched.engine.remote_kv", "llmsched.sim.fleet_loop"}
    for module in dependents:
        assert "llmsched.engine.replica" in compiled.cimports(module, package)
    pxd = compiled.sources("llmsched.engine.replica", package)[1]
    assert pxd.suffix == ".pxd"
    pxd.write_text(pxd.read_text() + "\n")
    kind, why, source = compiled.plan(package, environ={})
    assert kind == "partial" and source == {"llmsched.engine.replica"} | dependents
    assert "dependents" in why


def test_a_missing_extension_runs_from_source(package):
    _built(package)
    compiled.extension("llmsched.sim.simulator", package).unlink()
    kind, why, source = compiled.plan(package, environ={})
    assert kind == "partial" and source == {"llmsched.sim.simulator"} and "missing" in why


def test_every_module_changed_means_pure(package):
    _built(package)
    for module in compiled.MODULES:
        py = compiled.sources(module, package)[0]
        py.write_text(py.read_text() + "\n# edited\n")
    assert compiled.state(package, environ={})[0] == "pure"


def test_extensions_without_a_record_are_not_used(package):
    _built(package)
    (package / compiled.MANIFEST).unlink()
    kind, why = compiled.state(package, environ={})
    assert kind == "pure" and compiled.MANIFEST in why


def test_llmsched_pure_forces_the_sources(package):
    _built(package)
    assert compiled.state(package, environ={"LLMSCHED_PURE": "1"})[0] == "pure"


def test_the_finder_imports_the_source_beside_an_extension(package):
    _built(package)
    spec = compiled.SourceFirst(compiled.MODULES, package).find_spec("llmsched.engine.replica")
    assert spec.origin == str(package / "engine" / "replica.py")
    assert compiled.SourceFirst(compiled.MODULES, package).find_spec("llmsched.cli") is None


def test_every_declared_class_belongs_to_a_compiled_module():
    """A .pxd beside a module the build does not compile would declare nothing; one for a module that is not in
    MODULES would be a typo in either list."""
    declared = {p for p in compiled.ROOT.rglob("*.pxd")}
    used = {p for m in compiled.MODULES for p in compiled.sources(m)[1:]}
    assert declared == used and len(used) >= 6


def _declared(module: str) -> dict[str, set[str]]:
    """Fields each class of ``module``'s .pxd declares."""
    fields: dict[str, set[str]] = {}
    current = None
    for line in compiled.sources(module)[1].read_text().splitlines():
        if m := re.match(r"cdef class (\w+)", line):
            current = fields.setdefault(m.group(1), set())
        elif m := re.match(r"\s+cdef public \w+ (\w+)$", line):
            current.add(m.group(1))
    return fields


DECLARED = [m for m in compiled.MODULES if len(compiled.sources(m)) == 2]


@pytest.mark.parametrize("module", DECLARED)
def test_declarations_match_the_classes(module):
    """A field the .py sets but the .pxd does not declare would be an AttributeError only once compiled."""
    import importlib
    source = compiled.sources(module)[0].read_text()
    for name, fields in _declared(module).items():
        cls = getattr(importlib.import_module(module), name)
        if "__slots__" in cls.__dict__:
            assert set(cls.__slots__) == fields, f"{module}.{name}: __slots__ and the .pxd differ"
        else:  # Replica and its base: every attribute their methods set, declared on the class or a base
            inherited = set().union(*(_declared(base.__module__).get(base.__name__, set())
                                      for base in cls.__mro__[1:] if base.__module__ in DECLARED))
            body = source[source.index(f"class {name}"):]
            assert set(re.findall(r"self\.(\w+) *(?::[^=\n]*)?= ", body)) <= fields | inherited, f"{module}.{name}"


def test_no_generated_c_beside_the_sources():
    """The build writes Cython's C into build/cython: the package holds sources (and, once built, extensions)."""
    assert not list(compiled.ROOT.rglob("*.c"))


def test_an_edited_module_in_a_real_build_runs_from_source_alone(tmp_path):
    """In a fresh process, with this checkout's build: a changed record for one module (as an edit makes it)
    imports that module from its .py and keeps the others compiled."""
    kind, why = compiled.state()
    if kind != "compiled":
        pytest.skip(f"llmsched is not compiled here: {why}")
    child = r"""
import importlib.abc, json, sys
import llmsched.compiled as c
real, real_stat = c.digest, c.signature
c.digest = lambda m, root=c.ROOT: "edited" if m == "llmsched.sim.simulator" else real(m, root)
c.signature = lambda m, root=c.ROOT: [] if m == "llmsched.sim.simulator" else real_stat(m, root)
c.guard()
import llmsched.sim.simulator, llmsched.engine.replica
print(json.dumps([c.STATE[0], llmsched.sim.simulator.__file__, llmsched.engine.replica.__file__]))
"""
    env = {k: v for k, v in os.environ.items() if k != "LLMSCHED_PURE"}
    env["PYTHONWARNINGS"] = "ignore"
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kind, simulator, replica = json.loads(proc.stdout.strip().splitlines()[-1])
    assert kind == "partial" and simulator.endswith(".py") and not replica.endswith(".py")


def test_a_source_with_its_recorded_size_and_time_is_not_read(package, monkeypatch):
    """Every start checks the build: files whose size and modification time are those recorded are not hashed."""
    _built(package)

    def unread(module, root=compiled.ROOT):
        raise AssertionError(f"{module} hashed")

    monkeypatch.setattr(compiled, "digest", unread)
    assert compiled.state(package, environ={})[0] == "compiled"


def test_a_touched_source_is_hashed_and_an_edit_of_the_same_size_is_found(package):
    _built(package)
    py = compiled.sources("llmsched.engine.kv_cache", package)[0]
    os.utime(py, ns=(py.stat().st_atime_ns, py.stat().st_mtime_ns + 10**9))  # touched: same content
    assert compiled.state(package, environ={})[0] == "compiled"
    text = py.read_text()
    py.write_text(text.replace("free", "fre3", 1))  # same size, new content
    kind, why, source = compiled.plan(package, environ={})
    assert kind == "partial" and "llmsched.engine.kv_cache" in source


def test_a_record_of_hashes_alone_still_decides(package):
    """A build recorded before file signatures were: its hashes are compared as before."""
    _built(package)
    record = {m: entry["sha256"] for m, entry in json.loads((package / compiled.MANIFEST).read_text()).items()}
    (package / compiled.MANIFEST).write_text(json.dumps(record))
    assert compiled.state(package, environ={})[0] == "compiled"

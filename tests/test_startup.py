"""A run imports what it uses: its own policy's module and not the others, no prefix cache unless it caches, no
tuner unless it is given tuned settings. Start-up is a good part of a short command (a simulate of the Azure
conversation trace spends about a sixth of its CPU time before the first event), and each module imported costs it.
"""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from llmsched.schedulers import registry

CHILD = r"""
import json, sys
from llmsched.cli import main
main(sys.argv[1:] + ["--no-progress"])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("llmsched"))))
"""


def modules_after(tmp_path, *argv) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv, "--out", str(tmp_path / "run")], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("name", ["vllm-chunked", "sarathi", "wait"])
def test_a_run_imports_its_own_policy_only(name, tmp_path):
    loaded = modules_after(tmp_path, "simulate", "--scheduler", name, "--workload", "sharegpt", "--rate", "2",
                           "--num-requests", "5")
    own = registry.MODULE_OF[name]
    assert own in loaded
    others = {module for module in registry.BUILTIN if module != own}
    assert not loaded & others, f"{name}'s run imported {sorted(loaded & others)}"
    assert not {"llmsched.engine.prefix_cache", "llmsched.tune.tuned_file"} & loaded


def test_the_table_names_what_each_module_registers():
    for module in registry.BUILTIN:
        importlib.import_module(module)
    registered: dict[str, set[str]] = {}
    for name, (cls, _, _) in registry._REGISTRY.items():
        if cls.__module__ in registry.BUILTIN:
            registered.setdefault(cls.__module__, set()).add(name)
    assert registered == {module: set(names) for module, names in registry.BUILTIN.items()}


def test_names_are_listed_without_importing_and_an_unknown_one_is_refused():
    assert set(registry.MODULE_OF) <= set(registry.scheduler_names())
    with pytest.raises(ValueError, match="unknown scheduler 'sarathi-fast'.*sarathi-spf"):
        registry.create_scheduler("sarathi-fast")


def test_a_builtin_name_cannot_be_taken_by_another_class():
    from dataclasses import dataclass

    from llmsched.schedulers.base import Scheduler

    with pytest.raises(ValueError, match="registered twice"):
        @registry.register
        @dataclass
        class Impostor(Scheduler):
            name = "orca"

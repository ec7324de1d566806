"""The replica's state has one owner per concern: nothing outside a component writes its fields.

A replica (engine/replica.py) holds its queues and configuration itself and three components: the clock and the
step in flight (engine/step_clock.py), the step and preemption counts (engine/step_counters.py) and the decode-group
path (engine/group_steps.py). Each of these classes writes only its own fields, on ``self``, in its own module; every
other module (the simulator, lanes, the fast-forward of decode runs, preemption, the view) reads them or calls the
owner's methods. The KV manager's block state has its own such test (tests/test_kv_cache.py).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import llmsched
from llmsched.batchtime.registry import make_batch_time_model
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.request import Request
from llmsched.schedulers.registry import create_scheduler

ROOT = Path(llmsched.__file__).parent
OWNERS = {  # module -> the class it defines, whose fields only it writes
    "engine/replica.py": "Replica",
    "engine/step_clock.py": "StepClock",
    "engine/step_counters.py": "StepCounters",
    "engine/group_steps.py": "GroupSteps",
}
COMPONENTS = ("clock", "counters", "groups")  # the replica's fields that hold its components
REPLICA_NAMES = {"rep", "replica", "x", "self._r", "_r"}  # what the sources call a replica they hold


def declared(module: str) -> set[str]:
    """The fields ``module``'s class declares (its .pxd: the compiled build refuses any other)."""
    pxd = (ROOT / module).with_suffix(".pxd")
    return set(re.findall(r"^\s+cdef public \w+ (\w+)$", pxd.read_text(), re.M))


FIELDS = {module: declared(module) for module in OWNERS}
ALL_FIELDS = set().union(*FIELDS.values())


def _targets(node):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    stack = list(targets)
    while stack:
        t = stack.pop()
        if isinstance(t, (ast.Tuple, ast.List, ast.Starred)):
            stack.extend(t.elts if not isinstance(t, ast.Starred) else [t.value])
        elif isinstance(t, ast.Attribute):
            yield t


def foreign_writes(tree, module: str):
    """(line, target) of every assignment in ``module`` to a replica's or a component's field that its owner does
    not make: ``X.field`` where X names a replica (``rep``, ``replica``, ``self.rep``, ...) or a component
    (``clock``, ``rep.counters``, ...), and ``self.field`` in an owner's module for a field that is not its own."""
    own = FIELDS.get(module)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            continue
        for t in _targets(node):
            if t.attr not in ALL_FIELDS:
                continue
            base = ast.unparse(t.value)
            last = base.rsplit(".", 1)[-1]
            if base == "self":
                if own is not None and t.attr not in own:
                    yield node.lineno, ast.unparse(t)
            elif base in REPLICA_NAMES or last == "rep" or last in COMPONENTS:
                yield node.lineno, ast.unparse(t)


def test_no_replica_attribute_is_written_outside_its_owner():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, target in foreign_writes(ast.parse(path.read_text()), rel):
            found.append(f"{rel}:{line}: {target}")
    assert not found, "a replica's state written outside its owner:\n" + "\n".join(found)


def test_the_write_finder_sees_the_forms_used():
    code = ("rep.now = 1\nrep.clock.step_end = 2\nself.rep.completed = []\nx.busy_time += 3\n"
            "a, rep.num_steps = 1, 2\ncounters.num_steps += 1\nself.now = 4\nself.waiting = []\n"
            "view.now = 5\nr.num_computed = 6\n")
    assert [t for _, t in foreign_writes(ast.parse(code), "engine/replica.py")] == [
        "rep.now", "rep.clock.step_end", "self.rep.completed", "x.busy_time", "rep.num_steps",
        "counters.num_steps", "self.now"]
    assert [t for _, t in foreign_writes(ast.parse("self.now = 1\nself.waiting = 2\n"), "sim/lanes.py")] == []


def test_every_field_has_one_owner():
    """A field name declared by two of the classes would leave the finder unable to tell whose write it sees."""
    seen: dict[str, str] = {}
    for module, fields in FIELDS.items():
        for name in fields:
            assert name not in seen, f"{name} is declared by {seen[name]} and {module}"
            seen[name] = module
    assert {"now", "step_end", "plan"} <= FIELDS["engine/step_clock.py"]
    assert {"num_steps", "busy_time", "num_preemptions"} <= FIELDS["engine/step_counters.py"]
    assert {"group", "steady", "group_step"} <= FIELDS["engine/group_steps.py"]


def _replica(name="sarathi"):
    config = ReplicaConfig(num_blocks=200, block_size=16, check_invariants=True)
    return Replica(0, create_scheduler(name), make_batch_time_model("roofline", "llama-3-8b", "a100"), config)


@pytest.mark.parametrize("name", ["now", "busy", "step_end", "num_steps", "busy_time", "num_preemptions", "group"])
def test_what_the_run_reads_cannot_be_written_on_the_replica(name):
    """The replica shows its components' state read-only: a caller that needs to change it calls their owner."""
    rep = _replica()
    with pytest.raises(AttributeError):
        setattr(rep, name, getattr(rep, name))


def test_the_replica_reads_its_components():
    rep = _replica()
    for i in range(4):
        rep.add(Request(i, 0.0, 100 + 10 * i, 20), 0.0)
    t = 0.0
    while rep.waiting or rep.running:
        d = rep.start_step(t)
        assert rep.busy and rep.step_end == t + d and rep.plan is rep.clock.plan
        rep.end_step(t + d)
        t += d
    assert rep.num_steps == rep.counters.num_steps == 20 and rep.now == rep.clock.now == t
    assert rep.busy_time == pytest.approx(t) and len(rep.take_completed()) == 4 and rep.completed == []

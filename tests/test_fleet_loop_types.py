"""The fleet loop and a disaggregated request's modules compile to declared types (their .pxd files): a compiled
build whose declarations stopped applying would still compute the same files, only as slowly as before, so this
checks the declarations themselves. A pure run checks that the loop's handlers are plain methods of one class."""
from __future__ import annotations

import pytest

from llmsched import compiled
from llmsched.engine import kv_network, remote_kv
from llmsched.fleet import disagg, kv_transfers, members, state
from llmsched.sim import fleet_loop

C_ONLY = ("push", "next_event", "leave", "start_transfers", "push_transfer", "settle_transfers", "wake_or_start",
          "empty", "drain", "start", "admit_held", "enter", "step_ended")  # cdef: no Python attribute compiled
CLASSES = (fleet_loop.FleetLoop, state.FleetState, members.Members, kv_transfers.KVTransfers, disagg.KVHandoff,
           kv_network.FairNetwork)
MODULES = (fleet_loop, state, members, kv_transfers, disagg, kv_network, remote_kv)


def test_fleet_loop_handlers_are_one_class():
    for name in (*C_ONLY, "schedule", "client_request", "run"):
        assert callable(getattr(fleet_loop.FleetLoop, name, None)) or compiled.STATE[0] == "compiled", name


@pytest.mark.skipif(compiled.STATE[0] != "compiled", reason=f"not a compiled build: {compiled.STATE[1]}")
def test_compiled_fleet_modules_use_their_declarations():
    for module in MODULES:
        assert not module.__file__.endswith(".py"), f"{module.__name__} runs from source"
    for cls in CLASSES:  # extension types: fields in a struct, no instance dict
        assert "__dict__" not in cls.__dict__ and not hasattr(cls, "__weakref__"), cls
    for name in C_ONLY:  # declared cdef in fleet_loop.pxd: C calls, invisible to Python
        assert not hasattr(fleet_loop.FleetLoop, name), name
    for name in ("schedule", "client_request", "run"):
        assert hasattr(fleet_loop.FleetLoop, name), name
    with pytest.raises(TypeError):  # typed arguments: a replica, a request
        remote_kv.receive(object(), object())

"""A policy that cannot run a disaggregated fleet's decode pool, for the tests of its refusal: every built-in policy
serves one (``Scheduler.serves_transferred_kv``), but a user's own may not. Importing this module registers it."""
from __future__ import annotations

from dataclasses import dataclass

from llmsched.schedulers.fcfs import FCFS
from llmsched.schedulers.registry import register

NAME = "test-colocated-only"


@register
@dataclass
class ColocatedOnly(FCFS):
    """Test policy: Ao et al.'s FCFS, declaring no plan for a request that holds a sent prompt's KV."""

    name = NAME
    source = "test"
    serves_transferred_kv = False

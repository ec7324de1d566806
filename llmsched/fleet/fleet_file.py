"""A fleet file (TOML or YAML): its pools, the fleet's router and scripted scale events, checked as it is read.

    router = "least-outstanding"   # routes a role several pools serve (default: the run's --router)

    [pools.a100]                   # a pool: any run field a replica has, with the run field's name
    gpu = "a100"
    replicas = 2
    provisioning = 30.0            # seconds of each start-up phase of a replica added by a scale event (default 0)
    loading = 60.0
    warm = 5.0

    [pools.h100]
    gpu = "h100"

    [[scale]]                      # at 120 s, pool h100 is set to 3 replicas
    at = 120.0
    pool = "h100"
    replicas = 3

A pool's run fields are checked by their own declarations (``run_config.RunConfig``), passed in as ``check`` (the
runs layer owns them); an error names the file and line, the pool and the field.
"""
from __future__ import annotations

import re

from ..run_field import Origin, shown
from .fleet import Fleet, ScaleEvent
from .lifecycle import START_PHASES, PhaseTimes, is_seconds
from .deciders import Always
from .disagg import unbuilt
from .pool import DECODE, FILE_ROLES, POOL_FIELDS, PREFILL, SERVE, Pool

TOP_KEYS = ("pools", "scale", "router", "router_params")
POOL_KEYS = ("role",) + START_PHASES
SCALE_KEYS = ("at", "pool", "replicas")


class PoolOrigin(Origin):
    """Values written in one pool of a fleet file: an error names the file and line, the pool and the field."""

    def __init__(self, path, text: str, pool: str):
        super().__init__("file", path, text)
        self.pool = pool
        lines = text.splitlines()
        name = re.escape(pool)
        header = re.compile(r"^\s*(\[\s*pools\s*\.\s*[\"']?" + name + r"[\"']?\s*\]|[\"']?" + name + r"[\"']?\s*:)")
        self.start = next((i for i, line in enumerate(lines) if header.match(line)), 0)

    def name(self, key: str) -> str:
        return f"{self.path}{self.line_of(key)}: pool {self.pool!r}: {key}"

    def at(self, key: str, value) -> str:
        return f"{self.name(key)} = {shown(value)}"

    def line_of(self, key: str) -> str:
        spelt = "[-_]".join(map(re.escape, key.split("_")))
        pattern = re.compile(r"^\s*(['\"]?" + spelt + r"['\"]?\s*[=:]|\[.*\." + spelt + r"\s*\])")
        for i, line in enumerate(self.text.splitlines()[self.start:], self.start + 1):
            if pattern.match(line):
                return f":{i}"
        return f":{self.start + 1}"


def read_fleet(data: dict, path, text: str, check) -> Fleet:
    """The fleet ``data`` (a fleet file's mapping, read from ``path`` whose text is ``text``) describes;
    ``check(fields, origin)`` returns run fields checked by their declarations (a ValueError names them)."""
    where = str(path)
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ValueError(f"{where}{Origin.file(path, text).line_of(unknown[0])}: unknown key {unknown[0]}; a fleet "
                         f"file has {', '.join(TOP_KEYS)} (docs/fleet.md)")
    pools = data.get("pools")
    if not isinstance(pools, dict) or not pools:
        raise ValueError(f"{where}: a fleet file needs its pools, each a table [pools.NAME] of run fields "
                         f"(docs/fleet.md)")
    router = check({k: data[k] for k in ("router", "router_params") if k in data}, Origin.file(path, text))
    read = tuple(read_pool(str(name), fields, path, text, check) for name, fields in pools.items())
    roles = {p.role for p in read}
    paths = {}
    if roles & {PREFILL, DECODE}:  # disaggregated: its run builds the decider and the KV handoff (fleet_setup)
        if SERVE in roles:
            pool = next(p for p in read if p.role == SERVE)
            raise ValueError(f"{pool.origin.name('role')}: \"serve\" (whole requests) in a fleet with prefill and "
                             f"decode pools; give it role \"decode\" (a decider sends some requests to the decode "
                             f"pools whole) or run it in a fleet of its own")
        paths = {"paths": Always(unbuilt())}
    fleet = Fleet(read, tuple(read_scale(i, event, path, text, list(pools)) for i, event in
                              enumerate(scale_list(data.get("scale", []), where), 1)),
                  router=router, source=where, **paths)
    return fleet


def read_pool(name: str, fields, path, text: str, check) -> Pool:
    origin = PoolOrigin(path, text, name)
    if not isinstance(fields, dict):
        raise ValueError(f"{path}:{origin.start + 1}: pool {name!r} must be a table of run fields, got "
                         f"{shown(fields)}")
    fields = {str(k).replace("-", "_"): v for k, v in fields.items()}
    unknown = sorted(set(fields) - set(POOL_FIELDS) - set(POOL_KEYS))
    if unknown:
        raise ValueError(f"{origin.name(unknown[0])}: unknown field; a pool sets {', '.join(POOL_KEYS)} and the run "
                         f"fields {', '.join(POOL_FIELDS)}")
    role = fields.pop("role", FILE_ROLES[0])
    if role not in FILE_ROLES:
        raise ValueError(f"{origin.at('role', role)}: must be one of {', '.join(FILE_ROLES)} (serve: whole "
                         f"requests; prefill and decode: a disaggregated fleet, docs/disaggregation.md)")
    phases = {}
    for phase in START_PHASES:
        if phase in fields:
            value = fields.pop(phase)
            if not is_seconds(value):
                raise ValueError(f"{origin.at(phase, value)}: must be a finite number of seconds >= 0")
            phases[phase] = float(value)
    checked = check(fields, origin)
    replicas = checked.pop("replicas", 1)
    return Pool(name, replicas, role, checked, PhaseTimes(**phases) if phases else None, origin)


def scale_list(events, where: str) -> list:
    if isinstance(events, dict):
        events = [events]
    if not isinstance(events, list):
        raise ValueError(f"{where}: scale must be a list of events, each [[scale]] with at, pool and replicas")
    return events


def read_scale(i: int, event, path, text: str, pools: list[str]) -> ScaleEvent:
    line = scale_line(text, i)
    where = f"{path}{line}: scale event {i}"
    if not isinstance(event, dict):
        raise ValueError(f"{where}: must be a table with {', '.join(SCALE_KEYS)}, got {shown(event)}")
    unknown = sorted(set(event) - set(SCALE_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]}; a scale event has {', '.join(SCALE_KEYS)}")
    missing = [k for k in SCALE_KEYS if k not in event]
    if missing:
        raise ValueError(f"{where}: needs {', '.join(missing)} (at = seconds, pool = a pool's name, replicas = how "
                         f"many from then on)")
    at, pool, replicas = event["at"], event["pool"], event["replicas"]
    if not (isinstance(at, (int, float)) and not isinstance(at, bool) and 0 <= at < float("inf")):
        raise ValueError(f"{where}: at = {shown(at)}: must be a finite time >= 0 seconds")
    if pool not in pools:
        raise ValueError(f"{where}: pool = {shown(pool)} is no pool of the fleet ({', '.join(pools)})")
    if not (isinstance(replicas, int) and not isinstance(replicas, bool) and 0 <= replicas <= 4096):
        raise ValueError(f"{where}: replicas = {shown(replicas)}: must be an integer >= 0 and <= 4096")
    return ScaleEvent(float(at), pool, replicas)


def scale_line(text: str, i: int) -> str:
    """':N' for the line of the ``i``-th [[scale]] table (TOML) or ``- at:`` item (YAML), else ''."""
    pattern = re.compile(r"^\s*(\[\[\s*scale\s*\]\]|-\s)")
    seen = 0
    for n, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            seen += 1
            if seen == i:
                return f":{n}"
    return ""

"""Offline schedules as data (Kim et al. §3): which tokens of which request each batch processes, and
evictions.

A schedule is a list of batches; a batch maps request index → tokens processed (0 with ``evicted``).
``replay`` runs one through the real ``Replica`` (block size 1, M blocks, C tokens) with a batch-time model,
so every schedule — from the CP-SAT model, the brute force or a heuristic — is checked and priced by the
same mechanism the simulator uses.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...batchtime.base import BatchTimeModel
from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ...request import Request, Status
from ...schedulers.base import Scheduler
from .offline import offline_replica, run_offline


@dataclass(frozen=True)
class Instance:
    """N requests arriving together: prompt lengths I, output lengths O (O counts the prefill's token)."""

    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    kv_slots: int  # M
    batch_tokens: int  # C
    prefill_tokens: int | None = None  # P (None: C)

    def __post_init__(self):
        if not self.inputs or len(self.inputs) != len(self.outputs):
            raise ValueError("an instance needs one output length per input length, and at least one request")
        for name in ("kv_slots", "batch_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.prefill_tokens is not None and not 1 <= self.prefill_tokens <= self.batch_tokens:
            raise ValueError(f"prefill_tokens P must be in [1, C={self.batch_tokens}], got {self.prefill_tokens}")
        for k, (i, o) in enumerate(zip(self.inputs, self.outputs)):
            if i < 1 or o < 1:
                raise ValueError(f"request {k}: input and output lengths must be >= 1, got I={i}, O={o}")
            if i + o - 1 > self.kv_slots:
                raise ValueError(f"infeasible instance: request {k} holds I+O-1 = {i + o - 1} KV slots at its last "
                                 f"step but M = {self.kv_slots}; no schedule can finish it (raise M)")

    @property
    def P(self) -> int:
        return self.batch_tokens if self.prefill_tokens is None else self.prefill_tokens

    @property
    def n(self) -> int:
        return len(self.inputs)

    def requests(self) -> list[Request]:
        return [Request(k, 0.0, i, o) for k, (i, o) in enumerate(zip(self.inputs, self.outputs))]

    def sequential_batches(self) -> int:
        """Batches of the one-at-a-time schedule (always feasible): ⌈I/P⌉ prefill chunks + O−1 decodes each."""
        return sum(-(-i // self.P) + o - 1 for i, o in zip(self.inputs, self.outputs))


@dataclass
class Schedule:
    """``batches[j][k] = tokens`` of request k in batch j; ``evictions[j]`` = requests evicted before batch j."""

    batches: list[dict[int, int]]
    evictions: list[set[int]] = field(default_factory=list)

    def __post_init__(self):
        while len(self.evictions) < len(self.batches):
            self.evictions.append(set())

    @property
    def num_evictions(self) -> int:
        return sum(len(e) for e in self.evictions)

    def describe(self, instance: Instance) -> list[str]:
        """One line per batch: ``r0:4p r1:1d`` (p prefill/refill chunk, d decode), evictions marked ``r2:evict``."""
        lines, state = [], [(i, 0) for i in instance.inputs]  # (S, m)
        for j, (batch, gone) in enumerate(zip(self.batches, self.evictions)):
            items = [f"r{k}:evict" for k in sorted(gone)]
            for k in sorted(gone):
                state[k] = (state[k][0], 0)
            for k, c in sorted(batch.items()):
                s, m = state[k]
                phase = "d" if (s > instance.inputs[k] and s - m == 1) else "p"
                items.append(f"r{k}:{c}{phase}")
                m += c
                state[k] = (s + 1, m) if m == s else (s, m)
            lines.append(f"batch {j + 1:>3}: " + " ".join(items))
        return lines


class Replay(Scheduler):
    """Plays a fixed schedule back, one batch per step (not registered: a tool for checking schedules)."""

    name = "replay"
    source = "Kim et al. §3 (schedules precomputed by a solver and replayed, as the authors replay on vLLM)"

    def __init__(self, schedule: Schedule, requests: list[Request]):
        self.fixed, self.requests, self.step = schedule, requests, 0

    def schedule(self, view: ReplicaView) -> BatchPlan:
        plan = BatchPlan()
        if self.step >= len(self.fixed.batches):
            return plan
        batch, gone = self.fixed.batches[self.step], self.fixed.evictions[self.step]
        self.step += 1
        plan.preempt = [self.requests[k] for k in sorted(gone)]
        for k, c in sorted(batch.items()):
            r = self.requests[k]
            if r.status is Status.RUNNING and r.is_decode and c == 1:
                plan.decodes.append(r)
            else:
                plan.prefills.append((r, c))
        return plan


def replay(schedule: Schedule, instance: Instance, batch_time: BatchTimeModel) -> float:
    """Total latency of ``schedule`` on the replica; raises if it breaks a limit or leaves a request unfinished."""
    reqs = instance.requests()
    rep = offline_replica(Replay(schedule, reqs), batch_time, instance.kv_slots, instance.batch_tokens)
    rep.config.check_invariants = True
    for j, batch in enumerate(schedule.batches):
        prefill = sum(c for k, c in batch.items() if not _decode_phase(instance, schedule, j, k))
        if prefill > instance.P:
            raise ValueError(f"schedule batch {j + 1}: {prefill} prefill tokens exceed P = {instance.P}")
    result = run_offline(rep, reqs)
    if result.rejected:
        raise ValueError(f"schedule leaves {result.rejected} request(s) unfinished")
    return result.latency


def _decode_phase(instance: Instance, schedule: Schedule, j: int, k: int) -> bool:
    s, m = instance.inputs[k], 0
    for b, gone in zip(schedule.batches[:j], schedule.evictions[:j]):
        if k in gone:
            m = 0
        c = b.get(k, 0)
        m += c
        if m == s:
            s += 1
    if k in schedule.evictions[j]:
        m = 0
    return s > instance.inputs[k] and s - m == 1


def from_batches(records: list[dict]) -> Schedule:
    """A schedule from ``run_offline(..., record=True)`` batches ({id: (tokens, 'p'|'d'|'e')})."""
    batches, evictions = [], []
    for rec in records:
        batches.append({k: n for k, (n, kind) in rec.items() if kind != "e"})
        evictions.append({k for k, (n, kind) in rec.items() if kind == "e"})
    return Schedule(batches, evictions)

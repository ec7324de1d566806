"""The view's waiting requests split by tenant (vtc, wfq) or by priority class (priority), each part in queue order.

Scanning ``view.waiting`` at every step costs O(waiting), thousands of requests under overload; these queues are
kept in step with it instead: a request joins at arrival (``Scheduler.on_arrival``) or, when the policy preempts it
back to the waiting queue, at its tenant's front (where the replica puts it), and leaves when the policy admits it.
Anything else that changes the waiting queue (an overflow eviction, a rejection by the mechanism, vLLM preempting
on its own) shows as a queue whose length or ends the queues do not know; they are then rebuilt from the view in
one pass. A tenant (or class) is *backlogged* while its queue holds a request.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ...request import Request, Status

WAITING = Status.WAITING


def tenant_key(r: Request) -> str | None:
    """The tenant a request belongs to (None for a run without tenants: one shared queue)."""
    t = r.tenant
    return None if t is None else t.name


def tenant_weight(r: Request) -> float:
    t = r.tenant
    return 1.0 if t is None else t.weight


def priority_key(r: Request) -> int:
    return r.priority


class WaitingQueues:
    """Per key (``key(request)``: its tenant by default), the waiting requests in queue order.
    ``on_backlogged(key)`` is called when a key's queue turns non-empty (before the request is added),
    ``on_idle(key)`` when it empties."""

    def __init__(self, on_backlogged: Callable[[object], None] = lambda key: None,
                 on_idle: Callable[[object], None] = lambda key: None, key: Callable[[Request], object] = tenant_key):
        self.key = key
        self.queues: dict[object, deque[Request]] = {}
        self.known: set[Request] = set()
        self.on_backlogged = on_backlogged
        self.on_idle = on_idle

    def __len__(self) -> int:
        return len(self.known)

    def backlogged(self) -> list:
        """Keys with a waiting request, in the order they first queued."""
        return [k for k, q in self.queues.items() if q]

    def add(self, r: Request, front: bool = False) -> None:
        """``r`` joins its key's queue where the replica puts it in its waiting queue: at the back, or, for a request
        the policy preempted (``front``) or one that arrives holding KV (a prompt a prefill instance sent,
        engine/remote_kv.py), at the front, behind the requests that hold KV (vLLM 0.32 drains its KV-holding waiting
        queue first: ``remote_kv.front``)."""
        key = self.key(r)
        q = self.queues.get(key)
        if q is None:
            q = self.queues[key] = deque()
        if not q:
            self.on_backlogged(key)
        if (front or r.num_blocks) and q and not q[-1].num_blocks:
            at = 0
            while q[at].num_blocks:
                at += 1
            q.insert(at, r)
        else:
            q.append(r)
        self.known.add(r)

    def head(self, key) -> Request | None:
        """The key's first request still waiting (requests that left the queue unseen are dropped)."""
        q = self.queues[key]
        while q and q[0].status is not WAITING:
            self.known.discard(q.popleft())
            if not q:
                self.on_idle(key)
        return q[0] if q else None

    def pop(self, key) -> Request:
        """Take the key's first request (the policy admits it)."""
        q = self.queues[key]
        r = q.popleft()
        self.known.discard(r)
        if not q:
            self.on_idle(key)
        return r

    def sync(self, waiting: list[Request], preempted: list[Request]) -> None:
        """Bring the queues in step with the view's ``waiting`` before a decision: the policy's last victims that
        went back to the waiting queue join their keys' fronts (each the newest front, as the replica inserts
        them); any other change rebuilds the queues, among them a head that holds KV and is not its key's head (a
        request ahead of it let its loaded blocks go and moved behind it: ``Replica.release_loaded``)."""
        for r in preempted:
            if r.status is WAITING and r not in self.known:
                self.add(r, front=True)
        known = self.known
        if len(known) != len(waiting) or (waiting and (waiting[0] not in known or waiting[-1] not in known)):
            self.rebuild(waiting)
        elif waiting and waiting[0].num_blocks and self.queues[self.key(waiting[0])][0] is not waiting[0]:
            self.rebuild(waiting)

    def rebuild(self, waiting: list[Request]) -> None:
        """The queues anew from ``waiting``; tenants that emptied go idle first, then those newly backlogged join
        one by one, in queue order (each hears of the tenants already backlogged, as at an arrival)."""
        before = {k for k, q in self.queues.items() if q}
        fresh: dict[object, deque[Request]] = {}
        key_of = self.key
        for r in waiting:
            key = key_of(r)
            q = fresh.get(key)
            if q is None:
                q = fresh[key] = deque()
            q.append(r)
        self.known = set(waiting)
        self.queues = {k: fresh.get(k, deque()) for k in self.queues}
        for key in before:
            if not self.queues[key]:
                self.on_idle(key)
        for key, q in fresh.items():
            if key not in before:
                self.queues[key] = deque()
                self.on_backlogged(key)
                self.queues[key] = q

"""A run's requests as a client sends them through a serving front end (the client latency boundary).

Each request keeps its send time (``Request.sent``, the source's arrival) and reaches the engine
``front_end.request_delay(prompt_len)`` later (``Request.arrival``, what the replicas see): HTTP, rendering and
tokenisation, the hand-off to the engine core (hardware/front_end.py). A long prompt sent just before a short one
may reach the engine after it, as in vLLM's API server, so the requests are yielded again in engine-arrival order
(a heap that holds each request only until no later send can overtake it). A closed loop's next request is sent
when its client has the last byte of the one before: the front end's output delay after the engine's finish.
"""
from __future__ import annotations

import heapq


def client_sends(source, front_end, batch_of=None) -> "ClientSends":
    """``source`` seen through ``front_end`` (a sized source stays sized: ``len`` is its)."""
    cls = SizedClientSends if hasattr(type(source), "__len__") else ClientSends
    return cls(source, front_end, batch_of)


class ClientSends:
    """``source`` seen through ``front_end``; ``batch_of(req)`` (optional) says how many requests got a token in the
    step that finished ``req`` (the output delay's batch). Other attributes are ``source``'s."""

    def __init__(self, source, front_end, batch_of=None):
        self.source = source
        self.front_end = front_end
        self.batch_of = batch_of
        self.done_adds_requests = getattr(source, "done_adds_requests", True)

    def __getattr__(self, name):
        return getattr(self.source, name)

    def initial(self):
        first = self.source.initial()
        return self._in_engine_order(iter(sorted(first, key=_arrival) if isinstance(first, list) else first))

    def _in_engine_order(self, sends):
        delay = self.front_end.request_delay
        held: list = []
        seq = 0
        for r in sends:
            r.sent = sent = r.arrival
            while held and held[0][0] <= sent:  # reaches the engine before any later send could
                yield heapq.heappop(held)[2]
            r.arrival = sent + delay(r.prompt_len)
            heapq.heappush(held, (r.arrival, seq, r))
            seq += 1
        while held:
            yield heapq.heappop(held)[2]

    def on_done(self, req, now: float):
        more = self.source.on_done(req, now)
        if not more:
            return more
        batch = self.batch_of(req) if self.batch_of is not None else 0
        late = self.front_end.output_delay(batch)  # the client learns of the finish this much later
        delay = self.front_end.request_delay
        for r in more:
            r.sent = r.arrival + late
            r.arrival = r.sent + delay(r.prompt_len)
        return more


class SizedClientSends(ClientSends):
    def __len__(self) -> int:
        return len(self.source)


def _arrival(req) -> float:
    return req.arrival

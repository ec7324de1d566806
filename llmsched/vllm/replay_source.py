"""A run's request source as a real engine replays it: every request the simulator would see, follow-ups included.

The source is the simulator's own (``build_source``): its first requests up front, and a session's next turn
from ``on_done`` when the turn before it leaves the run (finished or rejected), ``delay`` after it and not before
its own time, exactly as ``sim/simulator.py`` asks it. Each request is fitted to the CPU run as it is issued:
lengths and content times ``scale`` (``workload/content_scale.py``), prompt + output cut to the engine's context.
``fidelity`` hands a fresh one to the simulator, so both runs issue the same turns of the same sessions.
"""
from __future__ import annotations

from ..request import Request
from ..workload.content_scale import scaled_content
from ..workload.traces.bench_warmups import SentBefore


class ReplaySource:
    """``source``'s requests, each scaled and cut to ``max_model_len`` as it is issued; ``issued`` keeps them all."""

    done_adds_requests = True

    def __init__(self, source, max_model_len: int, scale: float = 1.0):
        if not scale > 0:
            raise ValueError(f"length scale must be > 0, got {scale}")
        self.source, self.max_model_len, self.scale = source, max_model_len, scale
        self.issued: list[Request] = []

    def __len__(self) -> int:
        return len(self.source)

    @property
    def has_follow_ups(self) -> bool:
        """Whether completions may issue requests (sessions, closed loops)."""
        return getattr(self.source, "done_adds_requests", True)

    def initial(self) -> list[Request]:
        self.issued = [self.fit(r) for r in self.source.initial()]
        return list(self.issued)

    def on_done(self, req: Request, now: float) -> list[Request]:
        more = [self.fit(r) for r in self.source.on_done(req, now)]
        self.issued += more
        return more

    @property
    def sent_before(self) -> SentBefore | None:
        """The prompt the benchmark sent before the run (``bench_warmups.SentBefore``; None: none), fitted as the
        run's requests are, so that it warms what the run's own copy of it then finds (``warm_caches``, the real
        engine's ``runner.warm_up``)."""
        sent = getattr(self.source, "sent_before", None)
        if sent is None:
            return None
        r = self.fit(Request(-1, 0.0, sent.prompt_len, 1, content=sent.content(self.max_model_len - 1)))
        return SentBefore(r.prompt_len, lambda max_prompt: r.content, sent.replicas)

    def fit(self, r: Request) -> Request:
        """``r`` at the length scale, prompt + output within the engine's context (its content cut with it, so what
        requests share survives both)."""
        if self.scale != 1.0:
            r = scaled(r, self.scale)
        if r.prompt_len + r.output_len > self.max_model_len:
            prompt = max(1, min(r.prompt_len, self.max_model_len // 2))
            r = Request(r.id, r.arrival, prompt, max(1, min(r.output_len, self.max_model_len - prompt)), r.tier,
                        r.tenant, None if r.content is None else r.content.cut(prompt))
        return r


def scaled(r: Request, scale: float) -> Request:
    """Request ``r`` with its prompt, output and content times ``scale``."""
    prompt = max(1, round(r.prompt_len * scale))
    content = None if r.content is None else scaled_content(r.content, scale, prompt)
    return Request(r.id, r.arrival, prompt, max(1, round(r.output_len * scale)), r.tier, r.tenant, content)


class Listed:
    """A fixed list of requests as a source (probes, tests): completions add none."""

    done_adds_requests = False
    has_follow_ups = False

    def __init__(self, requests):
        self.requests = list(requests)
        self.issued = self.requests

    def __len__(self) -> int:
        return len(self.requests)

    def initial(self) -> list[Request]:
        return list(self.requests)

    def on_done(self, req: Request, now: float) -> list[Request]:
        return []

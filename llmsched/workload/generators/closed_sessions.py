"""Multi-turn sessions in the closed loop: each user's next turn follows its previous turn's end plus a think time,
carrying the conversation so far (sessions.py) as its prefix."""
from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import chain, islice

import numpy as np

from llmsched.request import DEFAULT_TIER, Request, Tier
from llmsched.workload.chunks import CHUNK
from llmsched.workload.lengths.distributions import Capped, LengthDist, positive_int
from llmsched.workload.generators.sessions import Turn, first_prompt, next_prompt, turn_number
from llmsched.workload.tenants.tiers import check_tiers, tier_chunks
from llmsched.workload.workload import caps_of, streams


class SessionClosedLoop:
    """``concurrency`` users, each holding a conversation: its next turn is issued ``think_time`` seconds after the
    previous one leaves the run, and after its last turn the user opens the next session.

    ``plan(s)`` gives session s's turns (``Turn``s, read lazily), s counting sessions in the order users open them,
    so a session's requests are the same whatever the order of completions; ``num_requests`` caps the requests
    issued in all (the last sessions may be cut short). ``initial`` restarts the source.
    """

    done_adds_requests = True

    def __init__(self, concurrency: int, plan, num_requests: int, think_time: float = 0.0, describe: dict = None):
        self.concurrency = positive_int("closed loop concurrency", concurrency)
        self.num_requests = positive_int("closed loop num_requests", num_requests)
        if not (think_time >= 0 and math.isfinite(think_time)):
            raise ValueError(f"closed loop think_time must be a finite number of seconds >= 0, got {think_time!r}")
        self.plan = plan
        self.think_time = float(think_time)
        self._describe = describe or {}
        self.issued = self.opened = 0
        self.live: dict[int, Iterator] = {}  # request id -> the rest of its session
        self.length_caps = getattr(plan, "length_caps", ())

    def __len__(self) -> int:
        return self.num_requests

    def initial(self) -> list[Request]:
        self.issued = self.opened = 0
        self.live = {}
        return [self._open(0.0) for _ in range(min(self.concurrency, self.num_requests))]

    def on_done(self, req: Request, now: float) -> list[Request]:
        if req.id not in self.live:
            raise ValueError(f"closed loop: on_done for request {req.id}, which this source has not issued or was "
                             f"already told is done")
        rest = self.live.pop(req.id)
        if self.issued >= self.num_requests:
            return []
        at = now + self.think_time
        turn = next(rest, None)
        return [self._open(at) if turn is None else self._issue(turn, rest, at)]

    def _open(self, at: float) -> Request:
        turns = iter(self.plan(self.opened))
        self.opened += 1
        return self._issue(next(turns), turns, at)

    def _issue(self, turn: Turn, rest: Iterator, at: float) -> Request:
        req = Request(self.issued, at, turn.prompt_len, turn.output_len, turn.tier, content=turn.content)
        self.issued += 1
        self.live[req.id] = rest
        return req

    def describe(self) -> dict:
        return {"kind": "closed-loop sessions", "concurrency": self.concurrency, "num_requests": self.num_requests,
                "think_time": self.think_time, **self._describe}


class DrawnSessions:
    """Sessions of ``turns`` turns from a length distribution: session s takes the next ``turns`` draws when it
    opens (prompt length = the user's new text, output length, and the first draw's tier for the whole session),
    so draw k is the same whatever the order sessions finish in; each turn's prompt is the conversation so far plus
    its new text. With ``concurrency`` users and ``num_requests`` requests, at most ``num_requests + concurrency
    x (turns - 1)`` draws are taken (the sessions still open at the end hold unissued ones)."""

    def __init__(self, lengths: LengthDist, turns: int, num_requests: int, concurrency: int, tiers=(DEFAULT_TIER,),
                 seed: int = 0, max_total_tokens: int | None = None, chunk: int = CHUNK):
        self.turns = positive_int("sessions turns", turns)
        self.lengths = lengths if max_total_tokens is None else Capped(lengths, max_total_tokens)
        self.tiers = check_tiers(tiers)
        self.draws = num_requests + concurrency * (self.turns - 1)
        self.seed, self.chunk = seed, chunk
        self._drawn = self._draws()
        self.length_caps = caps_of(self.lengths, max_total_tokens)

    def _draws(self) -> Iterator[tuple[int, int, Tier]]:
        _, length_rng, tier_rng = streams(self.seed, 3)
        lengths = self.lengths.chunks(self.draws, length_rng, self.chunk)
        tiers = tier_chunks(self.draws, self.tiers, tier_rng, self.chunk)
        return chain.from_iterable(zip(np.asarray(p, np.int64).tolist(), np.asarray(o, np.int64).tolist(), t)
                                   for (p, o), t in zip(lengths, tiers, strict=True))

    def __call__(self, session: int) -> Iterator[Turn]:
        if session == 0:
            self._drawn = self._draws()
        drawn = list(islice(self._drawn, self.turns))
        return self._session(session, drawn)

    @staticmethod
    def _session(session: int, drawn: list) -> Iterator[Turn]:
        content = None
        tier = drawn[0][2]
        for t, (text, output, _) in enumerate(drawn):
            number = turn_number(session, t)
            if content is None:
                content = first_prompt(number, (), text)
            else:
                content = next_prompt(content, before_output, number, content.length + before_output + text)
            before_output = output
            yield Turn(content.length, output, content, tier=tier)

    def describe(self) -> dict:
        return {"turns": self.turns, "lengths": self.lengths.describe(), "seed": self.seed}

"""A replayed conversation's later turn is not sent before the turn it follows has left: its client sends it only
once it has that turn's reply, which its prompt quotes (workload/traces/conversations.py). A log's recorded sends
already follow the real server's replies; where the replay's server is slower, a turn due before its earlier
turn's simulated end is held and sent when that turn leaves (the client's output delay, a few milliseconds, not
added), as the real-engine replay holds it (vllm/reply_waits.py). Where the replay keeps pace, nothing moves.

The wrapper sits outside the front end's (workload/client_sends.py): it sees each request's send (``sent``) and
engine arrival, and moves both by the same wait."""
from __future__ import annotations


def held_turns(source):
    """``source`` with its conversations' later turns held (above) where it says which turn each follows (its
    ``turns``: per request id, the id of the turn before it, -1 for none); ``source`` itself otherwise."""
    turns = getattr(source, "turns", None)
    if turns is None:
        return source
    return (SizedHeldTurns if hasattr(type(source), "__len__") else HeldTurns)(source, turns)


class HeldTurns:
    """``source`` (requests with ids 0, 1, ... as ``turns`` indexes them) with later turns held (module docstring);
    its other attributes are ``source``'s."""

    done_adds_requests = True  # (a turn's end may send the one held for it)

    def __init__(self, source, turns):
        self.source = source
        self.turns = turns
        self.left: set[int] = set()  # ids of the requests that left the run
        self.held: dict[int, list] = {}  # id of a turn still in the run -> the turns held for it

    def __getattr__(self, name):
        return getattr(self.source, name)

    def initial(self):
        self.left, self.held = set(), {}
        for r in self.source.initial():
            if not self.hold(r):
                yield r

    def hold(self, r) -> bool:
        """True, ``r`` held, where the turn it follows is still in the run (it may still leave before ``r`` is due:
        then ``r`` goes at its own time)."""
        before = int(self.turns[r.id]) if r.id < len(self.turns) else -1
        if before < 0 or before in self.left:
            return False
        self.held.setdefault(before, []).append(r)
        return True

    def on_done(self, req, now: float) -> list:
        self.left.add(req.id)
        more = [r for r in self.source.on_done(req, now) or () if not self.hold(r)]
        for r in self.held.pop(req.id, ()):
            wait = now - r.sent
            if wait > 0:  # due before its earlier turn left: sent now
                r.sent += wait
                r.arrival += wait
            more.append(r)
        return more


class SizedHeldTurns(HeldTurns):
    def __len__(self) -> int:
        return len(self.source)

"""A replayed conversation's later turns quote the replies of the turns before them (``Space.REPLY`` pieces of their
contents, workload/traces/conversations.py): the real engine's replay sends the tokens vLLM generated for such a
reply (``content_ids``), so vLLM's prefix cache finds it as the captured run's did. A client cannot send a turn
before it has the reply the turn quotes: a turn due before that reply is held until it comes (or its request leaves
without one), then sent at once, as the client would have. The simulator replays such a log at its recorded sends."""
from __future__ import annotations

from ..content import SPACE_BITS, Space


class ReplyWaits:
    """The replies ``requests`` (a run's first requests) quote, and the requests held for those still to come."""

    def __init__(self, requests):
        owners = {r.content.reply for r in requests if r.content is not None}
        self.quoted = {piece for r in requests if r.content is not None for piece in r.content.ids
                       if piece >> SPACE_BITS == Space.REPLY and piece in owners}
        self.open = set(self.quoted)  # quoted replies not come yet
        self.held: dict[int, list] = {}  # reply id -> the requests held for it

    def quotes(self, r) -> bool:
        """Whether a later request quotes ``r``'s reply (its generated tokens are to be kept)."""
        return r.content is not None and r.content.reply in self.quoted

    def hold(self, r) -> bool:
        """True, ``r`` held, where it quotes a reply still to come."""
        if r.content is not None:
            for piece in r.content.ids:
                if piece in self.open:
                    self.held.setdefault(piece, []).append(r)
                    return True
        return False

    def answered(self, reply: int) -> list:
        """Reply ``reply`` came (or its request left without one): the requests held for it."""
        self.open.discard(reply)
        return self.held.pop(reply, [])

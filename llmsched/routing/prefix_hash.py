"""``prefix-hash``: consistent hashing of the prompt's first blocks, with bounded loads; no cache state read.

Requests whose first ``prefix_blocks`` KV blocks are the same get the same key (the prefix hash at the end of those
blocks, ``Content.prefix_hash``: it names every token before it), and a key goes to the first replica clockwise
from it on a hash ring of ``vnodes`` points per replica, so equal prefixes meet on one replica without the router
knowing what any replica holds. Consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam, "Consistent
Hashing with Bounded Loads", SODA 2018, §2): a replica is full when its load reaches ``ceil(load_factor · (m + 1) /
n)``, m the requests outstanding over all n replicas (the new one included); a full replica is passed over, so no
replica ever holds more than ``load_factor`` times the mean (plus one), and a hot prefix spills onto the next
replicas of the ring. ``load_factor`` is the paper's 1 + ε. The load is each replica's outstanding requests.

A prompt shorter than ``prefix_blocks`` blocks is keyed by its whole prompt. A request without content (every
length-only workload) has no key: it goes to the least-outstanding replica, the lowest index among equals, exactly
the ``least-outstanding`` router's choice.
"""
from __future__ import annotations

import bisect
import math
from hashlib import blake2b

from .base import Router, check_param, least_outstanding
from .registry import register_router

RING = 1 << 64


def ring_point(replica: int, vnode: int) -> int:
    """Where virtual node ``vnode`` of replica ``replica`` sits on the ring (stable from run to run)."""
    return int.from_bytes(blake2b(f"llmsched-ring/{replica}/{vnode}".encode(), digest_size=8).digest(), "little")


@register_router
class PrefixHash(Router):
    name = "prefix-hash"
    summary = ("consistent hashing of the prompt's first KV blocks with bounded loads (Mirrokni et al.): equal "
               "prefixes meet on one replica, no replica above load_factor x the mean; no cache state read")

    def __init__(self, prefix_blocks: int = 64, load_factor: float = 1.25, vnodes: int = 64):
        check_param(self, "prefix_blocks", prefix_blocks, isinstance(prefix_blocks, int) and prefix_blocks >= 1,
                    "an integer >= 1 (KV blocks hashed)")
        check_param(self, "load_factor", load_factor, load_factor >= 1, ">= 1 (1 + epsilon of the bounded-load rule)")
        check_param(self, "vnodes", vnodes, isinstance(vnodes, int) and 1 <= vnodes <= 4096,
                    "an integer in [1, 4096] (ring points per replica)")
        self.prefix_blocks = prefix_blocks
        self.load_factor = load_factor
        self.vnodes = vnodes
        self.points: list[int] = []
        self.owners: list[int] = []

    def begin(self, replicas):
        # each replica's points from its own index (unique in a fleet), so a key stays where it was when others
        # join or leave: consistent hashing's point
        ring = sorted((ring_point(rep.index, v), i) for i, rep in enumerate(replicas) for v in range(self.vnodes))
        self.points = [p for p, _ in ring]
        self.owners = [i for _, i in ring]

    def route(self, req, replicas, rng):
        loads = [rep.num_outstanding for rep in replicas]
        if req.content is None:
            return least_outstanding(loads)
        if len(self.owners) != len(replicas) * self.vnodes:
            self.begin(replicas)
        n = len(replicas)
        cap = math.ceil(self.load_factor * (sum(loads) + 1) / n)
        tokens = min(self.prefix_blocks * replicas[0].kv.block_size, req.content.length, req.num_tokens)
        at = bisect.bisect_left(self.points, req.content.prefix_hash(tokens) % RING)
        owners, size = self.owners, len(self.owners)
        for step in range(size):
            i = owners[(at + step) % size]
            if loads[i] < cap:
                return i
        raise AssertionError(f"router {self.name}: every replica at its bound {cap} with loads {loads}")

"""The KV transfers of a disaggregated fleet: each request's prompt KV from its prefill instance to its decode
instance, over the run's link, every instance's send and receive sides shared fairly (``engine/kv_network.py``).

* **Bytes** (``engine/kv_transfer.transfer_split``): the prompt's KV in whole blocks of the prefill instance (NIXL
  registers and reads KV by block, vLLM's ``NixlConnectorWorker``), split by each side's TP layout: every rank moves
  its share over its own NIC at once (one NIC per GPU, as on a DGX H100's eight ConnectX-7), so a transfer is
  as long as one rank's share: the larger of what a sender rank sends and a receiver rank receives.
* **When**: a transfer starts when the decode instance has reserved the prompt's blocks (``engine/remote_kv.py``)
  and takes the link's latency plus its bytes at the fair share of both sides' bandwidth (``Link.write_bw`` out of
  the prefill instance, ``Link.bandwidth`` into the decode instance).
* **Connector** ``nixl`` (vLLM's NixlConnector, the default): the decode side pulls the whole prompt's KV after the
  prefill ended. ``layerwise`` (LMCache's layer-wise store/retrieve; Splitwise's layer-wise KV transfer, Patel et
  al., ISCA 2024, its optimised KV-cache transfer): layer i's KV is sent while layer i+1 computes, so the part of
  the transfer that outlasts the prefill is what ``kv_transfer.pipelined`` leaves after the prefill's compute: one
  layer's share, plus the excess of the transfer over the prefill's time (at the link's uncontended rate) in the
  other layers. That part is what crosses the network after the prefill; the decode side's blocks are reserved as
  for ``nixl``.
"""
from __future__ import annotations

import math

import numpy as np

from ..engine.kv_network import FairNetwork
from ..engine.kv_transfer import sending_ranks, transfer_split

CONNECTORS = ("nixl", "layerwise")


def exposed_bytes(nbytes: float, layers: int, prefill_seconds: float, rate: float) -> float:
    """The bytes of a layer-wise transfer still to move when a prefill of ``prefill_seconds`` ends: one layer's,
    plus, in the other layers, what the link at ``rate`` could not move during that layer's compute
    (``kv_transfer.pipelined`` with compute first: c + (L−1)·max(c, x) + x − L·c, in bytes)."""
    if not prefill_seconds > 0:
        return nbytes
    return nbytes / layers + (layers - 1) / layers * max(0.0, nbytes - rate * prefill_seconds)


class KVTransfers:
    """The fleet's transfers in flight (module docstring). ``tp_of(i)`` and ``block_of(i)``: replica ``i``'s
    tensor parallelism and block size; ``records`` the handoff's per-request records (``KVHandoff.records``)."""

    def __init__(self, spec, link, connector: str, tp_of, block_of, records: dict):
        if connector not in CONNECTORS:
            raise ValueError(f"kv_connector {connector!r}: one of {', '.join(CONNECTORS)}")
        self.spec = spec
        self.link = link
        self.connector = connector
        self.tp_of = tp_of
        self.block_of = block_of
        self.records = records
        self.moving: dict = {}  # request id -> its record, while its KV moves (its row may be written before it lands)
        self.network = FairNetwork()
        self.count = 0
        self.bytes = 0  # every rank's bytes, all transfers: the volume that crossed the network
        self.durations: list[float] = []
        self.first = math.inf
        self.last = -math.inf  # the last transfer's end: with ``first``, the transfers' span
        # (sender replica, receiver replica) -> (the sender's block size, a receiver rank's bytes a token, all
        # receivers' bytes a token, senders): the layouts of the pair's pools, worked out at its first transfer
        self.pairs: dict = {}

    def rank_bytes(self, prompt: int, src: int, dst: int) -> tuple[int, int]:
        """``(bytes one rank moves, bytes all ranks move)`` of a ``prompt``-token KV from replica ``src`` to
        ``dst``: ``transfer_split``'s (vLLM's NIXL rank mapping, ``sending_ranks``), which is linear in the tokens
        but for the senders' rounding up."""
        pair = self.pairs.get((src, dst))
        if pair is None:
            src_tp, dst_tp = self.tp_of(src), self.tp_of(dst)
            recv = transfer_split(self.spec, 1, src_tp, dst_tp)[1]
            pair = self.pairs[src, dst] = (self.block_of(src), recv, recv * dst_tp,
                                           sending_ranks(self.spec, src_tp, dst_tp))
        bs, recv, received, senders = pair
        tokens = -(-prompt // bs) * bs
        send = -(-tokens * received // senders)
        return max(send, tokens * recv), tokens * received

    def start(self, req, dst: int, now: float) -> None:
        """``req``'s KV starts to move to replica ``dst``, which has reserved its blocks."""
        rec = self.records[req.id]
        src = rec[0]
        per_rank, total = self.rank_bytes(req.prompt_len, src, dst)
        moved = per_rank
        if self.connector == "layerwise":
            moved = exposed_bytes(per_rank, self.spec.layers, rec[4], min(self.link.write_bw, self.link.bandwidth))
        net = self.network
        out, into = ("send", src), ("recv", dst)
        if out not in net.capacity:
            net.side(out, self.link.write_bw)
        if into not in net.capacity:
            net.side(into, self.link.bandwidth)
        net.start(now, moved, req, (out, into), self.link.latency)
        rec[1] = now
        rec[3] = total
        self.moving[req.id] = rec
        self.count += 1
        self.bytes += total
        self.first = min(self.first, now)

    def next_event(self) -> float | None:
        """When the next transfer lands (None: none in flight)."""
        return self.network.next_finish()

    def advance(self, t: float) -> list:
        """``[(request, finish time)]`` of the transfers finished by ``t``."""
        done = self.network.advance(t)
        for req, end in done:
            rec = self.moving.pop(req.id)  # (a request whose client gave up during the transfer left already)
            rec[2] = end
            self.durations.append(end - rec[1])
            if end > self.last:
                self.last = end
        return done

    def summary(self, end: float) -> dict:
        """summary.json's ``kv_transfer``: the link, the transfers, their volume and times."""
        d = np.asarray(self.durations, dtype=np.float64)
        # the transfers' span: the first's start to the last's end (the run's end while one is still moving)
        span = (end if len(d) < self.count else self.last) - self.first if self.count else 0.0

        def q(p):
            return float(np.quantile(d, p)) if len(d) else math.nan

        return {"link": self.link.describe(), "connector": self.connector, "transfers": self.count,
                "finished": int(len(d)), "bytes": int(self.bytes),
                "gbytes_per_s": self.bytes / span / 1e9 if span > 0 else math.nan,
                "busy_fraction": self.network.utilisation(span) if span > 0 else math.nan,
                "seconds": {"mean": float(d.mean()) if len(d) else math.nan, "p50": q(0.5), "p90": q(0.9),
                            "p99": q(0.99), "max": float(d.max()) if len(d) else math.nan}}

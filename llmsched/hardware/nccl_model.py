"""NCCL's own cost model of a collective: why a small all-reduce costs far more than its bytes over the link.

NCCL picks, for every call, the algorithm and protocol its tuning model says is fastest, and that model is a
time per (algorithm, protocol) of ``latency + bytes / bandwidth`` (NVIDIA/nccl at commit 5067397c,
``src/graph/tuning.cc``: ``ncclTunerConstantsDefaults``, ``ncclTopoTuneModel``, ``ncclTopoGetAlgoTime``; the
choice of the least time in ``src/enqueue.cc`` ``topoGetAlgoInfo``). For one node:

* latency: the protocol's base latency plus one hardware latency per step, by link type (NVLink or PCI):
  a ring all-reduce has ``2(n−1)`` steps, an all-gather or reduce-scatter ``n−1``; a tree all-reduce pays
  ``2(n−1)`` of the tree's hardware latency;
* bandwidth: the ring's bus bandwidth ``B`` for Simple, ``B/2`` for LL (8-byte lines carrying 4 bytes of flag),
  ``0.92·B`` for LL128; a tree all-reduce ``0.92·B`` (LL ``/3.8``, LL128 ``·7/9``) at half the ranks' ratio,
  with NCCL's size-dependent tree correction; the bus bandwidth turns into the algorithm bandwidth by
  ``n / steps`` (ring) or ``1/2`` (tree), so the time is ``latency + nbytes / algbw`` with ``nbytes`` the buffer
  (an all-gather's or reduce-scatter's whole output, ``ncclFuncMaxSendRecvCount``);
* LL128 only where the GPUs' path is NVLink (``typeIntra <= PATH_NVB``): over PCIe NCCL chooses between LL
  (small messages) and Simple.

``B`` is NCCL's ``nChannels · bwIntra``; here it is the GPU's collective bandwidth
(:meth:`GPUSpec.collective_bw`: the measured large-message bus bandwidth where there is one). Left out: the caps
that need NCCL's channel count or compute capability (``llMaxBws``, ``perChMax*Bws``: over PCIe LL's single-node
cap of 39-282 GB/s never binds), the 0.85 of the plain (unbalanced) tree pattern, and net and CollNet/NVLS
algorithms (one node, no NVSwitch multicast modelled).

Checked against measured NCCL times (tests/test_nccl_model.py): on 4 RTX PRO 6000 Blackwell cards behind PCIe
switches, with NCCL at its defaults, the model given that machine's measured 32 MB time reproduces its measured
times from 256 B to 1 MB within 15%, its one outlying row (64 KB: 71.2 µs, between 15.6 µs at 32 KB and 24.7 µs
at 128 KB) excepted (github.com/voipmonitor/rtx6kpro, commit 29f3863a,
hardware/asus-esc8000a-e13p-broadcom-switches.md, "AllReduce: Custom vs NCCL (4 GPU, fp16)" and "Raw
AllReduce Crossover"). On two other machines of that knowledge base the model is slower than measured (up to
+30% on four cards, +61% on eight at 256 KB): docs/fidelity.md.
"""
from __future__ import annotations

import math

# Microseconds, [algorithm][protocol] with protocols (LL, LL128, Simple): tuning.cc baseLatencies, hwLatencies.
PROTOCOLS = ("ll", "ll128", "simple")
BASE_LATENCY_US = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
HW_LATENCY_US = {"nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
                 "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)}}
# tuning.cc treeCorrectionFactor: [protocol][log2(nbytes / 64)], 64 B to 256 MB
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9))
RING_BW = (0.5, 0.92, 1.0)                       # × B: LL, LL128, Simple
TREE_BW = (0.92 / 3.8, 0.92 * 7.0 / 9.0, 0.92)   # × B, allreduce on one node
COLLECTIVES = ("allreduce", "allgather", "reducescatter")
LINKS = tuple(HW_LATENCY_US)


class NcclCollective:
    """One collective over ``ranks`` GPUs of one node: :meth:`time` of a buffer of ``nbytes`` as NCCL's tuning
    model prices it (the least over the algorithms and protocols it may choose)."""

    def __init__(self, collective: str, ranks: int, busbw: float, link: str):
        if collective not in COLLECTIVES:
            raise ValueError(f"collective must be one of {', '.join(COLLECTIVES)}, got {collective!r}")
        if link not in LINKS:
            raise ValueError(f"NCCL's tuning model knows the links {', '.join(LINKS)}, got {link!r}")
        if ranks < 2 or busbw <= 0:
            raise ValueError(f"a collective needs >= 2 ranks and a bus bandwidth > 0, got {ranks}, {busbw}")
        self.collective, self.ranks, self.busbw, self.link = collective, ranks, busbw, link
        steps = 2 * (ranks - 1) if collective == "allreduce" else ranks - 1
        allowed = range(3) if link == "nvlink" else (0, 2)        # LL128 only over NVLink
        # (seconds, seconds per byte, tree-correction row or None) per algorithm and protocol
        self.lines = [((BASE_LATENCY_US["ring"][p] + steps * HW_LATENCY_US[link]["ring"][p]) * 1e-6,
                       steps / ranks / (RING_BW[p] * busbw), None) for p in allowed]
        if collective == "allreduce":
            self.lines += [((BASE_LATENCY_US["tree"][p] + 2 * (ranks - 1) * HW_LATENCY_US[link]["tree"][p]) * 1e-6,
                            2 / (TREE_BW[p] * busbw), TREE_CORRECTION[p]) for p in allowed]

    def time(self, nbytes: float) -> float:
        """Seconds NCCL's model gives a call on ``nbytes`` bytes (0 for none)."""
        if nbytes <= 0:
            return 0.0
        log_size = int(nbytes) >> 6
        log_size = log_size.bit_length() - 1 if log_size else -1
        best = math.inf
        for latency, per_byte, correction in self.lines:
            if correction is not None and 0 <= log_size < 23:
                per_byte /= correction[log_size]
            t = latency + nbytes * per_byte
            if t < best:
                best = t
        return best

    def least_latency(self) -> float:
        """The smallest fixed cost of any line (a lower bound's per-call term)."""
        return min(line[0] for line in self.lines)

    def least_per_byte(self) -> float:
        """The smallest cost per byte of any line (a lower bound's per-byte term: the tree's corrections only
        slow it)."""
        return min(line[1] for line in self.lines)

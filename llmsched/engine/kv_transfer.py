"""Moving KV: how many bytes a request's KV is, how long a transfer takes on a link that others share, and how much
of it layer-wise pipelining hides behind compute. One model for KV offload tiers (a prefix loaded from host memory
or disk, a store written back) and for disaggregated prefill -> decode transfers.

* **Bytes.** A token's KV is layers x KV heads x head_dim x 2 (K and V) x the KV dtype's bytes (MLA: layers x
  (latent + rotary key) x bytes), ``ModelSpec.kv_bytes_per_token``. Under tensor parallelism each rank holds its
  KV heads' share (a replica of one head when TP exceeds the heads; MLA's latent whole on every rank), and every
  rank moves its own share over its own link at once, so a transfer's time is set by what one rank moves
  (``transfer_split``: what one sender rank sends and one receiver rank receives when the two sides' TP differ).
* **Time.** ``latency + bytes / bandwidth`` alone on a link. Transfers on one direction of a link share it fairly
  (``SharedLink``, processor sharing: n transfers moving bytes each get 1/n of the bandwidth; every finish
  or start re-derives the others' finish times). A transfer first spends its latency (not using bandwidth), then
  moves its bytes. ``concurrency`` bounds the transfers in service at once, the rest wait in order (vLLM's CPU
  offload runs one copy job at a time per direction: ``concurrency=1``).
* **Pipelining.** A connector that moves layer i while layer i+1 computes (LMCache's layer-wise retrieve and
  store; Splitwise's layer-wise KV send) takes ``pipelined`` time instead of the sum.

It knows nothing of the simulator: the event loop asks a ``SharedLink`` when its next transfer ends
(``next_completion``), advances it to a time (``advance``: the transfers finished by then) and starts transfers
(``start``).
"""
from __future__ import annotations

from collections import deque

from ..hardware.models import ModelSpec


def check_tp(spec: ModelSpec, tp: int, side: str = "") -> None:
    """A TP degree ``spec``'s KV heads split over: one that divides them or a multiple of them (MLA: any)."""
    where = f"{side} " if side else ""
    if not isinstance(tp, int) or tp < 1:
        raise ValueError(f"{where}tensor parallelism must be a positive integer, got {tp!r}")
    if not spec.is_mla and spec.kv_heads % tp and tp % spec.kv_heads:
        divisors = [d for d in range(1, spec.kv_heads + 1) if spec.kv_heads % d == 0]
        raise ValueError(f"{where}TP {tp} does not split {spec.name}'s {spec.kv_heads} KV heads: use a TP in "
                         f"{divisors} or a multiple of {spec.kv_heads}")


def rank_token_bytes(spec: ModelSpec, tp: int) -> int:
    """KV bytes of one token one rank of a TP-``tp`` group holds: its heads' share (a whole replicated head when
    ``tp`` exceeds the KV heads; MLA's whole latent)."""
    check_tp(spec, tp)
    if spec.is_mla:
        return spec.kv_bytes_per_token
    heads = max(1, spec.kv_heads // tp)
    return 2 * spec.layers * heads * spec.head_dim * spec.kv_dtype_bytes


def sending_ranks(spec: ModelSpec, src_tp: int, dst_tp: int) -> int:
    """How many ranks of a TP-``src_tp`` group send when a TP-``dst_tp`` group reads a KV from it, as vLLM's NIXL
    connector maps the ranks (``kv_connector/v1/nixl/tp_mapping.py``, ``compute_tp_mapping``, vLLM 0.32): a
    receiver group at least as wide reads from every sender (receiver ``j`` from sender ``j * src_tp // dst_tp``);
    a narrower one reads, in each receiver's block of senders, from one sender per distinct head it needs (one
    when MLA's latent or a head is replicated there)."""
    if dst_tp >= src_tp:
        return src_tp
    heads_a_receiver = 1 if spec.is_mla else max(1, spec.kv_heads // dst_tp)
    return dst_tp * min(src_tp // dst_tp, heads_a_receiver)


def transfer_split(spec: ModelSpec, tokens: int, src_tp: int, dst_tp: int) -> tuple[int, int]:
    """``(bytes one sender rank sends, bytes one receiver rank receives)`` when ``tokens`` tokens' KV move from a
    TP-``src_tp`` group to a TP-``dst_tp`` group, every rank on its own link. Each receiver takes its own heads'
    share whole (a replica of a head, or MLA's latent, as many times as receivers hold it), and the
    ``sending_ranks`` send it all in equal parts: a sender serving several receivers that hold replicas sends a
    head's share several times."""
    check_tp(spec, src_tp, "sender")
    check_tp(spec, dst_tp, "receiver")
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")
    recv = tokens * rank_token_bytes(spec, dst_tp)
    return -(-recv * dst_tp // sending_ranks(spec, src_tp, dst_tp)), recv


def pipelined(first: float, second: float, layers: int) -> float:
    """Two stages over ``layers`` layers, each taking ``first`` and ``second`` a layer, where layer i's second
    stage needs its first and the first stage of layer i+1 runs during the second of layer i (a transfer of layer
    i+1 overlaps the compute of layer i, or a compute of layer i+1 overlaps the transfer of layer i)."""
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    return first + (layers - 1) * max(first, second) + second


def overlap(totals, layers: int) -> float:
    """Stages of ``totals`` seconds each, every one spread evenly over ``layers`` layers and run as a pipeline
    (layer i of a stage after layer i of the stage before it): the sum of one layer of each plus ``layers - 1``
    layers of the slowest (a load, the step's compute and a store, layer by layer)."""
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    per = [t / layers for t in totals]
    return sum(per) + (layers - 1) * max(per)


class SharedLink:
    """One direction of a link: transfers share ``bandwidth`` (bytes/s) fairly once their ``latency`` (seconds, on
    top of any extra latency a transfer brings) has passed; at most ``concurrency`` in service (0: no bound), later
    ones wait in arrival order. Time only moves forward (``advance``)."""

    __slots__ = ("bandwidth", "latency", "concurrency", "now", "waiting", "starting", "flowing", "busy_time",
                 "bytes_done", "done_count", "cached_next", "fifo")

    def __init__(self, bandwidth: float, latency: float, concurrency: int = 0):
        if not bandwidth > 0:
            raise ValueError(f"a link's bandwidth must be above zero, got {bandwidth!r}")
        if not latency >= 0:
            raise ValueError(f"a link's latency must be >= 0, got {latency!r}")
        if concurrency < 0:
            raise ValueError(f"concurrency must be >= 0 (0: unbounded), got {concurrency}")
        self.bandwidth = bandwidth
        self.latency = latency
        self.concurrency = concurrency
        self.now = 0.0
        self.waiting: deque = deque()  # [tag, bytes, extra latency]
        self.starting: list = []  # [ready time, tag, bytes]: in their latency
        self.flowing: list = []  # [bytes left, tag]: sharing the bandwidth
        self.busy_time = 0.0  # time with bytes moving
        self.bytes_done = 0.0
        self.done_count = 0
        self.cached_next = None  # next_completion's answer while nothing changed (False: not known)
        # one transfer at a time: each finishes at a time known when it is submitted ([finish, tag, bytes] in order)
        self.fifo: deque | None = deque() if concurrency == 1 else None

    def __len__(self) -> int:
        if self.fifo is not None:
            return len(self.fifo)
        return len(self.waiting) + len(self.starting) + len(self.flowing)

    @property
    def in_service(self) -> int:
        return len(self.starting) + len(self.flowing)

    def start(self, now: float, nbytes: float, tag, extra_latency: float = 0.0) -> None:
        """A transfer of ``nbytes`` (named ``tag``) submitted at ``now`` (not before the link's clock; the link is
        advanced to it first, so call ``advance`` and collect what finished before)."""
        if nbytes < 0 or extra_latency < 0:
            raise ValueError(f"a transfer needs bytes >= 0 and latency >= 0, got {nbytes!r} and {extra_latency!r}")
        if self.fifo is not None:  # after the one before it: latency, then its bytes alone
            done = self.advance(now)
            assert not done, "advance the link to now (and collect its finished transfers) before starting one"
            begin = self.fifo[-1][0] if self.fifo and self.fifo[-1][0] > now else now
            self.fifo.append([begin + self.latency + extra_latency + nbytes / self.bandwidth, tag, nbytes])
            return
        done = self.advance(now)
        assert not done, "advance the link to now (and collect its finished transfers) before starting one"
        self.cached_next = False
        if self.concurrency and self.in_service >= self.concurrency:
            self.waiting.append([tag, nbytes, extra_latency])
        else:
            self.starting.append([now + self.latency + extra_latency, tag, nbytes])

    def next_event(self) -> float | None:
        """When the next transfer ends its latency or finishes its bytes (None: the link is idle)."""
        return self.next_step()[0]

    def next_step(self) -> tuple:
        if self.fifo is not None:
            return (self.fifo[0][0], True) if self.fifo else (None, False)
        return self.next_step_shared()

    def next_step_shared(self) -> tuple:
        """``(time, bytes finish)``: the next event and whether it is a transfer finishing its bytes (else one
        ending its latency); ``(None, False)`` when idle."""
        t = min((s[0] for s in self.starting), default=None)
        if self.flowing:
            least = min(f[0] for f in self.flowing)
            end = self.now + least * len(self.flowing) / self.bandwidth
            if t is None or end <= t:
                return end, True
        return t, False

    def next_completion(self) -> float | None:
        """When the next transfer finishes (None: none in flight), as the link stands now."""
        if not len(self):
            return None
        if self.fifo is not None:
            return self.fifo[0][0]
        if self.cached_next:
            return self.cached_next
        probe = SharedLink(self.bandwidth, self.latency, self.concurrency)
        probe.now = self.now  # the first to finish is in service: those waiting start only after it
        if not self.starting and not self.flowing:
            probe.waiting = deque(list(w) for w in self.waiting)
        probe.starting = [list(s) for s in self.starting]
        probe.flowing = [list(f) for f in self.flowing]
        while True:
            t = probe.next_event()
            done = probe.advance(t)
            if done:
                self.cached_next = done[0][1]
                return self.cached_next

    def advance(self, t: float) -> list:
        """Move the clock to ``t``; returns ``[(tag, finish time)]`` of the transfers that finished by then, in
        the order they finished (ties: in order of starting)."""
        if t < self.now:
            raise ValueError(f"a link's clock runs forward: asked for {t} at {self.now}")
        if self.fifo is not None:
            return self.advance_fifo(t)
        if t > self.now:  # the probe's arithmetic no longer follows this state's exactly
            self.cached_next = False
        finished = []
        while True:
            te, bytes_done = self.next_step()
            if te is None or te > t:
                self.progress(t)
                if finished:
                    self.cached_next = False
                return finished
            self.progress(te, bytes_done)
            ready = [s for s in self.starting if s[0] <= te]
            if ready:
                self.starting = [s for s in self.starting if s[0] > te]
                for _, tag, nbytes in ready:
                    if nbytes > 0:
                        self.flowing.append([float(nbytes), tag])
                    else:
                        finished.append((tag, te))
                        self.done_count += 1
            gone = [f for f in self.flowing if f[0] <= 0.0]
            if gone:
                self.flowing = [f for f in self.flowing if f[0] > 0.0]
                for _, tag in gone:
                    finished.append((tag, te))
                    self.done_count += 1
            while self.waiting and (not self.concurrency or self.in_service < self.concurrency):
                tag, nbytes, extra = self.waiting.popleft()
                self.starting.append([te + self.latency + extra, tag, nbytes])

    def advance_fifo(self, t: float) -> list:
        fifo = self.fifo
        finished = []
        while fifo and fifo[0][0] <= t:
            end, tag, nbytes = fifo.popleft()
            finished.append((tag, end))
            self.busy_time += nbytes / self.bandwidth
            self.bytes_done += nbytes
            self.done_count += 1
        self.now = t
        return finished

    def progress(self, t: float, finish_least: bool = False) -> None:
        """Bytes move from the clock to ``t`` with no event between; with ``finish_least`` the transfers with the
        least bytes left finish exactly at ``t`` (the event computed them to), whatever the rounding of ``t``."""
        dt = t - self.now
        flowing = self.flowing
        if flowing and (dt > 0 or finish_least):
            n = len(flowing)
            least = min(f[0] for f in flowing)
            share = least if finish_least else min(dt * self.bandwidth / n, least)
            for f in flowing:
                left = f[0] - share
                f[0] = left if left > least * 1e-9 else 0.0
            self.busy_time += dt
            self.bytes_done += share * n
        self.now = t

    def utilisation(self, duration: float) -> float:
        """Share of ``duration`` the link moved bytes."""
        return self.busy_time / duration if duration > 0 else 0.0

"""RAD (Bari et al., Algorithm 1) and its low-TBT mirror (Bari et al. Appendix D, an "Algorithm 2" in all but name).

Both are throughput-optimal in the paper's tile model (Theorem 2): prefills run alone, one request at a time,
in chunks of t*_lcm = LCM(t*_row, t*_col, t*_red) tokens, and decode batches hold at most t*_col requests,
so every batch is optimally tiled when the queues are full. They never mix prefill and decode work (from the authors' code). The tile sizes default to the replica's GPU preset (read from the view's batch-time model).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...engine.plan import BatchPlan
from ...engine.view import ReplicaView
from ..base import Scheduler
from ..decode_pass import RunningWork, add_decodes
from ..kv_holders import front_holds_kv
from ..registry import register
from ..watermark import WatermarkAdmission

DEFAULT_TILE = (256, 128, 32)  # Bari et al. §1.3's A100 tile, when the view has no GPU preset


def tile_of(view: ReplicaView) -> tuple[int, int, int]:
    """(t_row, t_col, t_red) of the replica's GPU, from its batch-time model (else the A100 tile)."""
    gpu = getattr(view.batch_time, "gpu", None)
    return (gpu.t_row, gpu.t_col, gpu.t_red) if gpu is not None else DEFAULT_TILE


class _TiledBase(WatermarkAdmission, Scheduler):
    """Shared parts: tile constants, the prefill in progress, KV-safe admission of the FCFS head.

    With a prefix cache: plans as without one (a prompt's chunks and its tile count its whole length); the replica
    starts each admission after its cached blocks, so a chunk computes at most what is left and the step is that
    much shorter.
    """

    family = "RAD/SLAI"
    # a prompt a prefill instance sent starts as the FCFS head with its own blocks and one token to compute; a decode
    # short of a block beside it preempts alone (kv_holders.front_holds_kv)
    serves_transferred_kv = True

    def _tiles(self, view: ReplicaView) -> tuple[int, int]:
        """(t*_col, t*_lcm). A decode batch holds at most t*_col requests, and at most ``max_num_batched_tokens``
        (one token each): below t*_col the token budget is the column (tiles are not full, but the limit holds)."""
        col, lcm = self._tile_sizes(view)
        return min(col, view.max_num_batched_tokens), lcm

    def _tile_sizes(self, view: ReplicaView) -> tuple[int, int]:
        if self._lcm is None:
            t_row, t_col, t_red = tile_of(view)
            t_row = self.t_row or t_row
            t_col = self.t_col or t_col
            t_red = self.t_red or t_red
            self._lcm = math.lcm(t_row, t_col, t_red)
            self._col = t_col
        return self._col, self._lcm

    def _check(self):
        if self.n < 1:
            raise ValueError(f"{self.name}: cycle parameter n must be >= 1, got {self.n}")
        for label in ("t_row", "t_col", "t_red"):
            v = getattr(self, label)
            if v is not None and (v < 1 or v & (v - 1)):
                raise ValueError(f"{self.name}: {label} must be a power of two (a GPU tile size), got {v}")

    @staticmethod
    def _prefilling(view: ReplicaView):
        for r in view.running:
            if not r.is_decode:
                return r
        return None

    def _chunk(self, view: ReplicaView, r, lcm: int) -> BatchPlan | None:
        """One prefill chunk of ``r`` (at most t*_lcm tokens), or None when the KV cache cannot take it."""
        n = min(lcm, r.remaining_prefill, view.max_num_batched_tokens)
        if view.extra_blocks(r, r.num_computed + n) > view.free_blocks:
            return None
        return BatchPlan(prefills=[(r, n)])

    def _can_start(self, view: ReplicaView, active: int, t_col: int) -> bool:
        """The FCFS head may start: a seat under t*_col (and max_num_seqs), and KV for its whole prompt (beyond the
        blocks a KV tier below the GPU loaded for it while it waited: counted again, they left a head longer than
        the free blocks waiting for ever, and the replica stalled)."""
        head = view.waiting[0]
        if active >= min(t_col, view.max_num_seqs) or view.num_running >= view.max_num_seqs:
            return False
        need = view.extra_blocks(head, head.num_tokens) if head.num_blocks else view.blocks_for(head.num_tokens)
        return need <= view.free_blocks - self._watermark(view)

    def _watermark(self, view: ReplicaView) -> int:
        return int(self.watermark * view.total_blocks)

    def params(self) -> dict:
        return {k: v for k, v in super().params().items() if not k.startswith("_")}


@register
@dataclass
class RAD(_TiledBase):
    """RAD: whole prefills (t*_lcm chunks) until t*_col requests decode, then decode batches; cycles of n starts.

    Algorithm 1 of Bari et al. (§4.1): decode mode when |D| = t*_col, P is empty or the cycle has started n
    requests (k = n); otherwise prefill mode runs the FCFS head's whole prompt, one t*_lcm-token chunk per batch
    (the last chunk is the remainder: the paper leaves it open), and adds it to D. A cycle ends when D empties (k ← 0). With a
    KV cache smaller than Assumption 4 asks (t*_col requests of maximal length), a prompt whose KV does not fit
    waits as if D were full, and a decode short of a block preempts the newest request (recompute), which
    rejoins the front of P. Use with ``--router random`` for the paper's multi-node setting (§4.1).

    Requests that wait holding KV (a prompt a prefill instance sent, on a disaggregated fleet's decode pool; a
    prefix a tier loaded) are outside the paper's model: a decode or a prefill chunk that finds no block beside them
    is preempted alone, and they start next (``kv_holders.front_holds_kv``); their prefill is one token.
    """

    name = "rad"
    steady_decodes = True  # a decode-only step repeats while nothing arrives, finishes or runs short of KV
    plans_decode_group = True  # a decode batch is every decode-phase request: the group, when its blocks fit
    source = "Bari, Hegde, de Veciana, POMACS 2025 §4.1 Algorithm 1, Theorem 2"
    n: int = 1024
    t_row: int | None = None
    t_col: int | None = None
    t_red: int | None = None
    watermark: float = 0.0
    _k: int = field(default=0, init=False, repr=False)
    _lcm: int | None = field(default=None, init=False, repr=False)
    _col: int = field(default=0, init=False, repr=False)

    def __post_init__(self):
        self._check()

    @property
    def requests_in_cycle(self) -> int:
        return self._k

    def schedule(self, view: ReplicaView) -> BatchPlan:
        t_col, lcm = self._tiles(view)
        work = RunningWork(view)  # D: the decode-phase requests; P's request in progress: the first other one
        current = work.partials[0] if work.partials else None
        if current is not None:  # a prefill is never interrupted (non-preemptive, Algorithm 1 lines 10-14)
            plan = self._chunk(view, current, lcm)
            if plan is not None:
                return plan
        num_decoding = work.num_decodes
        if not num_decoding and current is None:
            self._k = 0  # D is empty: the cycle is over
        if current is None and view.waiting and self._k < self.n and num_decoding < t_col \
                and self._can_start(view, view.num_running, t_col):
            plan = self._chunk(view, view.waiting[0], lcm)
            if plan is not None:
                self._k += 1
                return plan
        plan = BatchPlan()
        if num_decoding:  # over the budget only when swapped requests came back beside newer ones: the oldest decode
            work.add_decodes(plan, limit=view.max_num_batched_tokens, among_decodes=True)
            if plan.preempt and not plan.decodes and not front_holds_kv(view):
                return BatchPlan()
        elif current is not None and front_holds_kv(view):
            plan.preempt.append(current)  # its chunk finds no block, the requests holding KV have the rest
        return plan


@register
@dataclass
class RADLowTBT(_TiledBase):
    """RAD's Appendix D mirror: up to n whole prefills, then decode t*_col at a time until all n are done.

    Bari et al. App. D (an "Algorithm 2" in all but name): prefill mode takes up to n requests FCFS (each prefilled whole
    in t*_lcm chunks) into D; decode mode keeps a decode batch of min(t*_col, |D|) requests, refilling it from
    D as requests finish, until D is empty; then the next prefill mode. Active requests decode in consecutive
    batches (low TBT) but wait for the whole prefill mode first (high TTFT). Prefill mode also ends early when
    the queue empties or the KV cache cannot hold the next prompt. Requests waiting with KV: as RAD's.
    """

    name = "rad-lowtbt"
    runs_beside_tier_loads = False  # its cycles stall beside the blocks a tier loaded for waiting requests
    source = "Bari et al. Appendix D (throughput-optimal scheduler with low TBT)"
    n: int = 256
    t_row: int | None = None
    t_col: int | None = None
    t_red: int | None = None
    watermark: float = 0.0
    _k: int = field(default=0, init=False, repr=False)
    _decoding: bool = field(default=False, init=False, repr=False)
    _active: list = field(default_factory=list, init=False, repr=False)
    _lcm: int | None = field(default=None, init=False, repr=False)
    _col: int = field(default=0, init=False, repr=False)

    def __post_init__(self):
        self._check()

    def schedule(self, view: ReplicaView) -> BatchPlan:
        t_col, lcm = self._tiles(view)
        current = self._prefilling(view)
        if current is not None:
            plan = self._chunk(view, current, lcm)
            if plan is not None:
                return plan
        if not self._decoding and current is None:
            plan = self._start(view, lcm)
            if plan is not None:
                return plan
            self._decoding = True
        decoding = [r for r in view.running if r.is_decode]
        ids = {r.id for r in decoding}
        self._active = [r for r in self._active if r.id in ids]
        if len(self._active) < t_col:
            chosen = {r.id for r in self._active}
            spare = sorted((r for r in decoding if r.id not in chosen), key=_first_token)
            self._active += spare[:t_col - len(self._active)]
        if not self._active:  # D is empty: back to prefill mode
            self._decoding, self._k = False, 0
            if current is not None:  # its chunk finds no block: with requests holding KV it makes way for them
                return BatchPlan(preempt=[current] if front_holds_kv(view) else [])
            plan = self._start(view, lcm)
            return plan if plan is not None else BatchPlan()
        plan = BatchPlan()
        # the batch decodes; a decode short of a block preempts the newest decoding request outside the batch
        # first (as RAD's does), the batch's own newest only then: with a batch of one, preempting itself alone
        # would leave every other decode holding the cache and the replica idle
        active = {r.id for r in self._active}
        others = [r for r in decoding if r.id not in active]
        add_decodes(view, plan, self._active + others, limit=len(self._active))
        if plan.preempt and not plan.decodes and not front_holds_kv(view):
            return BatchPlan()
        return plan

    def _start(self, view: ReplicaView, lcm: int) -> BatchPlan | None:
        """The first chunk of the FCFS head, when this prefill mode may start another request."""
        if view.waiting and self._k < self.n and self._can_start(view, 0, view.max_num_seqs):
            plan = self._chunk(view, view.waiting[0], lcm)
            if plan is not None:
                self._k += 1
                return plan
        return None


def _first_token(r) -> float:
    return r.first_token

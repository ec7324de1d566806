"""KV offload tiers resolved for one run: sizes into chunks of the model's KV, link names into figures for the GPU,
and the defaults of the connector modelled (the mode).

Modes (docs/kv-offload.md has the sources):

* ``vllm``: vLLM 0.32.0's native ``OffloadingConnector`` (``--kv-offloading-backend native``): chunks of one GPU
  block (``blocks_per_chunk`` 1), one DMA copy a block (3.5 µs each, hardware/links.py), one copy job at a time in
  each direction (``SingleDirectionOffloadingHandler``: concurrency 1); lower tiers through vLLM's tiering manager
  (its file-system tier: 16 read and 16 write threads).
* ``lmcache``: LMCache's connector (vLLM 0.32.0's ``LMCacheConnectorV1``, vendored adapter
  ``lmcache_integration/vllm_v1_adapter.py``) with LMCache's local CPU and disk backends: chunks of 256 tokens
  (``chunk_size``), a disk write pool of 4 workers (``LocalDiskWorker``).
* ``lmcache-layerwise``: the same with LMCache's ``use_layerwise``: a load's layers overlap the step's compute.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..hardware.gpus import GPUSpec
from ..hardware.host_memory import node_of
from ..hardware.links import DMA_OP_LATENCY, Link, link as resolve_link
from ..hardware.models import ModelSpec
from ..hardware.quantities import shown_bytes
from .kv_transfer import rank_token_bytes
from .offload_spec import MODES, TierSpec

LMCACHE_CHUNK_TOKENS = 256  # LMCache's chunk_size default (lmcache/v1/config.py)
DEFAULT_LINK = {"cpu": "pcie", "disk": "nvme", "remote": "ib-400g"}
DEFAULT_CONCURRENCY = {("vllm", "cpu"): 1, ("vllm", "disk"): 16, ("vllm", "remote"): 0,
                       ("lmcache", "cpu"): 1, ("lmcache", "disk"): 4, ("lmcache", "remote"): 0}


@dataclass(frozen=True)
class TierPlan:
    """A tier ready to run: ``chunks`` it holds, its ``link``, a chunk's bytes over the whole TP group
    (``chunk_bytes``, what a tier below host memory moves) and on one rank (``rank_chunk_bytes``, what each rank's
    PCIe link moves), ``op_latency`` per chunk moved, ``concurrency`` per direction (0: no bound)."""

    medium: str
    size: float
    chunks: int
    link: Link
    chunk_bytes: int
    rank_chunk_bytes: int
    op_latency: float
    concurrency: int

    def describe(self) -> dict:
        return {"medium": self.medium, "size_bytes": self.size, "chunks": self.chunks, "link": self.link.describe(),
                "chunk_bytes": self.chunk_bytes, "op_latency": self.op_latency, "concurrency": self.concurrency}


@dataclass(frozen=True)
class OffloadPlan:
    """The run's tiers and the connector ``mode``; ``chunk_tokens`` (``chunk_blocks`` GPU blocks) a chunk;
    ``block_rank_bytes``: one GPU block's KV on one rank; ``layers``: the model's, for layer-wise loads."""

    mode: str
    chunk_tokens: int
    chunk_blocks: int
    block_rank_bytes: int
    layers: int
    tiers: tuple[TierPlan, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t.medium for t in self.tiers)

    @property
    def sync(self) -> bool:
        """LMCache's loads and stores block the step (vLLM's run beside it)."""
        return self.mode != "vllm"

    def describe(self) -> dict:
        return {"mode": self.mode, "chunk_tokens": self.chunk_tokens, "tiers": [t.describe() for t in self.tiers]}


def plan_offload(tiers: tuple[TierSpec, ...], mode: str, spec: ModelSpec, device: GPUSpec, tp: int,
                 block_size: int, replicas: int = 1) -> OffloadPlan:
    """``tiers`` for a replica of ``spec`` on ``device`` at TP ``tp``; checks the sizes against the node's host
    memory where the GPU preset names a node (``replicas`` of TP ``tp`` sharing it as far as they fit)."""
    if mode not in MODES:
        raise ValueError(f"kv_offload_mode {mode!r} is not one of {', '.join(MODES)}")
    family = "vllm" if mode == "vllm" else "lmcache"
    given = {t.chunk_tokens for t in tiers if t.chunk_tokens is not None}
    chunk_tokens = given.pop() if given else (block_size if family == "vllm" else LMCACHE_CHUNK_TOKENS)
    if chunk_tokens % block_size:
        raise ValueError(f"kv_offload: chunk_tokens {chunk_tokens} is not a multiple of the KV block size "
                         f"{block_size} (vLLM and LMCache move whole GPU blocks); use {block_size} or a multiple")
    rank_bytes = rank_token_bytes(spec, tp)
    copies = 1 if spec.is_mla else tp  # vLLM keeps each rank's share; MLA's latent once (replicated layout)
    chunk_bytes = chunk_tokens * rank_bytes * copies
    out = []
    for t in tiers:
        chunks = int(t.size // chunk_bytes)
        if chunks < 1:
            raise ValueError(f"kv_offload {t.medium} tier of {shown_bytes(t.size)} holds no chunk of "
                             f"{chunk_tokens} tokens of {spec.name} KV ({shown_bytes(chunk_bytes)}); make it larger")
        lk = resolve_link(t.link or DEFAULT_LINK[t.medium], device)
        op = t.op_latency if t.op_latency is not None else (DMA_OP_LATENCY if t.medium == "cpu" else lk.latency)
        conc = t.concurrency if t.concurrency is not None else DEFAULT_CONCURRENCY[(family, t.medium)]
        out.append(TierPlan(t.medium, t.size, chunks, lk, chunk_bytes, chunk_tokens * rank_bytes, op, conc))
    check_host_memory(out, device, tp, replicas)
    return OffloadPlan(mode, chunk_tokens, chunk_tokens // block_size, block_size * rank_bytes, spec.layers,
                       tuple(out))


def check_host_memory(tiers: list[TierPlan], device: GPUSpec, tp: int, replicas: int) -> None:
    """The cpu tiers of the replicas one node holds fit its host memory (where the GPU preset names a node)."""
    node = node_of(device)
    cpu = sum(t.size for t in tiers if t.medium == "cpu")
    if node is None or not cpu:
        return
    per_node = max(1, min(replicas, node.gpus // tp)) if tp <= node.gpus else 1
    if cpu * per_node > node.host_bytes:
        raise ValueError(f"kv_offload cpu tier {shown_bytes(cpu)} per replica x {per_node} replica(s) of TP {tp} "
                         f"on a {node.name} ({node.gpus} GPUs) = {shown_bytes(cpu * per_node)}, more than its "
                         f"{shown_bytes(node.host_bytes)} of host memory; lower the cpu tier to at most "
                         f"{shown_bytes(node.host_bytes / per_node)}")

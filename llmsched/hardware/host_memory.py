"""Host memory of the node a GPU preset comes in, where the preset is a part of one NVIDIA names (the DGX systems):
what a CPU KV tier of its replicas can at most use.

* a100: NVIDIA DGX A100 datasheet (DGX A100 640GB, the 80 GB SXM part of the preset): 2 TB system memory, 8 GPUs.
* h100: NVIDIA DGX H100 datasheet: 2 TB system memory, 8 GPUs.
* h200: NVIDIA DGX H200 datasheet: 2 TB system memory, 8 GPUs.
* b200: NVIDIA DGX B200 datasheet: 2 TB system memory, configurable to 4 TB; 8 GPUs (4 TB: the most it has).

The datasheets' "TB" of memory are binary (32 x 64 GB DIMMs = 2 TiB). PCIe cards (L40S, RTX, H100 PCIe...) go into
servers of any size: no node, no check.
"""
from __future__ import annotations

from dataclasses import dataclass

from .gpus import GPUSpec

TiB = 1 << 40


@dataclass(frozen=True)
class Node:
    name: str
    host_bytes: int
    gpus: int


NODES = {"a100": Node("DGX A100", 2 * TiB, 8), "h100": Node("DGX H100", 2 * TiB, 8),
         "h200": Node("DGX H200", 2 * TiB, 8), "b200": Node("DGX B200", 4 * TiB, 8)}


def node_of(device: GPUSpec) -> Node | None:
    """The node ``device``'s preset names, or None."""
    return NODES.get(device.name)

"""Links KV moves over: host memory and a GPU over PCIe, GPUs of a node over NVLink, nodes over InfiniBand/RoCE, a
local NVMe drive; named presets with their sources, or one given as ``bw=...,latency=...``.

A link has a bandwidth in bytes/s in each direction (``bandwidth`` towards the GPU: a load, a KV receive;
``write_bandwidth`` away from it: a store, a KV send) and a per-transfer latency in seconds. Where a measurement
of the achievable rate is published it is the figure; otherwise the nominal rate times a stated derating. The
KV-transfer model (``engine/kv_transfer.py``) prices a transfer as ``latency + bytes / bandwidth`` and shares a
link's bandwidth among the transfers on it; offload tiers and disaggregated prefill/decode both use these.

Sources:

* PCIe host<->GPU (``pcie-gen5``, ``pcie-gen4``): vLLM's CPU-offload DMA copies on an H100 (PCIe Gen5 x16), a
  transfer of 1,000 blocks of 4 KB to 16 MB each (O. Ozeri, D. Harnik, "Inside vLLM's New KV Offloading
  Connector", vLLM blog, 2026-01-08, Figures 3 and 4: 51.2 GB/s CPU->GPU and 50.7 GB/s GPU->CPU at 16 MB blocks).
  A fit of those 13 points per direction, time = 3.5 µs per block + bytes / rate, gives 52.6 GB/s CPU->GPU and
  50.8 GB/s GPU->CPU (within 6% of every point from 8 KB up); the 3.5 µs is a copy's own cost and goes with the
  tier that issues one copy per block (``DMA_OP_LATENCY``). Gen4 x16 has no such measurement here: its nominal
  31.5 GB/s a direction (16 GT/s x 16 lanes x 128/130) derated by the Gen5 ratio measured above (52.6/63.0 and
  50.8/63.0). The same blog measured 83.4 GB/s with both directions busy at once (2 MB blocks), 18% under the
  two directions' sum: not modelled (each direction is its own link). Latency: 1.0 µs, NCCL's PCIe hop latency
  (``src/graph/tuning.cc`` ``hwLatencies``, as ``hardware/gpus.py`` uses it).
* NVLink (``nvlink3`` A100, ``nvlink4`` H100/H200/H20, ``nvlink5`` B200): per direction, the datasheets' total
  (600 GB/s, 900 GB/s, 1.8 TB/s both directions) halved, derated to the 95.8% that CUDA's
  p2pBandwidthLatencyTest reached of NVLink's nominal unidirectional rate on V100-SXM2 (Dell, "Deep Learning
  Performance with P100 and V100 GPUs on C4130", Table 3: 143.71 of 150 GB/s); latency 0.4 µs, NCCL's NVLink hop.
* InfiniBand/RoCE (``ib-100g``, ``ib-200g``, ``ib-400g``): the line rate over 8, derated to the 87% Mooncake's
  Transfer Engine reached over 4 x 200 Gbps RoCE (87 GB/s of 100; kvcache-ai/Mooncake, doc/en/transfer-engine.md;
  the same page's 8 x 400 Gbps figure, 190 GB/s, is 47.5% of that line rate: a host limit, not a per-NIC one).
  Latency 0.83 µs: the one-way time of a 32-byte RC send measured with perftest's ib_send_lat (D. Potter, master's
  thesis, table "mtu_performance"); a transfer engine's own software path adds to it and is not modelled.
* NVMe (``nvme``): Samsung PM1743 (PCIe Gen5 U.2) product brief, sequential read 13,000 MB/s, sequential write
  6,600 MB/s. Latency 100 µs a request: an order-of-magnitude figure for a random read of TLC NAND (no datasheet
  at hand states one); give a measured one as a custom link.
"""
from __future__ import annotations

from dataclasses import dataclass

from .gpus import GPUSpec, gpu as gpu_preset
from .quantities import parse_rate, parse_seconds

GB = 1e9
# vLLM's CPU backend copies each block with its own DMA descriptor: 3.5 µs a copy (the fit in the module docstring)
DMA_OP_LATENCY = 3.5e-6
PCIE_HOP_LATENCY = 1.0e-6
NVLINK_HOP_LATENCY = 0.4e-6
NVLINK_DERATE = 143.71 / 150.0
IB_DERATE = 87.0 / 100.0
IB_LATENCY = 0.83e-6


@dataclass(frozen=True)
class Link:
    """A link in both directions: ``bandwidth`` towards the GPU (loads, receives) and ``write_bandwidth`` away from
    it (stores, sends), bytes/s; ``latency`` seconds a transfer; ``source`` of the figures."""

    name: str
    bandwidth: float
    latency: float
    source: str
    write_bandwidth: float | None = None

    def __post_init__(self):
        for what, value in (("bandwidth", self.bandwidth), ("latency", self.latency),
                            ("write bandwidth", self.write_bw)):
            if not (value > 0 and value < float("inf")):
                raise ValueError(f"link {self.name!r}: {what} must be above zero, got {value!r}")

    @property
    def write_bw(self) -> float:
        return self.write_bandwidth if self.write_bandwidth is not None else self.bandwidth

    def time(self, nbytes: float, write: bool = False) -> float:
        """One transfer alone on the link: latency + bytes / bandwidth."""
        return self.latency + nbytes / (self.write_bw if write else self.bandwidth)

    def describe(self) -> dict:
        return {"name": self.name, "bandwidth": self.bandwidth, "write_bandwidth": self.write_bw,
                "latency": self.latency, "source": self.source}


def pcie_gen5() -> Link:
    return Link("pcie-gen5", 52.6 * GB, PCIE_HOP_LATENCY, write_bandwidth=50.8 * GB,
                source="H100 PCIe Gen5 x16 DMA, vLLM blog 2026-01-08 Figs. 3-4 fitted (see llmsched/hardware/links.py)")


def pcie_gen4() -> Link:
    nominal = 16 * 16 * 128 / 130 / 8 * GB
    return Link("pcie-gen4", nominal * 52.6 / 63.0, PCIE_HOP_LATENCY, write_bandwidth=nominal * 50.8 / 63.0,
                source="PCIe Gen4 x16 nominal 31.5 GB/s derated by the measured Gen5 ratio (llmsched/hardware/links.py)")


def nvlink(generation: int, total_bidirectional: float, cards: str) -> Link:
    return Link(f"nvlink{generation}", total_bidirectional / 2 * NVLINK_DERATE, NVLINK_HOP_LATENCY,
                source=f"NVLink {generation} ({cards}) datasheet {total_bidirectional / GB:.0f} GB/s both ways, halved, "
                       f"x 0.958 (p2pBandwidthLatencyTest on V100)")


def infiniband(gbits: int) -> Link:
    return Link(f"ib-{gbits}g", gbits / 8 * GB * IB_DERATE, IB_LATENCY,
                source=f"{gbits} Gb/s line rate x 0.87 (Mooncake Transfer Engine, 87 GB/s on 4 x 200 Gbps RoCE); "
                       f"latency ib_send_lat 32 B")


def nvme() -> Link:
    return Link("nvme", 13.0 * GB, 100e-6, write_bandwidth=6.6 * GB,
                source="Samsung PM1743 product brief: 13,000 MB/s read, 6,600 MB/s write; latency an order of "
                       "magnitude, not a datasheet figure")


LINKS = {link.name: link for link in (
    pcie_gen5(), pcie_gen4(), nvlink(3, 600 * GB, "A100"), nvlink(4, 900 * GB, "H100, H200, H20"),
    nvlink(5, 1800 * GB, "B200"), infiniband(100), infiniband(200), infiniband(400), nvme())}
NVLINK_OF_FAMILY = {"a100": "nvlink3", "h100": "nvlink4", "h20": "nvlink4", "b200": "nvlink5"}
ALIASES = {"pcie5": "pcie-gen5", "pcie-5": "pcie-gen5", "pcie4": "pcie-gen4", "pcie-4": "pcie-gen4",
           "ib-100": "ib-100g", "ib-200": "ib-200g", "ib-400": "ib-400g", "roce-100g": "ib-100g",
           "roce-200g": "ib-200g", "roce-400g": "ib-400g"}
PER_CARD = ("pcie", "same-node")  # names resolved from the run's GPU
CUSTOM_EXAMPLE = "bw=25GB/s,latency=5us (or ; between them; optionally write_bw=...)"


def pcie_of(device: GPUSpec) -> Link:
    """The host link of ``device``: its datasheet PCIe figure (both directions, bytes/s) says the generation."""
    return pcie_gen5() if device.host_bw >= 128 * GB else pcie_gen4()


def same_node(device: GPUSpec) -> Link:
    """Between two GPUs of ``device``'s node: NVLink of its generation, else PCIe peer-to-peer at its host link's
    rates (CUDA's p2pBandwidthLatencyTest over PCIe Gen5 x16 reads 54-56 GB/s one way on RTX PRO 6000 machines,
    github.com/voipmonitor/rtx6kpro hardware/pcie-bandwidth.md, near the host-link figure used here)."""
    if device.interconnect == "nvlink":
        name = NVLINK_OF_FAMILY.get(device.family)
        if name is None:
            raise ValueError(f"link same-node: GPU {device.name!r} has NVLink of no generation known here; give the "
                             f"link as {CUSTOM_EXAMPLE}")
        return LINKS[name]
    if device.interconnect == "pcie":
        return pcie_of(device)
    raise ValueError(f"link same-node: GPU {device.name!r} links its GPUs by {device.interconnect}, which has no "
                     f"preset here; give the link as {CUSTOM_EXAMPLE}")


def link(text: str, device: GPUSpec | str | None = None) -> Link:
    """The link named ``text`` (a preset, ``pcie`` or ``same-node`` for ``device``'s own), or a custom one
    ``bw=...,latency=...[,write_bw=...]``; a one-line ValueError naming the text and the fix otherwise."""
    spec = str(text).strip()
    if "=" in spec:
        return custom_link(spec)
    key = ALIASES.get(spec.lower(), spec.lower())
    if key in LINKS:
        return LINKS[key]
    if key in PER_CARD:
        if device is None:
            raise ValueError(f"link {spec!r} depends on the GPU: name a GPU, or give the link by its figures, "
                             f"{CUSTOM_EXAMPLE}")
        device = gpu_preset(device)
        return pcie_of(device) if key == "pcie" else same_node(device)
    raise ValueError(f"unknown link {spec!r}; links: {', '.join(sorted(LINKS) + list(PER_CARD))}, or "
                     f"{CUSTOM_EXAMPLE}")


NETWORK_LINKS = "ib-400g, ib-200g, ib-100g (roce-400g, roce-200g, roce-100g alike), or PCIe: pcie-gen5, pcie-gen4"


def kv_link(text: str, prefill: GPUSpec | str, decode: GPUSpec | str) -> Link:
    """The link a prefill instance on ``prefill`` sends its KV to a decode instance on ``decode`` over:
    ``link(text, decode)``, but no NVLink (a preset, or ``same-node`` on NVLink cards) between cards of two types:
    an NVLink domain (an HGX board, an NVL72 rack) holds cards of one type."""
    a, b = gpu_preset(prefill), gpu_preset(decode)
    out = link(text, b)
    if a.name != b.name:
        nvlinked = [d.name for d in (a, b) if d.interconnect == "nvlink"]
        if out.name.startswith("nvlink") or (str(text).strip().lower() == "same-node" and nvlinked):
            raise ValueError(f"link {str(text).strip()!r}: {a.name} (prefill) and {b.name} (decode) share no NVLink "
                             f"domain (it holds cards of one type); give a network link: {NETWORK_LINKS}")
    return out


def custom_link(spec: str) -> Link:
    """``bw=25GB/s,latency=5us[,write_bw=12GB/s][,name=...]`` (``;`` separates too: a link inside a KV tier's
    short form, whose tiers ``,`` separates)."""
    fields = {}
    for part in spec.replace(";", ",").split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or not value.strip():
            raise ValueError(f"link {spec!r}: {part.strip()!r} is not KEY=VALUE; write {CUSTOM_EXAMPLE}")
        if key in fields:
            raise ValueError(f"link {spec!r}: {key} is given twice")
        fields[key] = value.strip()
    unknown = sorted(set(fields) - {"bw", "latency", "write_bw", "name"})
    if unknown:
        raise ValueError(f"link {spec!r}: unknown key {unknown[0]!r}; keys: bw, latency, write_bw, name")
    missing = [k for k in ("bw", "latency") if k not in fields]
    if missing:
        raise ValueError(f"link {spec!r}: needs {' and '.join(missing)}; write {CUSTOM_EXAMPLE}")
    bw = parse_rate(fields["bw"], f"link {spec!r}: bw")
    latency = parse_seconds(fields["latency"], f"link {spec!r}: latency")
    write = parse_rate(fields["write_bw"], f"link {spec!r}: write_bw") if "write_bw" in fields else None
    return Link(fields.get("name", "custom"), bw, latency, source=f"given: {spec}", write_bandwidth=write)

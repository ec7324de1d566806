"""GPU presets: the datasheet figures a batch-time model needs, each with its source."""
from __future__ import annotations

from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True)
class GPUSpec:
    """One GPU. Rates are datasheet peaks; the batch-time models apply efficiency factors.

    ``flops``: peak dense BF16/FP16 tensor FLOP/s (no sparsity). ``mem_bw``: HBM/GDDR bytes/s.
    ``mem_bytes``: memory capacity; datasheet "GB" of GPU memory are binary (80 GB = 80 GiB).
    ``host_bw``: PCIe bytes/s (datasheet figure, both directions together), used for swap.
    ``interconnect_bw``: GPU-to-GPU bytes/s for tensor-parallel all-reduce (NVLink datasheet figure, both
    directions together; the PCIe figure for cards without NVLink). ``link_latency``: seconds per ring hop of an
    all-reduce over that interconnect (NCCL's own tuning model, src/graph/tuning.cc ``hwLat``, ring/LL protocol:
    0.4 µs over NVLink, 1.0 µs over PCIe). ``sms``: streaming multiprocessors.
    ``t_row, t_col, t_red``: the GeMM tile of Bari et al.'s staircase model (eq. 2/4): ``t_col`` is the tile edge
    along the token dimension, so the linear layers cost the same for every token count in
    (k·t_col, (k+1)·t_col]. ``family``: GPUs sharing a chip, whose fitted efficiencies carry over.
    """

    name: str
    flops: float
    mem_bw: float
    mem_bytes: int
    host_bw: float
    interconnect_bw: float
    sms: int
    t_row: int
    t_col: int
    t_red: int
    source: str
    family: str = ""
    link_latency: float = 0.4e-6

    def __post_init__(self):
        for field_name in ("flops", "mem_bw", "mem_bytes", "host_bw", "interconnect_bw", "sms",
                           "t_row", "t_col", "t_red"):
            if getattr(self, field_name) <= 0:
                raise ValueError(f"GPU {self.name!r}: {field_name} must be positive, got {getattr(self, field_name)}")
        if self.link_latency < 0:
            raise ValueError(f"GPU {self.name!r}: link_latency must be >= 0 seconds, got {self.link_latency}")


_AMPERE_TILES = dict(t_row=256, t_col=128, t_red=32)   # Bari et al. (seed 000) §1.3: 256×128 (or 128×256) / 32 on A100
_HOPPER_TILES = dict(t_row=256, t_col=128, t_red=64)
_ADA_TILES = dict(t_row=128, t_col=128, t_red=32)

GPUS: dict[str, GPUSpec] = {g.name: g for g in (
    GPUSpec("a100", flops=312e12, mem_bw=2039e9, mem_bytes=80 * GiB, host_bw=64e9, interconnect_bw=600e9,
            sms=108, **_AMPERE_TILES, family="a100",
            source="NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM): BF16 312 TFLOPS dense, HBM2e 2,039 GB/s, "
                   "NVLink 600 GB/s, PCIe Gen4 64 GB/s; 108 SMs per the NVIDIA Ampere GA100 whitepaper. Tiles: "
                   "seed 000 §1.3 (optimal A100 output tile 128×256/256×128, t_red 32); the token edge t_col=128 "
                   "matches the steps at 136/264/392/520 tokens in Vidur's A100 profiles."),
    GPUSpec("a100-pcie", flops=312e12, mem_bw=1935e9, mem_bytes=80 * GiB, host_bw=64e9, interconnect_bw=64e9,
            sms=108, **_AMPERE_TILES, family="a100", link_latency=1.0e-6,
            source="NVIDIA A100 Tensor Core GPU datasheet (A100 80GB PCIe): BF16 312 TFLOPS dense at the 1,410 MHz "
                   "boost clock, HBM2e 1,935 GB/s (1,512 MHz memory clock), 300 W TDP (SXM: 400 W, 2,039 GB/s), "
                   "PCIe Gen4 64 GB/s; NVLink only through an optional two-card bridge, so tensor-parallel "
                   "all-reduce goes over PCIe here. Same GA100 chip (108 SMs) as the SXM part. The GPU of seed "
                   "004 (clocks locked at 1,380 MHz SM / 1,512 MHz memory: pass compute scaling yourself if "
                   "needed, 1380/1410 = 0.979)."),
    GPUSpec("h100", flops=989e12, mem_bw=3350e9, mem_bytes=80 * GiB, host_bw=128e9, interconnect_bw=900e9,
            sms=132, **_HOPPER_TILES, family="h100",
            source="NVIDIA H100 Tensor Core GPU datasheet (H100 SXM 80GB): BF16 1,979 TFLOPS with sparsity = 989 "
                   "dense, HBM3 3.35 TB/s, NVLink 900 GB/s, PCIe Gen5 128 GB/s; 132 SMs (Hopper whitepaper). "
                   "Tiles: CUTLASS Hopper 128×256×64 warp-group tile, token edge 128 (steps at 136/264/392/520 "
                   "in Vidur's H100 profile)."),
    GPUSpec("h200", flops=989e12, mem_bw=4800e9, mem_bytes=141 * GiB, host_bw=128e9, interconnect_bw=900e9,
            sms=132, **_HOPPER_TILES, family="h100",
            source="NVIDIA H200 Tensor Core GPU datasheet (H200 SXM): BF16 1,979 TFLOPS with sparsity = 989 dense, "
                   "141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s, PCIe Gen5 128 GB/s; same GH100 chip as H100 "
                   "(132 SMs)."),
    GPUSpec("rtx-6000-ada", flops=364.2e12, mem_bw=960e9, mem_bytes=48 * GiB, host_bw=64e9, interconnect_bw=64e9,
            sms=142, **_ADA_TILES, family="ada", link_latency=1.0e-6,
            source="NVIDIA RTX 6000 Ada Generation datasheet: 48 GB GDDR6 at 960 GB/s, PCIe Gen4 x16 (64 GB/s), "
                   "no NVLink (all-reduce over PCIe), 142 SMs; tensor 1,457 TFLOPS = FP8 with sparsity, so BF16 "
                   "dense = 364.2 TFLOPS (Ada Lovelace architecture whitepaper, appendix). The GPU of seed 000's "
                   "experiments."),
    GPUSpec("a800", flops=312e12, mem_bw=1935e9, mem_bytes=80 * GiB, host_bw=64e9, interconnect_bw=400e9,
            sms=108, **_AMPERE_TILES, family="a100",
            source="NVIDIA A800 80GB PCIe datasheet: BF16 312 TFLOPS dense (624 with sparsity), HBM2e 1,935 GB/s, "
                   "NVLink bridge 400 GB/s, PCIe Gen4 64 GB/s; GA100 chip, 108 SMs. The GPU of seed 002 "
                   "(Llama-3.1-8B)."),
    GPUSpec("h20", flops=148e12, mem_bw=4000e9, mem_bytes=96 * GiB, host_bw=128e9, interconnect_bw=900e9,
            sms=78, **_HOPPER_TILES, family="h20",
            source="NVIDIA HGX H20 as published for the China market (no public NVIDIA datasheet): 96 GB HBM3 at "
                   "4.0 TB/s, FP16/BF16 148 TFLOPS dense, NVLink 900 GB/s, PCIe Gen5; 78 SMs as reported by "
                   "Geekbench listings. The GPU of seed 002 (Qwen3-14B, Qwen3-32B, Llama-3.3-70B)."),
    GPUSpec("l20", flops=119.5e12, mem_bw=864e9, mem_bytes=48 * GiB, host_bw=64e9, interconnect_bw=64e9,
            sms=92, **_ADA_TILES, family="ada", link_latency=1.0e-6,
            source="NVIDIA L20 (AD102, China-market data-centre card) product brief: 48 GB GDDR6 at 864 GB/s, "
                   "FP16/BF16 tensor 119.5 TFLOPS dense (FP8 239), PCIe Gen4 x16, no NVLink, 92 SMs. The GPU of "
                   "seed 003's Fig. 3."),
)}

_ALIASES = {"a100-80gb": "a100", "a100-sxm": "a100", "a100-80gb-pcie": "a100-pcie", "a100-pcie-80gb": "a100-pcie", "h100-sxm": "h100", "h100-80gb": "h100",
            "h200-sxm": "h200", "rtx6000ada": "rtx-6000-ada", "rtx-6000": "rtx-6000-ada", "l20-48gb": "l20",
            "a800-80gb": "a800", "h20-96gb": "h20"}


def gpu(name: str | GPUSpec) -> GPUSpec:
    """The preset called ``name`` (case-insensitive; a GPUSpec passes through)."""
    if isinstance(name, GPUSpec):
        return name
    key = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    key = _ALIASES.get(key, key)
    try:
        return GPUS[key]
    except KeyError:
        raise ValueError(f"unknown GPU {name!r}; valid GPUs: {', '.join(sorted(GPUS))}") from None

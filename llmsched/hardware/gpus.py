"""GPU presets: the datasheet figures a batch-time model needs, each with its source (the presets are data, in
gpus.json, with the fields of a GPU spec file)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..bounds import GPU_FIGURES
from .nccl_model import NcclCollective

GiB = 1 << 30


@dataclass(frozen=True)
class GPUSpec:
    """One GPU. Rates are datasheet peaks; the batch-time models apply efficiency factors.

    ``flops``: peak dense BF16/FP16 tensor FLOP/s with FP32 accumulation (no sparsity). ``fp8_flops``: the same
    for FP8 (0: no FP8 tensor cores; fp8 weights then run at ``flops``). ``mem_bw``: HBM/GDDR bytes/s.
    ``mem_bytes``: memory capacity; datasheet "GB" of GPU memory are binary (80 GB = 80 GiB).
    ``cuda_bytes``: the total CUDA reports (``cudaMemGetInfo``, torch's ``total_memory``), where measured (0: not
    measured, the datasheet's figure stands in): what vLLM takes ``gpu_memory_utilization`` of and compares with
    its batch-default thresholds (:attr:`visible_bytes`); ``cuda_source`` says where it was measured.
    ``host_bw``: PCIe bytes/s (datasheet figure, both directions together), used for swap.
    ``interconnect``: how the GPUs of a tensor-parallel group reach each other: ``nvlink`` (NVLink/NVSwitch),
    ``xgmi`` (AMD Infinity Fabric) or ``pcie`` (no GPU link: through the PCIe switch or host).
    ``interconnect_bw``: GPU-to-GPU bytes/s for tensor-parallel all-reduce over that link (datasheet figure, both
    directions together; the PCIe figure for ``pcie``). ``link_latency``: seconds per ring hop of an all-reduce
    over that interconnect (NCCL's own tuning model, src/graph/tuning.cc ``hwLat``, ring/LL protocol:
    0.4 µs over NVLink, 1.0 µs over PCIe). ``allreduce_busbw``: the bus bandwidth (bytes/s, nccl-tests'
    ``busbw``) NCCL's all-reduce was *measured* to reach among such cards with NCCL's default settings (vLLM's),
    where a measurement exists; 0: the datasheet's one-way rate × the batch-time model's ``comm_eff`` (see
    :meth:`collective_bw`). ``collective_model``: how a collective's time follows its size: ``fixed`` (the
    batch-time model's fixed latency plus size / bandwidth) or ``nccl`` (NCCL's own tuning model, latency and
    bandwidth per protocol, the least chosen: :mod:`.nccl_model`; NVLink or PCIe only).
    ``copy_bw``: the bytes/s a device-to-device copy was *measured* to move on this card (bytes read and
    written, PyTorch, large buffers; 0: not measured), the ceiling of a streaming read such as decode attention's
    (:meth:`stream_fraction`); ``copy_source`` says where it was measured.
    ``sms``: streaming multiprocessors (compute units on AMD).
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
    fp8_flops: float = 0.0
    interconnect: str = ""
    allreduce_busbw: float = 0.0
    collective_model: str = "fixed"
    cuda_bytes: int = 0
    cuda_source: str = ""
    copy_bw: float = 0.0
    copy_source: str = ""

    def __post_init__(self):
        for field_name in ("flops", "mem_bw", "mem_bytes", "host_bw", "interconnect_bw", "sms",
                           "t_row", "t_col", "t_red"):
            if getattr(self, field_name) <= 0:
                raise ValueError(f"GPU {self.name!r}: {field_name} must be positive, got {getattr(self, field_name)}")
        if self.link_latency < 0:
            raise ValueError(f"GPU {self.name!r}: link_latency must be >= 0 seconds, got {self.link_latency}")
        if self.allreduce_busbw < 0:
            raise ValueError(f"GPU {self.name!r}: allreduce_busbw must be >= 0 bytes/s (0: not measured), got "
                             f"{self.allreduce_busbw}")
        if not 0 <= self.copy_bw <= self.mem_bw:
            raise ValueError(f"GPU {self.name!r}: copy_bw must be measured bytes/s in [0, mem_bw] (0: not "
                             f"measured), got {self.copy_bw}")
        if self.fp8_flops < 0:
            raise ValueError(f"GPU {self.name!r}: fp8_flops must be >= 0 (0: no FP8 tensor cores), got "
                             f"{self.fp8_flops}")
        if not self.interconnect:
            object.__setattr__(self, "interconnect", "pcie" if self.interconnect_bw <= self.host_bw else "nvlink")
        if self.interconnect not in INTERCONNECTS:
            raise ValueError(f"GPU {self.name!r}: interconnect must be one of {', '.join(INTERCONNECTS)}, got "
                             f"{self.interconnect!r}")
        if self.collective_model not in COLLECTIVE_MODELS:
            raise ValueError(f"GPU {self.name!r}: collective_model must be one of {', '.join(COLLECTIVE_MODELS)}, "
                             f"got {self.collective_model!r}")
        if self.collective_model == "nccl" and self.interconnect not in NCCL_LINKS:
            raise ValueError(f"GPU {self.name!r}: collective_model 'nccl' has NCCL's latencies for "
                             f"{', '.join(NCCL_LINKS)} only, not {self.interconnect!r}; use collective_model 'fixed'")

    @property
    def visible_bytes(self) -> int:
        """The memory CUDA reports (measured), else the datasheet's."""
        return self.cuda_bytes or self.mem_bytes

    def collective_bw(self, comm_eff: float) -> float:
        """Bytes/s a ring collective among these GPUs moves per GPU and direction (its bus bandwidth): the
        measured ``allreduce_busbw`` where there is one, else the link's one-way datasheet rate × ``comm_eff``.
        A ring all-reduce of S bytes over n GPUs then takes 2(n−1)/n · S / collective_bw."""
        return self.allreduce_busbw or self.interconnect_bw / 2 * comm_eff

    def nccl_collective(self, collective: str, ranks: int, comm_eff: float) -> NcclCollective | None:
        """NCCL's tuning model of ``collective`` over ``ranks`` of these GPUs at :meth:`collective_bw`, where the
        spec's ``collective_model`` is ``nccl`` (None otherwise, or for one rank)."""
        if self.collective_model != "nccl" or ranks < 2:
            return None
        return NcclCollective(collective, ranks, self.collective_bw(comm_eff), self.interconnect)

    def stream_fraction(self) -> tuple[float, str] | None:
        """The share of ``mem_bw`` a streaming read reaches on this card: its measured copy rate's, else a measured
        card's of the same family (one chip, one memory controller design), with where it comes from; None where
        no card of the family was measured."""
        if self.copy_bw:
            return self.copy_bw / self.mem_bw, f"{self.name} copy {self.copy_bw / 1e12:.2f} TB/s: {self.copy_source}"
        for other in GPUS.values():
            if other.copy_bw and self.family and other.family == self.family:
                return other.copy_bw / other.mem_bw, (f"family {self.family}: {other.name}'s measured copy "
                                                      f"fraction {other.copy_bw / other.mem_bw:.3f}")
        return None

    def gemm_flops(self, weight_bytes: int) -> float:
        """Peak FLOP/s of a GEMM whose weights have ``weight_bytes`` bytes an element: FP8 tensor cores for fp8
        weights where the GPU has them (activations quantised on the fly, as vLLM's fp8 does), else BF16."""
        return self.fp8_flops if weight_bytes == 1 and self.fp8_flops else self.flops


INTERCONNECTS = ("nvlink", "xgmi", "pcie")
COLLECTIVE_MODELS = ("fixed", "nccl")
NCCL_LINKS = ("nvlink", "pcie")
PRESETS_PATH = Path(__file__).with_name("gpus.json")


def preset(entry: dict) -> GPUSpec:
    """A GPU of gpus.json: GPUSpec's fields, memory in GiB (``mem_gib``)."""
    fields = dict(entry)
    fields["mem_bytes"] = fields.pop("mem_gib") * GiB
    fields["cuda_bytes"] = fields.pop("cuda_mib", 0) << 20
    return GPUSpec(**fields)


GPUS: dict[str, GPUSpec] = {g.name: g for g in map(preset,
                                                   json.loads(PRESETS_PATH.read_text(encoding="utf-8"))["gpus"])}

# NCCL's all-reduce among RTX PRO 6000 Blackwell cards over PCIe 5 x16 (no NVLink), measured with nccl-tests'
# all_reduce_perf: 22.2 GB/s bus bandwidth with NCCL's default settings (32 MB messages) on cards attached
# directly to the CPUs' root ports, 40.1 GB/s behind PCIe switches, 37.6-41.1 GB/s only with
# NCCL_MIN_NCHANNELS=8 (github.com/voipmonitor/rtx6kpro, hardware/pcie-bandwidth.md, "NCCL AllReduce Bus
# Bandwidth"). vLLM leaves NCCL at its defaults and a two-card workstation has no switch, so the direct-attach
# default figure applies; it is 0.41 of the 54-56 GB/s those cards' P2P copies reach one way (same page,
# p2pBandwidthLatencyTest), and half the 44.8 GB/s the datasheet × the NVLink-fitted comm_eff 0.7 would give.
RTX_PRO_6000_ALLREDUCE_BUSBW = GPUS["rtx-pro-6000"].allreduce_busbw

_ALIASES = {"a100-80gb": "a100", "a100-sxm": "a100", "a100-80gb-pcie": "a100-pcie", "a100-pcie-80gb": "a100-pcie", "h100-sxm": "h100", "h100-80gb": "h100",
            "h200-sxm": "h200", "rtx6000ada": "rtx-6000-ada", "rtx-6000": "rtx-6000-ada", "l20-48gb": "l20",
            "a800-80gb": "a800", "h20-96gb": "h20", "rtx4090": "rtx-4090", "geforce-rtx-4090": "rtx-4090",
            "rtx-pro-6000-blackwell": "rtx-pro-6000", "rtxpro6000": "rtx-pro-6000", "rtx-6000-pro": "rtx-pro-6000",
            "l40s-48gb": "l40s", "l4-24gb": "l4", "h100-pcie-80gb": "h100-pcie", "b200-sxm": "b200",
            "instinct-mi300x": "mi300x"}


def gpu(name: str | GPUSpec) -> GPUSpec:
    """The preset called ``name`` (case-insensitive; a GPUSpec passes through), or the GPU of a spec file
    (``.toml`` or ``.json``, see :func:`gpu_from_file`)."""
    if isinstance(name, GPUSpec):
        return name
    text = str(name).strip()
    key = text.lower().replace("_", "-").replace(" ", "-")
    key = _ALIASES.get(key, key)
    if key in GPUS:
        return GPUS[key]
    if text.endswith(SPEC_SUFFIXES) or Path(text).expanduser().is_file():
        return gpu_from_file(text)
    raise ValueError(f"unknown GPU {name!r}; valid GPUs: {', '.join(sorted(GPUS))}, or a GPU spec file "
                     f"(.toml/.json)")


SPEC_SUFFIXES = (".toml", ".json")
# fields of a spec file: GPUSpec's own names and units (FLOP/s, bytes/s, bytes, seconds)
SPEC_REQUIRED = ("flops", "mem_bw", "host_bw", "sms")
SPEC_NUMBERS = ("flops", "fp8_flops", "mem_bw", "mem_bytes", "mem_gib", "host_bw", "interconnect_bw", "sms",
                "t_row", "t_col", "t_red", "link_latency", "allreduce_busbw", "copy_bw")
SPEC_TEXTS = ("name", "source", "family", "interconnect", "collective_model", "copy_source")
_LINK_LATENCY = {"nvlink": 0.4e-6, "xgmi": 0.4e-6, "pcie": 1.0e-6}


def gpu_from_file(path: str | Path) -> GPUSpec:
    """A GPU from a spec file of its datasheet figures, in GPUSpec's names and SI units::

        name = "my-card"              # default: the file's name
        flops = 503.8e12              # dense BF16 tensor FLOP/s;  fp8_flops = 1007.6e12 (0 or absent: no FP8)
        mem_bw = 1792e9               # bytes/s
        mem_gib = 96                  # or mem_bytes = 103079215104
        host_bw = 128e9               # PCIe, both directions
        interconnect = "pcie"         # nvlink, xgmi or pcie (default pcie)
        interconnect_bw = 128e9       # default: host_bw for pcie
        sms = 188
        source = "vendor datasheet, ..."

    Optional: ``t_row``/``t_col``/``t_red`` (default 128/128/32), ``family`` (whose fitted efficiencies to use;
    default none), ``link_latency`` (seconds per all-reduce ring hop; default NCCL's figure for the
    interconnect), ``allreduce_busbw`` (bytes/s NCCL's all-reduce was measured to reach among such cards,
    nccl-tests' busbw; default: not measured, the link's rate × comm_eff), ``collective_model`` (``fixed``, the
    default, or ``nccl``: NCCL's tuning model prices small collectives, see :mod:`.nccl_model`). Every figure is checked: an unknown key, a missing, non-numeric, zero or negative figure is a
    one-line error naming the file and the field."""
    file = Path(path).expanduser()
    data = _read_spec(file)
    unknown = sorted(set(data) - set(SPEC_NUMBERS) - set(SPEC_TEXTS))
    if unknown:
        raise ValueError(f"GPU spec {file}: unknown field {unknown[0]!r}; fields: "
                         f"{', '.join(SPEC_NUMBERS + SPEC_TEXTS)}")
    for key in SPEC_TEXTS:
        if key in data and not (isinstance(data[key], str) and data[key].strip()):
            raise ValueError(f"GPU spec {file}: {key} = {data[key]!r} must be a non-empty string")
    for key in SPEC_NUMBERS:
        if key in data:
            value = data[key]
            floor_ok = key in ("fp8_flops", "link_latency", "allreduce_busbw")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or \
                    value in (float("inf"), float("-inf")) or value < 0 or (value == 0 and not floor_ok):
                need = ">= 0" if floor_ok else "> 0"
                raise ValueError(f"GPU spec {file}: {key} = {value!r} must be a finite number {need}")
    missing = [k for k in SPEC_REQUIRED if k not in data]
    if ("mem_bytes" in data) == ("mem_gib" in data):
        missing.append("mem_bytes (or mem_gib)" if "mem_bytes" not in data else "only one of mem_bytes, mem_gib")
    if missing:
        raise ValueError(f"GPU spec {file}: needs {', '.join(missing)}")
    for key in SPEC_NUMBERS:  # within the range of real cards (bounds.GPU_FIGURES)
        low, high = GPU_FIGURES[key]
        if key in data and data[key] != 0 and not low <= data[key] <= high:
            raise ValueError(f"GPU spec {file}: {key} = {data[key]!r} is outside {low:.3g} to {high:.3g}, the range of "
                             f"real cards (SI units: FLOP/s, bytes/s, bytes, seconds; mem_gib in GiB): a typo or a "
                             f"unit slip")
    interconnect = data.get("interconnect", "pcie")
    if interconnect not in _LINK_LATENCY:
        raise ValueError(f"GPU spec {file}: interconnect = {interconnect!r} must be one of "
                         f"{', '.join(_LINK_LATENCY)}")
    collectives = data.get("collective_model", "fixed")
    if collectives not in COLLECTIVE_MODELS or (collectives == "nccl" and interconnect not in NCCL_LINKS):
        raise ValueError(f"GPU spec {file}: collective_model = {collectives!r} must be one of "
                         f"{', '.join(COLLECTIVE_MODELS)} ('nccl' over {' or '.join(NCCL_LINKS)} only)")
    if interconnect != "pcie" and "interconnect_bw" not in data:
        raise ValueError(f"GPU spec {file}: interconnect = {interconnect!r} needs interconnect_bw (bytes/s)")
    for key in ("sms", "t_row", "t_col", "t_red"):
        if key in data and data[key] != int(data[key]):
            raise ValueError(f"GPU spec {file}: {key} = {data[key]!r} must be a whole number")
    mem = int(data["mem_gib"] * GiB) if "mem_gib" in data else int(data["mem_bytes"])
    copy_bw = float(data.get("copy_bw", 0.0))
    if copy_bw > float(data["mem_bw"]):
        raise ValueError(f"GPU spec {file}: copy_bw = {copy_bw:g} is above mem_bw = {data['mem_bw']:g}; copy_bw is "
                         f"the copy rate measured on the card (bytes read and written a second), at most its "
                         f"datasheet bandwidth")
    return GPUSpec(
        data.get("name", file.stem), flops=float(data["flops"]), mem_bw=float(data["mem_bw"]), mem_bytes=mem,
        host_bw=float(data["host_bw"]), interconnect_bw=float(data.get("interconnect_bw", data["host_bw"])),
        sms=int(data["sms"]), t_row=int(data.get("t_row", 128)), t_col=int(data.get("t_col", 128)),
        t_red=int(data.get("t_red", 32)), source=data.get("source", f"GPU spec file {file}"),
        family=data.get("family", ""), link_latency=float(data.get("link_latency", _LINK_LATENCY[interconnect])),
        fp8_flops=float(data.get("fp8_flops", 0.0)), interconnect=interconnect,
        allreduce_busbw=float(data.get("allreduce_busbw", 0.0)), collective_model=collectives,
        copy_bw=copy_bw, copy_source=data.get("copy_source", f"GPU spec file {file}" if copy_bw else ""))


def _read_spec(file: Path) -> dict:
    if not file.is_file():
        raise ValueError(f"GPU spec {file}: no such file; give a .toml or .json file of the GPU's figures")
    if file.suffix not in SPEC_SUFFIXES:
        raise ValueError(f"GPU spec {file}: use a .toml or .json file")
    try:
        text = file.read_text()
        if file.suffix == ".toml":
            import tomllib
            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"GPU spec {file}: cannot read it ({e})") from None
    except ValueError as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"GPU spec {file}: not valid {file.suffix[1:].upper()} ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"GPU spec {file}: must hold a table of fields")
    return data

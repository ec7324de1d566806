"""Which GPU preset a device's name means, as CUDA and ROCm print it (``torch.cuda.get_device_name``, nvidia-smi:
"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA GeForce RTX 4090", "NVIDIA RTX 6000
Ada Generation", "AMD Instinct MI300X") or a person writes it in a run's meta.json.

A name CUDA or ROCm reports for a preset's card (``CUDA_NAMES``) is that preset. Otherwise a preset is named when
every word of its name is a word of the device's (vendor words left out), the most specific preset winning ("H100 PCIe" is ``h100-pcie``, not ``h100``). A board the name marks as another variant is
not the preset: a PCIe or NVL board is only a preset named so, and a memory size the name states must be the
preset's (within 15%, GB against GiB): "A100-SXM4-40GB" is not the 80 GB ``a100``, "H100 NVL" not the SXM ``h100``.
"""
from __future__ import annotations

import re

# what torch.cuda.get_device_name reports for each preset's card (NVIDIA's and AMD's product names; the A800 preset
# is the PCIe card, whose datasheet its figures are)
CUDA_NAMES = {"a100": "NVIDIA A100-SXM4-80GB", "a100-pcie": "NVIDIA A100 80GB PCIe", "h100": "NVIDIA H100 80GB HBM3",
              "h100-pcie": "NVIDIA H100 PCIe", "h200": "NVIDIA H200", "b200": "NVIDIA B200",
              "a800": "NVIDIA A800 80GB PCIe", "h20": "NVIDIA H20", "l20": "NVIDIA L20", "l4": "NVIDIA L4",
              "l40s": "NVIDIA L40S", "rtx-4090": "NVIDIA GeForce RTX 4090",
              "rtx-6000-ada": "NVIDIA RTX 6000 Ada Generation",
              "rtx-pro-6000": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "mi300x": "AMD Instinct MI300X",
              "a100-40gb": "NVIDIA A100-SXM4-40GB", "h100-nvl": "NVIDIA H100 NVL", "l40": "NVIDIA L40"}
VENDOR_WORDS = {"nvidia", "geforce", "amd", "instinct", "tesla", "radeon"}
BOARD_WORDS = {"pcie", "nvl"}  # a board variant: only a preset whose name says so is that board
MEMORY_TOLERANCE = 0.15


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - VENDOR_WORDS


def stated_memory_gb(text: str) -> int | None:
    """The memory size a device name states ("80GB", "141 GB"), if any."""
    found = re.search(r"(\d+)\s*gb\b", text.lower())
    return int(found.group(1)) if found else None


def presets_named(text: str | None, presets: dict) -> list[str]:
    """The presets (of ``presets``, name -> GPUSpec) that ``text`` names: one, none, or several (ambiguous)."""
    return matches(text, presets)[0]


def near_miss(text: str | None, presets: dict) -> str:
    """Why ``text`` names no preset though it names a chip one has ('' when no preset comes near)."""
    named, chip = matches(text, presets)
    if named or not chip:
        return ""
    spec = presets[chip[0]]
    return (f"the {chip[0]} preset is the {spec.mem_bytes / 2**30:.0f} GiB"
            f"{' PCIe' if spec.interconnect == 'pcie' else ''} board, not this one")


def matches(text: str | None, presets: dict) -> tuple[list[str], list[str]]:
    """(the presets ``text`` names, the presets whose chip it names ignoring board and memory)."""
    if not text:
        return [], []
    said = words(text)
    exact = [name for name, cuda in CUDA_NAMES.items() if name in presets and words(cuda) == said]
    if exact:
        return exact, exact
    chip = most_specific([name for name in presets if set(name.split("-")) <= said])
    gb = stated_memory_gb(text)
    same = [name for name in chip if (said & BOARD_WORDS) <= set(name.split("-"))
            and (gb is None or abs(presets[name].mem_bytes / 2**30 - gb) <= MEMORY_TOLERANCE * gb)]
    return most_specific(same), chip


def most_specific(names: list[str]) -> list[str]:
    if not names:
        return []
    top = max(len(name.split("-")) for name in names)
    return [name for name in names if len(name.split("-")) == top]

"""A run's meta.json names its GPU as CUDA or ROCm prints it: the preset it means, or none with the reason."""
import pytest

from llmsched.hardware.device_names import CUDA_NAMES, near_miss
from llmsched.hardware.gpus import GPUS
from llmsched.hardware.kv_sizing import gpu_named_in


@pytest.mark.parametrize("name, preset", [
    ("NVIDIA A100-SXM4-80GB", "a100"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie"),
    ("NVIDIA A800-SXM4-80GB", "a800"),
    ("NVIDIA H100 80GB HBM3", "h100"),
    ("NVIDIA H100 80GB (GKE nvidia-h100-80gb)", "h100"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H200 (141 GB HBM3e)", "h200"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA B200", "b200"),
    ("AMD Instinct MI300X", "mi300x"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA L40", "l40"),
])
def test_a_device_name_means_its_preset(name, preset):
    assert gpu_named_in(name) == [preset]


def test_every_presets_cuda_name_means_it():
    assert set(CUDA_NAMES) == set(GPUS)
    assert {name: gpu_named_in(cuda) for name, cuda in CUDA_NAMES.items()} == {name: [name] for name in GPUS}


@pytest.mark.parametrize("name, why", [
    ("NVIDIA A100-PCIE-40GB", "the a100-pcie preset is the 80 GiB PCIe board"),
    ("NVIDIA H200 NVL", "the h200 preset is the 141 GiB board"),
    ("NVIDIA GB200", ""),  # not the B200
    ("NVIDIA GH200 480GB", ""),  # not the H200
    ("NVIDIA A10G", ""),
])
def test_another_board_of_a_presets_chip_is_not_that_preset(name, why):
    assert gpu_named_in(name) == [] and near_miss(name, GPUS).startswith(why)

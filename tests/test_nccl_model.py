"""NCCL's tuning model of a collective (llmsched/hardware/nccl_model.py) and where the roofline uses it."""
from dataclasses import replace

import pytest

from llmsched.batchtime.base import Batch
from llmsched.batchtime.roofline import RooflineBatchTime
from llmsched.hardware.gpus import GPUSpec, gpu, gpu_from_file
from llmsched.hardware.models import model
from llmsched.hardware.nccl_model import NcclCollective
from llmsched.theory.throughput_bound import busy_time_form

KB, MB = 1 << 10, 1 << 20
# Measured NCCL all-reduce times, 4 RTX PRO 6000 Blackwell on Broadcom PCIe switches, NCCL defaults (fp16/bf16):
# github.com/voipmonitor/rtx6kpro @ 29f3863a, hardware/asus-esc8000a-e13p-broadcom-switches.md, "AllReduce:
# Custom vs NCCL (4 GPU, fp16)" and "Raw AllReduce Crossover (PCIe oneshot vs NCCL, 4 GPU, bf16)". Microseconds.
ESC8000A_4GPU_US = {256: 14.1, 1 * KB: 13.5, 4 * KB: 13.2, 16 * KB: 14.7, 32 * KB: 15.4, 256 * KB: 40.9,
                    512 * KB: 72.0, 1 * MB: 86.5}
ESC8000A_32MB_US = 1628.0          # the same table's 32 MB row: the machine's large-message bandwidth


def esc8000a() -> NcclCollective:
    """The model at the bus bandwidth the 32 MB row implies through Simple's line (4 ranks: 6 ring steps)."""
    latency = (8.4 + 6 * 5.7) * 1e-6
    busbw = 32 * MB * 6 / 4 / (ESC8000A_32MB_US * 1e-6 - latency)
    return NcclCollective("allreduce", 4, busbw, "pcie")


def test_the_model_reproduces_measured_small_allreduces_from_the_large_message_bandwidth():
    nccl = esc8000a()
    assert nccl.busbw == pytest.approx(31.7e9, rel=0.01)
    for size, measured in ESC8000A_4GPU_US.items():
        assert nccl.time(size) * 1e6 == pytest.approx(measured, rel=0.15), size
    # where the fixed 10 us + size / bandwidth stood: 20-40% short of the measured 256 KB-1 MB times
    fixed = {s: 10 + s * 6 / 4 / nccl.busbw * 1e6 for s in (256 * KB, 512 * KB, 1 * MB)}
    assert all(fixed[s] < 0.8 * ESC8000A_4GPU_US[s] for s in fixed)


def test_time_grows_with_size_and_tends_to_the_bus_bandwidth():
    for link in ("pcie", "nvlink"):
        for ranks in (2, 4, 8):
            for kind in ("allreduce", "allgather", "reducescatter"):
                nccl = NcclCollective(kind, ranks, 22.2e9, link)
                times = [nccl.time(64 << k) for k in range(25)]
                assert all(a <= b for a, b in zip(times, times[1:])), (link, ranks, kind)
                steps = 2 * (ranks - 1) if kind == "allreduce" else ranks - 1
                asymptotic = (1 << 30) * steps / ranks / 22.2e9
                assert nccl.time(1 << 30) == pytest.approx(asymptotic, rel=0.005)
                assert nccl.time(0) == 0.0


def test_over_pcie_small_messages_take_ll_and_large_ones_simple():
    nccl = NcclCollective("allreduce", 2, 22.2e9, "pcie")
    ll = lambda s: (6.6 + 2 * 1.0) * 1e-6 + s / (0.5 * 22.2e9)          # noqa: E731
    simple = lambda s: (8.4 + 2 * 5.7) * 1e-6 + s / 22.2e9              # noqa: E731
    assert nccl.time(16 * KB) == pytest.approx(ll(16 * KB), rel=1e-12)
    assert nccl.time(1310720) == pytest.approx(simple(1310720), rel=1e-12)   # Qwen3-32B, 128 decodes
    assert nccl.least_latency() == pytest.approx(ll(0)) and nccl.least_per_byte() == pytest.approx(1 / 22.2e9)


def test_the_rtx_pro_6000_prices_its_tp_allreduces_by_nccls_model_and_tp1_is_unchanged():
    pro = gpu("rtx-pro-6000")
    assert pro.collective_model == "nccl" and gpu("h100").collective_model == "fixed"
    m = model("qwen3-32b")
    nccl = RooflineBatchTime(m.with_tp(2), pro, step_overhead=0.0)
    fixed = RooflineBatchTime(m.with_tp(2), replace(pro, collective_model="fixed"), step_overhead=0.0)
    batch = Batch([], [], [960] * 128)
    ar = NcclCollective("allreduce", 2, 22.2e9, "pcie").time(128 * m.hidden * 2)
    old = 10e-6 + 128 * m.hidden * 2 / 22.2e9
    assert nccl.step_time(batch) - fixed.step_time(batch) == pytest.approx(2 * m.layers * (ar - old), rel=1e-6)
    one = RooflineBatchTime(m, pro, step_overhead=0.0)
    assert one.allreduce is None
    assert one.step_time(batch) == RooflineBatchTime(m, replace(pro, collective_model="fixed"),
                                                     step_overhead=0.0).step_time(batch)
    terms = busy_time_form(nccl)        # the throughput bound stays below every probe step
    assert terms.step_time(batch) <= nccl.step_time(batch)


def test_moe_data_parallel_collectives_use_the_model():
    q = model("qwen3-30b-a3b").with_parallel(dp=2, expert_parallel=True)
    pro = gpu("rtx-pro-6000")
    nccl = RooflineBatchTime(q, pro).architecture
    fixed = RooflineBatchTime(q, replace(pro, collective_model="fixed")).architecture
    size = 64 * 2 * q.hidden * 2
    gather = NcclCollective("allgather", 2, 22.2e9, "pcie").time(size)
    scatter = NcclCollective("reducescatter", 2, 22.2e9, "pcie").time(size)
    old = 2 * (10e-6 + 1.0e-6 + 64 * q.hidden * 2 / 22.2e9)
    assert nccl.experts(64) - fixed.experts(64) == pytest.approx(q.moe_layers * (gather + scatter - old), rel=1e-6)


def test_bad_collective_models_are_refused(tmp_path):
    spec = tmp_path / "card.toml"
    base = "flops = 503.8e12\nmem_bw = 1792e9\nmem_gib = 96\nhost_bw = 128e9\nsms = 188\n"
    spec.write_text(base + 'collective_model = "nccl"\nallreduce_busbw = 20e9\n')
    card = gpu_from_file(spec)
    assert card.nccl_collective("allreduce", 2, 0.7).busbw == 20e9
    for text, match in (('collective_model = "magic"\n', "collective_model = 'magic' must be one of fixed, nccl"),
                        ('collective_model = 3\n', "collective_model = 3 must be a non-empty string"),
                        ('interconnect = "xgmi"\ninterconnect_bw = 896e9\ncollective_model = "nccl"\n',
                         "'nccl' over nvlink or pcie only")):
        spec.write_text(base + text)
        with pytest.raises(ValueError, match=match) as err:
            gpu_from_file(spec)
        assert "\n" not in str(err.value) and str(spec) in str(err.value)
    with pytest.raises(ValueError, match="collective_model must be one of"):
        replace(gpu("h100"), collective_model="ring")
    with pytest.raises(ValueError, match="NCCL's latencies for nvlink, pcie only"):
        replace(gpu("mi300x"), collective_model="nccl")
    with pytest.raises(ValueError, match="collective must be one of"):
        NcclCollective("alltoall", 2, 1e9, "pcie")
    assert isinstance(card, GPUSpec)

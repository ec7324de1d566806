"""The KV transfer model against published figures (docs/disaggregation.md, "KV transfer against measurements"):
the bytes a TP rank holds, and the time a large transfer takes over several NICs at the link presets' rates, each
within 15% of the measurement."""
from __future__ import annotations

import pytest

from llmsched.engine.kv_network import FairNetwork
from llmsched.engine.kv_transfer import transfer_split
from llmsched.hardware.links import link
from llmsched.hardware.models import model

GB = 1e9
MiB = 2 ** 20

# Mooncake Transfer Engine over AWS EFA, GPU to GPU, 1 MB blocks (kvcache-ai/Mooncake, the EFA transport's guide,
# "Benchmark Results": p5en 16 x 200 Gbps, peak write 365.66 GB/s and read 303.78 GB/s; p6-b200 8 x 400 Gbps,
# 302 and 313 GB/s; p6-b300 16 x 400 Gbps, 752 and 713 GB/s)
MOONCAKE_EFA = [
    ("p5en.48xlarge write", "ib-200g", 16, 365.66),
    ("p5en.48xlarge read", "ib-200g", 16, 303.78),
    ("p6-b200.48xlarge write", "ib-400g", 8, 302.0),
    ("p6-b200.48xlarge read", "ib-400g", 8, 313.0),
    ("p6-b300.48xlarge write", "ib-400g", 16, 752.0),
    ("p6-b300.48xlarge read", "ib-400g", 16, 713.0),
]


def striped_time(preset: str, nics: int, nbytes: float) -> float:
    """``nbytes`` split over ``nics`` NICs, each its own send and receive side at the preset's rates, in the
    network model the fleet's transfers use."""
    net, ln = FairNetwork(), link(preset)
    for i in range(nics):
        net.side(("out", i), ln.write_bw)
        net.side(("in", i), ln.bandwidth)
        net.start(0.0, nbytes / nics, i, (("out", i), ("in", i)), ln.latency)
    return max(t for _, t in net.advance(1e9))


@pytest.mark.parametrize("label, preset, nics, measured", MOONCAKE_EFA, ids=[m[0] for m in MOONCAKE_EFA])
def test_a_large_transfer_over_several_nics_takes_the_measured_time(label, preset, nics, measured):
    """64 GiB (tens of long prompts' KV) across every NIC of the node: the preset's rate (the line rate x 0.87
    that Mooncake measured on RoCE, hardware/links.py) against Mooncake's EFA measurements on other machines."""
    nbytes = 64 * 2 ** 30
    model_time, measured_time = striped_time(preset, nics, nbytes), nbytes / (measured * GB)
    assert abs(model_time / measured_time - 1) <= 0.15, (label, model_time, measured_time)


def test_a_tp_ranks_share_of_a_long_prompt_is_the_published_one():
    """A 70B model's 16K-token prompt holds 640 MB of KV on each of eight GPUs (the KVDirect paper, page 4, as
    github.com/TensorDirect/KVDirect issue 2 quotes it; Llama-2-70B: 80 layers x 8 KV heads x 128 x 2 x 2 bytes a
    token, one KV head a rank at TP 8)."""
    spec = model("llama-2-70b")
    send, recv = transfer_split(spec, 16 * 1024, 8, 8)
    assert send == recv == 640 * MiB
    assert spec.kv_bytes_per_token == 320 * 1024

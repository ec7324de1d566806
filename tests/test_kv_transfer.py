"""The KV link/transfer model (engine/kv_transfer.py) and the link presets (hardware/links.py) against hand
arithmetic: bytes per token and per TP rank, a transfer alone, processor sharing, FIFO beyond the concurrency,
layer-wise pipelining; and each bad link a one-line error."""
import pytest

from llmsched.engine.kv_transfer import SharedLink, pipelined, rank_token_bytes, transfer_split
from llmsched.hardware.links import LINKS, Link, link
from llmsched.hardware.models import model
from llmsched.hardware.quantities import parse_bytes, parse_rate, parse_seconds


def test_kv_bytes_per_token_and_per_rank():
    m = model("llama-3.1-8b")  # 32 layers, 8 KV heads of 128, bf16
    assert m.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2 == 131072
    assert rank_token_bytes(m, 1) == 131072
    assert rank_token_bytes(m, 2) == 65536
    assert rank_token_bytes(m, 8) == 16384
    assert rank_token_bytes(m, 16) == 16384  # tp above the heads: a replica of one head each
    big = model("llama-3.1-70b")  # 80 layers, 8 KV heads
    assert rank_token_bytes(big, 4) == 80 * 2 * 128 * 2 * 2


def test_transfer_split_between_tp_layouts():
    m = model("llama-3.1-8b")
    # 1,000 tokens from TP 1 to TP 2: the one sender sends all, each receiver takes half
    assert transfer_split(m, 1000, 1, 2) == (131072000, 65536000)
    # TP 4 -> TP 1: each sender a quarter, the receiver all
    assert transfer_split(m, 1000, 4, 1) == (32768000, 131072000)
    # TP 16 -> 16: receiver j reads its head's replica whole from sender j (vLLM's NIXL rank mapping), so each
    # sender sends what its receiver takes
    assert transfer_split(m, 1000, 16, 16) == (16384000, 16384000)


def test_a_tp_that_does_not_split_the_heads_is_one_line():
    m = model("llama-3.1-8b")
    with pytest.raises(ValueError, match=r"TP 3 does not split llama-3.1-8b's 8 KV heads") as e:
        transfer_split(m, 10, 3, 1)
    assert "\n" not in str(e.value)


def test_a_transfer_alone_is_latency_plus_bytes_over_bandwidth():
    lk = SharedLink(bandwidth=1e9, latency=1e-3)
    lk.start(0.0, 2e9, "a")
    assert lk.next_completion() == pytest.approx(2.001)
    assert lk.advance(2.0) == []
    assert lk.advance(3.0) == [("a", pytest.approx(2.001))]
    assert lk.busy_time == pytest.approx(2.0)
    assert lk.bytes_done == pytest.approx(2e9)


def test_processor_sharing_rederives_finish_times():
    # bandwidth 100 B/s, no latency. a: 100 B at t=0; b: 50 B at t=0.5.
    # alone a moves 50 B by 0.5; then each moves at 50 B/s: b needs 1.0 s (done 1.5), a has 50 - 50 = 0 left at 1.5
    # too: both finish at 1.5
    lk = SharedLink(bandwidth=100.0, latency=0.0)
    lk.start(0.0, 100, "a")
    assert lk.next_completion() == pytest.approx(1.0)
    lk.start(0.5, 50, "b")
    assert lk.next_completion() == pytest.approx(1.5)
    done = lk.advance(2.0)
    assert [tag for tag, _ in done] == ["a", "b"]
    assert [t for _, t in done] == [pytest.approx(1.5), pytest.approx(1.5)]
    # three transfers of 30, 60, 90 B at once: 30 B each at 33.3 B/s -> 0.9 s; then two at 50 B/s: 30 more -> 0.6 s
    # (1.5); then one alone: 30 B at 100 -> 0.3 s (1.8)
    lk = SharedLink(bandwidth=100.0, latency=0.0)
    for tag, n in (("x", 30), ("y", 60), ("z", 90)):
        lk.start(0.0, n, tag)
    assert [(tag, round(t, 9)) for tag, t in lk.advance(5.0)] == [("x", 0.9), ("y", 1.5), ("z", 1.8)]


def test_latency_does_not_use_bandwidth():
    # a starts at 0 with latency 1: alone until b's latency ends... both have latency 1 s on a 100 B/s link
    lk = SharedLink(bandwidth=100.0, latency=1.0)
    lk.start(0.0, 100, "a")
    lk.start(0.5, 100, "b")
    # a moves alone from 1.0 to 1.5 (50 B), then both share: a's last 50 B at 50 B/s -> 2.5; b has 50 left at 2.5,
    # alone -> 3.0
    done = lk.advance(10.0)
    assert [(tag, round(t, 9)) for tag, t in done] == [("a", 2.5), ("b", 3.0)]


def test_concurrency_one_is_first_in_first_out():
    lk = SharedLink(bandwidth=100.0, latency=0.1, concurrency=1)
    lk.start(0.0, 100, "a")
    lk.start(0.0, 100, "b")
    assert lk.next_completion() == pytest.approx(1.1)
    done = lk.advance(10.0)
    # b starts when a ends: 1.1 + 0.1 + 1.0
    assert [(tag, round(t, 9)) for tag, t in done] == [("a", 1.1), ("b", 2.2)]


def test_layerwise_pipelining():
    # 32 layers, transfer 1 ms a layer, compute 3 ms a layer: 1 + 31 x 3 + 3 = 97 ms (serial: 128 ms)
    assert pipelined(1e-3, 3e-3, 32) == pytest.approx(97e-3)
    # transfer-bound: 4 ms a layer against 1 ms compute: 4 + 31 x 4 + 1
    assert pipelined(4e-3, 1e-3, 32) == pytest.approx(129e-3)
    assert pipelined(2.0, 5.0, 1) == 7.0


def test_link_presets_and_their_sources():
    assert set(LINKS) >= {"pcie-gen4", "pcie-gen5", "nvlink3", "nvlink4", "nvlink5", "ib-100g", "ib-200g",
                          "ib-400g", "nvme"}
    for lk in LINKS.values():
        assert lk.bandwidth > 0 and lk.latency > 0 and lk.source
    assert link("ib-400g").bandwidth == pytest.approx(50e9 * 0.87)
    assert link("ib-100g").bandwidth == pytest.approx(12.5e9 * 0.87)
    assert link("pcie-gen5").bandwidth == pytest.approx(52.6e9)
    assert link("nvme").write_bw == pytest.approx(6.6e9)
    # per card: the GPU's PCIe generation and its node's GPU link
    assert link("pcie", "h100").name == "pcie-gen5"
    assert link("pcie", "a100").name == "pcie-gen4"
    assert link("same-node", "h100").name == "nvlink4"
    assert link("same-node", "a100").name == "nvlink3"
    assert link("same-node", "l40s").name == "pcie-gen4"
    # one Llama-3.1-8B block of 16 tokens (2 MiB) CPU->GPU over PCIe Gen5 with vLLM's per-copy cost: 1 us +
    # 3.5 us + 2 MiB / 52.6 GB/s = 44.4 us, the blog's 2 MB point (47.7 GB/s) within 2%
    t = link("pcie-gen5").time(2 * 2**20) + 3.5e-6
    assert 2 * 2**20 / t == pytest.approx(47.7e9, rel=0.02)


def test_custom_links_and_bad_ones():
    lk = link("bw=25GB/s,latency=5us")
    assert (lk.bandwidth, lk.latency, lk.write_bw) == (25e9, pytest.approx(5e-6), 25e9)
    assert link("bw=400Gb/s,latency=2us,write_bw=10GB/s").write_bw == 10e9
    for text, message in (("bw=0GB/s,latency=5us", "above zero"), ("bw=-3GB/s,latency=5us", "above zero"),
                          ("bw=25GB/s,latency=0us", "above zero"), ("bw=25GB/s,latency=-1ms", "above zero"),
                          ("bw=25GB/s", "needs latency"), ("bw=25GB/s,latency=5us,speed=3", "unknown key"),
                          ("warp-drive", "unknown link"), ("pcie", "depends on the GPU")):
        with pytest.raises(ValueError, match=message) as e:
            link(text)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="above zero"):
        Link("x", 0.0, 1e-6, "test")


def test_quantities():
    assert parse_bytes("200GiB") == 200 * 2**30
    assert parse_bytes("1.5TB") == 1.5e12
    assert parse_rate("400Gb/s") == 50e9
    assert parse_rate("25GB/s") == 25e9
    assert parse_seconds("5us") == pytest.approx(5e-6)
    for bad in ("0GiB", "-3GiB", "lots", "3XB"):
        with pytest.raises(ValueError):
            parse_bytes(bad)

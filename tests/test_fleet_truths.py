"""The fleet features' figures against expectations derived by hand or by an independent calculation, on cases no
other test lists: KV transfer bytes and times between TP layouts (vLLM's NIXL rank mapping, enumerated here rank
by rank), transfers that do and do not share a side, a KV reloaded from host memory at TP 2, and a fleet's billing
and serving time integrated from its own timeline."""
from __future__ import annotations

import pytest

from llmsched.batchtime.base import Batch
from llmsched.engine.kv_transfer import transfer_split
from llmsched.experiment import RunConfig
from llmsched.fleet_setup import simulate_fleet_config
from llmsched.hardware.models import model
from llmsched.request import Request, Status
from llmsched.workload.workload import OpenLoop

ENGINE = dict(latency_boundary="engine", batch_time="roofline", scheduler="vllm")
IB400 = 400e9 / 8 * 0.87  # hardware/links.py: the line rate over 8, x 0.87 (Mooncake's Transfer Engine)
IB100 = 100e9 / 8 * 0.87
IB_LATENCY = 0.83e-6


def pd(reqs, **fields):
    return simulate_fleet_config(RunConfig(**{**ENGINE, "disaggregate": "1P1D", **fields}), OpenLoop(reqs))


def token_bytes(name: str, heads: int) -> int:
    """KV bytes of one token over ``heads`` KV heads: layers x heads x head_dim x 2 (K and V) x dtype bytes."""
    m = model(name)
    return m.layers * heads * m.head_dim * 2 * m.kv_dtype_bytes


def nixl_sender_bytes(name: str, tokens: int, src_tp: int, dst_tp: int) -> tuple[int, int]:
    """``(most bytes one sender rank sends, bytes one receiver rank receives)``, by walking vLLM 0.32's NIXL rank
    mapping (``kv_connector/v1/nixl/tp_mapping.py``, ``compute_tp_mapping``) receiver by receiver: a receiver
    group at least as wide reads each rank's heads from sender ``j * src_tp // dst_tp``; a narrower one reads from
    the senders of its block, one per distinct head (``np.unique`` over the heads they hold)."""
    m = model(name)
    heads = m.kv_heads

    def held(tp: int, rank: int) -> list[int]:
        per = max(1, heads // tp)
        first = rank * heads // tp if tp <= heads else rank * heads // tp
        return list(range(first, first + per))

    sent = [0] * src_tp
    recv = tokens * token_bytes(name, len(held(dst_tp, 0)))
    for j in range(dst_tp):
        wanted = held(dst_tp, j)
        if dst_tp >= src_tp:
            sent[j * src_tp // dst_tp] += tokens * token_bytes(name, len(wanted))
        else:
            block = range(j * (src_tp // dst_tp), (j + 1) * (src_tp // dst_tp))
            seen = set()
            for r in block:
                mine = [h for h in held(src_tp, r) if h in wanted and h not in seen]
                seen.update(mine)
                sent[r] += tokens * token_bytes(name, len(mine))
    return max(sent), recv


@pytest.mark.parametrize("name", ["llama-3-8b", "qwen3-30b-a3b"])
@pytest.mark.parametrize("src_tp,dst_tp", [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (1, 8), (2, 8), (4, 8), (8, 8),
                                           (8, 2), (16, 8), (8, 16), (16, 16)])
def test_transfer_split_is_vllms_nixl_rank_mapping(name, src_tp, dst_tp):
    """Where the receivers hold replicas of a head (Qwen3-30B-A3B's 4 KV heads at TP 8; any model at TP 16), every
    receiver reads its replica from one sender, so a sender serving several of them sends a head's share several
    times: from TP 1 to TP 8, twice the distinct KV. Before, the senders were taken to split the distinct KV."""
    assert transfer_split(model(name), 1000, src_tp, dst_tp) == nixl_sender_bytes(name, 1000, src_tp, dst_tp)


def test_a_decode_group_holding_replicated_heads_takes_a_senders_repeated_share():
    """Qwen3-30B-A3B (4 KV heads, 48 layers) from TP 1 to TP 8 over ib-400g: each of the 8 receivers holds one
    head, two per head, all read from the one sender: it sends 2 x the prompt's KV, and the transfer lasts that
    over one NIC. Before, it lasted half of that."""
    prompt = 4096
    res, _ = pd([Request(0, 1.0, prompt, 4)], model="qwen3-30b-a3b", gpu="h100", prefill_tp=1, decode_tp=8)
    c = res.requests.cols
    distinct = prompt * token_bytes("qwen3-30b-a3b", 4)
    assert c["transfer_bytes"][0] == 2 * distinct  # every receiver's bytes
    assert c["transfer_end"][0] - c["transfer_start"][0] == pytest.approx(IB_LATENCY + 2 * distinct / IB400,
                                                                          rel=1e-9)


@pytest.mark.parametrize("src_tp,dst_tp", [(2, 1), (1, 2), (2, 2), (2, 4), (4, 2), (8, 1)])
def test_heterogeneous_pools_move_the_whole_prompt_at_one_ranks_larger_share(src_tp, dst_tp):
    """H100 prefill, A100 decode, Llama-3-8B (32 layers x 8 KV heads x 128 x 2 x 2 B = 128 KiB a token): a
    1,000-token prompt in whole 16-token blocks (1,008 tokens) crosses ib-400g; a transfer lasts the latency plus
    the larger of one sender's and one receiver's share at 43.5 GB/s, and the TTFT is the prefill step, that and
    the decode step computing the prompt's last token."""
    res, state = pd([Request(0, 1.0, 1000, 5)], prefill_gpu="h100", decode_gpu="a100", prefill_tp=src_tp,
                    decode_tp=dst_tp)
    c = res.requests.cols
    whole = 1008 * 32 * 8 * 128 * 2 * 2
    xfer = IB_LATENCY + max(whole / src_tp, whole / dst_tp) / IB400
    prefill, decode = state.replicas
    step_p = prefill.batch_time.step_time(Batch([1000], [0], []))
    step_d = decode.batch_time.step_time(Batch([1], [999], []))
    assert c["transfer_bytes"][0] == whole
    assert c["transfer_start"][0] == pytest.approx(1.0 + step_p, rel=1e-12)
    assert c["transfer_end"][0] - c["transfer_start"][0] == pytest.approx(xfer, rel=1e-9)
    assert c["ttft"][0] == pytest.approx(step_p + xfer + step_d, rel=1e-9)


@pytest.mark.parametrize("layout,factor", [("1P2D", 2.0), ("2P2D", 1.0), ("2P1D", 2.0)])
def test_two_transfers_at_once_share_only_the_side_they_have_in_common(layout, factor):
    """Two 4,000-token prompts prefilled together, round-robin: one sender to two receivers shares its send side
    (each transfer 2x as long as alone), two senders to one receiver its receive side (2x), two disjoint pairs
    nothing (1x)."""
    alone = IB_LATENCY + 4000 * 32 * 8 * 128 * 2 * 2 / IB100
    reqs = [Request(0, 1.0, 4000, 4), Request(1, 1.0, 4000, 4)]
    res, _ = pd(reqs, disaggregate=layout, router="round-robin", kv_link="ib-100g")
    c = res.requests.cols
    assert c["transfer_start"][0] == c["transfer_start"][1]
    for i in range(2):
        took = c["transfer_end"][i] - c["transfer_start"][i]
        assert took == pytest.approx(factor * (alone - IB_LATENCY) + IB_LATENCY, rel=1e-6)
    assert set(c["status"]) == {int(Status.FINISHED)}


def test_the_transfer_summary_is_over_the_transfers_span(tmp_path):
    """summary.json's ``kv_transfer``, recomputed from requests.csv: bytes, count and mean time as written, and
    GB/s and the busy share over the span docs/disaggregation.md names, first transfer's start to last one's end
    (the union of the transfers' intervals less their latency, as they only meet on the decode instance's one receive
    side). Before,
    the span ran to the run's end, which the decode of the last requests sets: a 60-token output after the last
    transfer diluted both."""
    import csv
    import json
    import math
    from llmsched.cli import main
    out = tmp_path / "run"
    main(["simulate", "--disaggregate", "2P1D", "--prefill-gpu", "h100", "--decode-gpu", "a100", "--workload",
          "sharegpt", "--rate", "6", "--num-requests", "120", "--seed", "2", "--out", str(out)])
    kt = json.loads((out / "summary.json").read_text())["fleet"]["kv_transfer"]
    rows = [r for r in csv.DictReader(open(out / "requests.csv")) if not math.isnan(float(r["transfer_start"]))]
    spans = sorted((float(r["transfer_start"]), float(r["transfer_end"])) for r in rows)
    volume = sum(int(float(r["transfer_bytes"])) for r in rows)
    assert (kt["transfers"], kt["finished"], kt["bytes"]) == (len(rows), len(rows), volume)
    assert kt["seconds"]["mean"] == pytest.approx(sum(e - s for s, e in spans) / len(spans), rel=1e-9)
    moving = [(s + IB_LATENCY, e) for s, e in spans]  # bytes move after a transfer's latency
    busy, (lo, hi) = 0.0, moving[0]
    for s, e in moving[1:]:
        if s > hi:
            busy, lo, hi = busy + hi - lo, s, e
        else:
            hi = max(hi, e)
    busy += hi - lo
    span = max(e for _, e in spans) - spans[0][0]
    assert kt["gbytes_per_s"] == pytest.approx(volume / span / 1e9, rel=1e-9)
    assert kt["busy_fraction"] == pytest.approx(busy / span, rel=1e-9)


def test_hpa_keeps_the_replicas_it_started_with_for_its_scale_down_window(tmp_path):
    """Kubernetes' HPA records the replica count it finds at its first reconcile as a recommendation
    (``recordInitialRecommendation``, pkg/controller/podautoscaler/horizontal.go), so with the default 300-s
    scale-down window a pool that starts at 2 and idles stays at 2 until 300 s, then drops to the minimum. Before,
    the first decision (15 s) already halved it."""
    import json
    from llmsched.cli import main
    out = tmp_path / "run"
    main(["simulate", "--replicas", "2", "--autoscaler", "hpa", "--min-replicas", "1", "--max-replicas", "4",
          "--cold-start", "10", "--workload", "sharegpt", "--rate", "0.5", "--duration", "400", "--seed", "1",
          "--out", str(out)])
    sizes = json.loads((out / "summary.json").read_text())["fleet"]["autoscalers"]["default"]["sizes"]
    assert sizes and sizes[0]["replicas"] == 1 and sizes[0]["t"] >= 300.0


FLEET = """
[pools.a]
gpu = "a100"
replicas = 1
provisioning = 5.0
loading = 10.0
warm = 5.0

[[scale]]
at = 10.0
pool = "a"
replicas = 3

[[scale]]
at = 17.0
pool = "a"
replicas = 2

[[scale]]
at = 40.0
pool = "a"
replicas = 1
"""


def test_billing_and_serving_time_follow_each_replicas_life(tmp_path):
    """One replica from t = 0; two asked for at 10 s (20 s of start-up: serving from 30 s); one of them given up at
    17 s while loading (gone at once, billed 7 s); the other drained from 40 s (billed until its last request
    leaves, which requests.csv shows). Billing and serving time add up from those hand-derived lives, the second
    replica serves nothing before 30 s nor receives anything after 40 s, and every request is accounted for."""
    import csv
    import json
    from llmsched.cli import main
    fleet = tmp_path / "fleet.toml"
    fleet.write_text(FLEET)
    out = tmp_path / "run"
    main(["simulate", "--fleet", str(fleet), "--workload", "sharegpt", "--rate", "4", "--duration", "60", "--seed",
          "1", "--out", str(out)])
    s = json.loads((out / "summary.json").read_text())
    rows = list(csv.DictReader(open(out / "requests.csv")))
    end = s["run"]["end_time"]
    second = [r for r in rows if r["replica"] == "1"]
    assert second and {r["replica"] for r in rows} == {"0", "1"}  # the one given up while loading served nothing
    assert min(float(r["queued"]) for r in second) >= 30.0 and max(float(r["queued"]) for r in second) < 40.0
    drained = max(float(r["finish"]) for r in second)
    pool = s["fleet"]["pools"]["a"]
    assert pool["replicas_made"] == 3
    assert pool["billed_replica_s"] == pytest.approx(end + (drained - 10.0) + (17.0 - 10.0), rel=1e-12)
    assert pool["serving_replica_s"] == pytest.approx(end + (drained - 30.0), rel=1e-12)
    assert pool["billed_gpu_s"] == s["fleet"]["billed_gpu_s"] == pool["billed_replica_s"]
    assert 0.0 <= pool["utilisation"] <= 1.0 and 0.0 <= pool["billed_utilisation"] <= pool["utilisation"]
    counts = s["counts"]
    assert counts["finished"] + counts["rejected"] + counts["unfinished"] == counts["offered"] == len(rows)


def offload_run(offload: str, tp: int, num_blocks: int, prompts):
    """One vllm-chunked replica of Llama-3.1-8B on an H100 at TP ``tp`` with a ``num_blocks`` GPU cache and the
    tiers ``offload``, serving ``prompts`` (lists of (piece, tokens)) a second apart, two output tokens each."""
    from llmsched.batchtime.registry import make_batch_time_model
    from llmsched.content import Content
    from llmsched.engine.offload_plan import plan_offload
    from llmsched.engine.offload_spec import parse_kv_offload
    from llmsched.engine.replica import Replica, ReplicaConfig
    from llmsched.hardware.gpus import gpu
    from llmsched.routing.registry import make_router
    from llmsched.schedulers import create_scheduler
    from llmsched.sim.simulator import simulate
    m, g = model("llama-3.1-8b").with_tp(tp), gpu("h100")
    bt = make_batch_time_model("roofline", m, g)
    plan = plan_offload(parse_kv_offload(offload), "vllm", m, g, tp, 16)
    cfg = ReplicaConfig(num_blocks=num_blocks, block_size=16, max_model_len=131072, prefix_caching=True,
                        kv_offload=plan, check_invariants=True)
    rep = Replica(0, create_scheduler("vllm-chunked"), bt, cfg)
    reqs = [Request(i, float(i), sum(n for _, n in p), 2, content=Content.of_pieces(p, reply=100 + i))
            for i, p in enumerate(prompts)]
    simulate(OpenLoop(reqs), [rep], make_router("round-robin"))
    assert all(r.status is Status.FINISHED for r in reqs)
    return reqs, rep, bt


def test_a_prefix_reloaded_from_host_memory_at_tp_2_moves_each_ranks_half_at_once():
    """Llama-3.1-8B at TP 2: a 16-token block is 1 MiB a rank. A 3,200-token prompt pushed out of a 400-block GPU
    cache by two others comes back from host memory as 200 blocks, each rank's half over its own PCIe Gen5 link at
    once: 1 us + 200 x 3.5 us (one DMA copy a block) + 200 MiB / 52.6 GB/s, then the step computing the 100 new
    tokens."""
    from llmsched.content import Space, piece_id
    x, w = piece_id(Space.NAMED, 1), piece_id(Space.NAMED, 2)
    reqs, rep, bt = offload_run("cpu:10GiB", 2, 400, [[(x, 3200)], [(piece_id(Space.NAMED, 3), 3200)],
                                                      [(piece_id(Space.NAMED, 4), 3200)], [(x, 3200), (w, 100)]])
    b = reqs[3]
    load = 1e-6 + 200 * 3.5e-6 + 200 * 2**20 / 52.6e9
    assert b.num_cached == 3200 and b.tier_cached == (3200,)
    assert b.first_token - b.arrival == pytest.approx(load + bt.step_time(Batch([100], [3200], [])), rel=1e-9)
    tier = rep.kv.tiers.stats(10.0)["tiers"][0]
    assert tier["loaded_bytes"] == 200 * 2**21  # both ranks' halves
    assert tier["stored_chunks"] == 200 * 3 + 6  # every prompt chunk written through; the last prompt's 6 new


def test_a_full_host_tier_evicts_the_least_recent_tail_first():
    """A 300-chunk host tier (600 MiB of 2-MiB chunks) and a GPU cache holding one 3,200-token prompt: A (200
    chunks), then B (200) evicts A's 100 newest-ranked chunks, its tail (vLLM ranks a finished request's chunks tail
    oldest). A's prompt again finds its first 9 blocks still on the GPU (the 210-block cache kept what B did not
    need, tail evicted first there too) and the next 91 chunks in host memory: 1,600 tokens cached, 1,456 of them
    loaded."""
    from llmsched.content import Space, piece_id
    x, w = piece_id(Space.NAMED, 1), piece_id(Space.NAMED, 2)
    reqs, rep, _ = offload_run("cpu:600MiB", 1, 210, [[(x, 3200)], [(piece_id(Space.NAMED, 3), 3200)],
                                                      [(x, 3200), (w, 100)]])
    again = reqs[2]
    assert again.num_cached == 1600 and again.tier_cached == (1456,)
    tier = rep.kv.tiers.stats(10.0)["tiers"][0]
    assert tier["chunks"] == 300 and tier["chunks_held"] == 300
    assert tier["stored_chunks"] == 200 + 200 + 106  # the third stores past its loaded end: 206 - 100 chunks
    assert tier["evicted_chunks"] == tier["stored_chunks"] - tier["chunks_held"]


def test_a_disaggregated_request_is_first_scheduled_by_its_prefill_instance():
    """A request's first scheduling is its prefill's start (its arrival is already the prefill instance's queued
    stamp): the prefill and the KV transfer are service, not a wait. Before, it was the decode instance's first
    step, after the transfer, so the waiting-queue timeline and fairness's backlogged periods counted the
    prefill as queueing. With ``--pd-first-token prefill`` the stamp is the same."""
    for first_token in ("decode", "prefill"):
        res, state = pd([Request(0, 1.0, 1000, 5), Request(1, 2.0, 2000, 5)], pd_first_token=first_token)
        c = res.requests.cols
        prefill = state.replicas[0]
        for i, (t, n) in enumerate(((1.0, 1000), (2.0, 2000))):
            assert c["first_scheduled"][i] == t
            assert c["transfer_start"][i] == pytest.approx(t + prefill.batch_time.step_time(Batch([n], [0], [])))


def test_a_transfer_ending_within_the_networks_tolerance_after_an_advance_is_reported_not_dropped():
    """FairNetwork.advance(t) ends the bytes that finish within its relative tolerance (1e-9) after ``t`` at
    ``t`` (``progress``), so that a remainder too small to move the clock still ends; the last such step's
    finished transfers were dropped, not returned: the request stayed "transferring" on its decode replica, the
    network had nothing left in flight, and the run ended with it rejected as stalled (fuzz seed 25858: a
    2P1D-like fleet, FairBatching on the decode pool)."""
    from llmsched.engine.kv_network import FairNetwork
    net = FairNetwork()
    net.side("out", 1.0)
    net.side("in", 1.0)
    net.start(0.0, 1.0, "r", ("out", "in"), 0.0)
    assert net.advance(0.0) == []
    t = 1.0 - 1e-12  # the bytes end at 1.0, within the tolerance
    assert net.advance(t) == [("r", t)]
    assert net.next_event() is None and len(net) == 0 and net.done_count == 1

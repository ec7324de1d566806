"""Prefill/decode disaggregation (fleet/disagg.py, engine/remote_kv.py, fleet/kv_transfers.py): a request's TTFT is
its prefill queue, prefill, KV transfer, decode queue and first decode step; the decode side never recomputes the
prompt; decode-side blocks are reserved when a transfer starts, and a decode instance short of KV holds the next
transfer; the bytes follow each side's TP layout; transfers share the sides they cross; the deciders choose per
request; every request is accounted for and requests.csv shows the split."""
from __future__ import annotations

import csv
import dataclasses
import json
import math

import numpy as np
import pytest

from llmsched import fleet_setup
from llmsched.batchtime.base import Batch
from llmsched.cli import main
from llmsched.content import Content, Space, piece_id
from llmsched.engine.kv_network import FairNetwork, fair_rates
from llmsched.engine.kv_transfer import SharedLink, transfer_split
from llmsched.experiment import RunConfig, build_source, run_model
from llmsched.fleet_setup import simulate_fleet_config
from llmsched.hardware.links import link
from llmsched.metrics.requests import TRANSFER_FIELDS
from llmsched.request import Request, Status
from llmsched.workload.workload import OpenLoop

ENGINE = dict(latency_boundary="engine", batch_time="roofline")


def one_by_one(*lengths, gap: float = 5.0):
    """Requests far enough apart that each runs alone: (prompt, output) pairs, ``gap`` seconds between them."""
    return OpenLoop([Request(i, 1.0 + i * gap, p, o) for i, (p, o) in enumerate(lengths)])


def pd(source, **fields):
    cfg = RunConfig(**{**ENGINE, "scheduler": "vllm", "disaggregate": "1P1D", **fields})
    result, state = simulate_fleet_config(cfg, source)
    return result, state


def test_ttft_is_prefill_then_transfer_then_the_first_decode_step():
    """One request alone: the engine-side TTFT is the prefill step, the transfer (latency + one rank's bytes over
    the link) and the decode step that computes the prompt's last token, each priced by its own model."""
    prompt, output = 1000, 20
    result, state = pd(one_by_one((prompt, output)))
    cols = result.requests.cols
    assert list(cols["status"]) == [int(Status.FINISHED)] and cols["generated"][0] == output
    prefill, decode = state.replicas
    bt = prefill.batch_time
    step_prefill = bt.step_time(Batch([prompt], [0], []))
    step_first = decode.batch_time.step_time(Batch([1], [prompt - 1], []))
    spec = run_model(RunConfig(**ENGINE))
    per_rank, _ = transfer_split(spec, 1008, 1, 1)  # 1000 tokens in whole 16-token blocks
    xfer = link("ib-400g").latency + per_rank / link("ib-400g").bandwidth
    assert cols["prefill_replica"][0] == 0 and cols["replica"][0] == 1
    assert cols["transfer_start"][0] == pytest.approx(1.0 + step_prefill, rel=1e-12)
    assert cols["transfer_end"][0] - cols["transfer_start"][0] == pytest.approx(xfer, rel=1e-9)
    assert cols["ttft"][0] == pytest.approx(step_prefill + xfer + step_first, rel=1e-9)
    assert cols["transfer_bytes"][0] == 1008 * spec.kv_bytes_per_token


def test_with_the_first_token_at_the_prefill_ttft_ends_there_and_the_transfer_falls_in_the_next_gap():
    """``pd_first_token=prefill`` (DistServe, Splitwise): the client's first token is the prefill instance's, so
    the TTFT is the prefill step alone, and the transfer and the decode instance's first step fall in the gap
    before the second token; the decode side runs as before (the same finish)."""
    prompt, output = 1000, 20
    proxy, _ = pd(one_by_one((prompt, output)))
    result, state = pd(one_by_one((prompt, output)), pd_first_token="prefill")
    cols, before = result.requests.cols, proxy.requests.cols
    step_prefill = state.replicas[0].batch_time.step_time(Batch([prompt], [0], []))
    assert cols["ttft"][0] == pytest.approx(step_prefill, rel=1e-12)
    assert cols["finish"][0] == before["finish"][0] and cols["generated"][0] == output
    assert cols["tpot"][0] > before["tpot"][0]
    assert cols["max_gap"][0] >= cols["transfer_end"][0] - cols["transfer_start"][0]


def test_pools_that_fit_their_cards_run_where_the_runs_own_tp_would_not():
    """A 70B model at TP 4 in both pools on A100s: the run's own fields (TP 1) could not hold its weights, and its
    meta describes the KV cache of its first pool."""
    from llmsched.experiment import run
    cfg = RunConfig(model="llama-3-70b", gpu="a100", disaggregate="1P1D", prefill_tp=4, decode_tp=4,
                    scheduler="vllm", num_requests=20, rate=2.0)
    result = run(cfg)
    assert len(result.requests) == 20
    assert result.meta["kv_cache"] == result.meta["fleet"]["pools"]["prefill"]["kv_cache"]


def test_the_first_token_field_needs_a_disaggregated_run():
    with pytest.raises(ValueError, match="pd_first_token"):
        RunConfig(**ENGINE, pd_first_token="prefill")


def test_the_decode_side_never_recomputes_the_prompt():
    """Every decode-side prefill token is one prompt's last (the KV of the rest arrived), and the prefill side
    computes each prompt whole, its one token discarded."""
    lengths = [(300 + 97 * i, 5 + i) for i in range(12)]
    result, state = pd(one_by_one(*lengths, gap=0.05), decode_pool={"max_num_seqs": 4})
    cols = result.steps.arrays()
    replica = cols["replica"]
    assert int(cols["prefill_tokens"][replica == 1].sum()) == len(lengths)
    assert int(cols["prefill_tokens"][replica == 0].sum()) == sum(p for p, _ in lengths)
    log = result.requests.cols
    assert sorted(log["generated"]) == sorted(o for _, o in lengths)
    assert set(log["status"]) == {int(Status.FINISHED)}


def test_decode_blocks_are_reserved_when_the_transfer_starts_and_a_short_cache_holds_the_next():
    """A decode instance whose KV holds one prompt at a time: the second transfer starts only once the first
    request has finished and freed its blocks, and both finish."""
    blocks = 80  # 1280 tokens: one 1000-token request at its longest, never two
    result, state = pd(one_by_one((1000, 40), (1000, 40), gap=0.001), decode_pool={"num_blocks": blocks})
    cols = result.requests.cols
    order = np.argsort(cols["transfer_start"])
    first, second = order
    assert set(cols["status"]) == {int(Status.FINISHED)}
    assert cols["transfer_start"][second] >= cols["finish"][first]
    assert state.replicas[1].kv.free == blocks


def test_bytes_follow_the_tp_layouts():
    """Llama-3-8B (8 KV heads) from TP 1 to TP 2: all the KV crosses, each receiving rank takes half, and the
    transfer lasts as long as the sender's one rank moving all of it."""
    prompt = 1600
    _, whole = pd(one_by_one((prompt, 4)))
    result, state = pd(one_by_one((prompt, 4)), decode_tp=2)
    cols = result.requests.cols
    spec = run_model(RunConfig(**ENGINE))
    assert cols["transfer_bytes"][0] == prompt * spec.kv_bytes_per_token
    send, recv = transfer_split(spec, prompt, 1, 2)
    assert send == 2 * recv == prompt * spec.kv_bytes_per_token
    assert state.transfers.rank_bytes(prompt, 0, 1) == (send, send)
    result2, _ = pd(one_by_one((prompt, 4)), prefill_tp=2, decode_tp=2)
    c2 = result2.requests.cols
    both_tp2 = c2["transfer_end"][0] - c2["transfer_start"][0]
    assert both_tp2 < 0.6 * (cols["transfer_end"][0] - cols["transfer_start"][0])


def test_transfers_share_the_sides_they_cross():
    """One side shared by all: processor sharing, as SharedLink; a decode instance receiving from two prefill
    instances while one of them also sends elsewhere: max-min fair rates."""
    net, ref = FairNetwork(), SharedLink(10.0, 0.5)
    net.side("in", 10.0)
    for i, (t, size) in enumerate(((0.0, 30.0), (1.0, 10.0), (1.5, 25.0))):
        for tag, _ in net.advance(t):
            pass
        ref.advance(t)
        net.start(t, size, i, ("in",), 0.5)
        ref.start(t, size, i)
    mine, theirs = net.advance(100.0), ref.advance(100.0)
    assert [tag for tag, _ in mine] == [tag for tag, _ in theirs]
    assert np.allclose([t for _, t in mine], [t for _, t in theirs], rtol=1e-9)
    # sides a, b send; c, d receive: flows a->c, b->c, a->d, each side 12 units/s
    caps = {"a": 12.0, "b": 12.0, "c": 12.0, "d": 12.0}
    assert fair_rates([("a", "c"), ("b", "c"), ("a", "d")], caps) == pytest.approx([6.0, 6.0, 6.0])
    caps["c"] = 4.0  # c binds: its two flows get 2 each, a's flow to d takes the rest of a
    assert fair_rates([("a", "c"), ("b", "c"), ("a", "d")], caps) == pytest.approx([2.0, 2.0, 10.0])


def test_the_network_wakes_its_loop_when_a_transfer_lands_at_the_float_advance_finishes_it():
    """``next_finish``: past latencies that end first (each changes the rates, lands nothing) to the first landing,
    the very float ``advance`` reports for it, with transfers alone, sharing a side, or in their latency."""
    net = FairNetwork()
    net.side("out", 7.0)
    net.side("in", 3.0)
    net.side("other", 5.0)
    assert net.next_finish() is None
    net.start(0.0, 0.0, "empty", ("out", "in"), 0.25)
    assert net.next_finish() == 0.25 and net.advance(0.3) == [("empty", 0.25)]
    net.start(1.0, 10.0, "a", ("out", "in"), 0.4)  # alone: latency, then 10 bytes at the narrowest side (3/s)
    assert net.next_finish() == 1.4 + 10.0 / 3.0 and net.next_event() == 1.4
    assert net.advance(2.0) == []
    net.start(2.0, 6.0, "b", ("out", "other"), 0.5)  # shares "out" with "a" from 2.5 on
    assert net.advance(2.1) == []
    net.start(2.1, 1.0, "c", ("other",), 0.3)
    t = net.next_finish()
    assert t > net.next_event()  # latencies end first, and land nothing
    probe = net.advance(t)
    assert probe and probe[0][1] == t
    while len(net):
        t = net.next_finish()
        landed = net.advance(t + 1.0)
        assert landed[0][1] == t


@pytest.mark.parametrize("fields", [
    dict(scheduler="sarathi", workload="azure-code", rate=4.0),
    dict(scheduler="vllm-chunked", workload="sharegpt", rate=8.0, disaggregate="1P2D", num_blocks=700),
    dict(scheduler="sarathi", workload="azure-conv", rate=8.0, disaggregate="2P1D", pd_decider="llm-d",
         pd_decider_params={"non_cached_tokens": 512}),
    dict(scheduler="vllm", workload="sharegpt", rate=6.0, client_timeout=4.0),
])
def test_the_decode_pool_folds_past_finishes_and_the_run_equals_stepping(fields):
    """A request's end on the decode pool (its path's last stage) adds no event under an open-loop source, so
    those replicas fold decode runs past finishes as a plain run's do; a prefill instance's end hands its request
    on, so it never does. Folded or stepped one step at a time, every request and every step row is the same."""
    cfg = RunConfig(**{"batch_time": "vllm-v1", "num_requests": 200, "seed": 3, "disaggregate": "1P1D", **fields})
    folded, state = simulate_fleet_config(cfg, build_source(cfg))
    roles = {rep.index: members.role for rep, members in zip(state.replicas, state.members_of)}
    assert {roles[r.index] for r in state.replicas if r.quiet_finishes} == {"decode"}
    if state.replicas[-1].scheduler.steady_after_finishes:  # (vLLM v0's policy does not declare it)
        assert any(r.quiet_finishes and r.folds_finishes for r in state.replicas)
    stepped, _ = simulate_fleet_config(dataclasses.replace(cfg, fast_forward=False), build_source(cfg))
    for name, col in folded.requests.cols.items():
        assert np.array_equal(np.asarray(col), np.asarray(stepped.requests.cols[name]), equal_nan=True), name
    a, b = folded.steps.arrays(), stepped.steps.arrays()
    assert all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)


def test_two_prefill_instances_into_one_decode_share_its_link():
    """2P1D with two long prompts prefilled at the same time: their transfers to the one decode instance overlap
    and each takes about twice as long as alone."""
    source = OpenLoop([Request(0, 1.0, 4000, 4), Request(1, 1.0, 4000, 4)])
    result, _ = pd(source, disaggregate="2P1D", router="round-robin", kv_link="ib-100g")
    cols = result.requests.cols
    assert sorted(cols["prefill_replica"]) == [0, 1]
    alone, _ = pd(OpenLoop([Request(0, 1.0, 4000, 4)]), kv_link="ib-100g")
    one = alone.requests.cols["transfer_end"][0] - alone.requests.cols["transfer_start"][0]
    both = np.asarray(cols["transfer_end"]) - np.asarray(cols["transfer_start"])
    assert np.allclose(both, 2 * one, rtol=0.02)


def test_the_llm_d_decider_serves_short_prompts_on_the_decode_pool():
    source = one_by_one((8, 5), (2000, 5), (12, 5), gap=0.5)
    result, state = pd(source, pd_decider="llm-d", pd_decider_params={"non_cached_tokens": 16})
    cols = result.requests.cols
    by_id = {int(i): k for k, i in enumerate(cols["id"])}
    assert cols["prefill_replica"][by_id[1]] == 0 and cols["transfer_bytes"][by_id[1]] > 0
    for short in (0, 2):
        assert cols["prefill_replica"][by_id[short]] == -1 and math.isnan(cols["transfer_start"][by_id[short]])
        assert cols["replica"][by_id[short]] == 1 and cols["status"][by_id[short]] == int(Status.FINISHED)
    assert state.transfers.count == 1


def test_the_dynamo_decider_keeps_mostly_cached_prompts_local():
    """Dynamo's ISL-bounding policy: the first turn, nothing cached, goes to the prefill pool; a second request
    sharing its 1,200-token prefix finds it in the decode instance's cache (the transferred KV is cached there, as
    vLLM caches a loaded prompt's blocks) and is prefilled locally; a third, unrelated, goes remote again."""
    shared = piece_id(Space.SHARED, 7)

    def content(i, own):
        return Content.of_pieces([(shared, 1200), (piece_id(Space.TEXT, i), own)], piece_id(Space.REPLY, i))

    reqs = [Request(0, 1.0, 1300, 10, content=content(0, 100)), Request(1, 3.0, 1400, 10, content=content(1, 200)),
            Request(2, 5.0, 900, 10, content=Content.of_pieces([(piece_id(Space.TEXT, 9), 900)],
                                                               piece_id(Space.REPLY, 2)))]
    result, state = pd(OpenLoop(reqs), workload="shared-prefix", pd_decider="dynamo")
    assert state.replicas[1].caching
    cols = result.requests.cols
    by_id = {int(i): k for k, i in enumerate(cols["id"])}
    assert [cols["prefill_replica"][by_id[i]] for i in range(3)] == [0, -1, 0]
    assert cols["cached_tokens"][by_id[1]] >= 1184  # its local prefill started after the cached prefix
    assert set(cols["status"]) == {int(Status.FINISHED)}


def test_a_request_rejected_by_its_prefill_instance_is_recorded_as_the_clients():
    """A prompt the prefill pool's max_model_len refuses leaves with the client's lengths and a reason that says it
    was the prefill copy's (whose output is 1 token)."""
    source = one_by_one((500, 30), (3000, 30))
    result, _ = pd(source, prefill_pool={"max_model_len": 2048})
    cols = result.requests.cols
    by_id = {int(i): k for k, i in enumerate(cols["id"])}
    k = by_id[1]
    assert cols["status"][k] == int(Status.REJECTED) and cols["output_len"][k] == 30
    reason = result.requests.reasons[1]
    assert "max_model_len 2048" in reason
    assert reason.startswith("its prefill request (max_tokens=1): prompt 3000 + output 1 ")  # not the client's 30
    assert cols["prefill_replica"][k] == 0 and cols["replica"][k] == 0
    assert cols["status"][by_id[0]] == int(Status.FINISHED)


def test_a_horizon_leaves_every_request_accounted_for():
    cfg = RunConfig(**ENGINE, disaggregate="2P1D", rate=20.0, num_requests=60, horizon=2.0, router="round-robin")
    from llmsched.experiment import build_source
    source = build_source(cfg)
    result, state = simulate_fleet_config(cfg, source, horizon=cfg.horizon)
    cols = result.requests.cols
    assert sorted(cols["id"]) == sorted(r.id for r in source.initial() if r.arrival <= 2.0)
    status = set(cols["status"])
    assert int(Status.UNFINISHED) in status
    assert all(rep.kv.free == rep.kv.total for rep in state.replicas)
    assert len(state.handoff.clients) == 0 or all(rid in cols["id"] for rid in state.handoff.clients)


def test_the_cli_writes_the_split(tmp_path):
    out = tmp_path / "run"
    main(["simulate", "--disaggregate", "2P1D", "--rate", "3", "--num-requests", "30", "--decode-gpu", "h100",
          "--kv-link", "ib-200g", "--out", str(out)])
    with open(out / "requests.csv") as f:
        head = next(csv.reader(f))
    assert head[:7] == ["id", "replica", "pool", *TRANSFER_FIELDS]
    summary = json.loads((out / "summary.json").read_text())
    fleet = summary["fleet"]
    assert fleet["kv_transfer"]["transfers"] == 30 and fleet["kv_transfer"]["link"]["name"] == "ib-200g"
    assert set(fleet["pools"]) == {"prefill", "decode"} and fleet["pools"]["decode"]["finished"] == 30
    assert 0 < fleet["pools"]["prefill"]["utilisation"] < 1
    meta = json.loads((out / "meta.json").read_text())
    assert meta["fleet"]["pools"]["decode"]["fields"]["gpu"] == "h100"


def test_the_printed_row_names_each_pools_scheduler_where_they_differ(capsys):
    main(["simulate", "--disaggregate", "1P1D", "--decode-pool", "scheduler=vllm", "--rate", "3", "--num-requests",
          "10", "--no-progress"])
    row = capsys.readouterr().out.splitlines()[2]
    assert row.split()[0] == "prefill=sarathi,decode=vllm"
    main(["simulate", "--disaggregate", "1P1D", "--rate", "3", "--num-requests", "10", "--no-progress"])
    assert capsys.readouterr().out.splitlines()[2].split()[0] == "sarathi"


def test_a_kv_landing_during_a_run_of_decode_steps_waits_one_step_at_most():
    """A decode replica folding a run of decode-only steps must not fold past a transfer it has just started:
    each landed request's first token comes within three decode steps of its transfer's end (vLLM's async
    scheduling: the rest of the step in flight, the one planned without it, then its own)."""
    reqs = [Request(i, 0.5 * i, 300, 400 if i else 3000) for i in range(8)]
    cfg = RunConfig(latency_boundary="engine", scheduler="vllm-chunked", disaggregate="1P1D")
    result, _ = simulate_fleet_config(cfg, OpenLoop(reqs))
    cols, steps = result.requests.cols, result.steps.arrays()
    longest = float(steps["duration"][steps["replica"] == 1].max())
    wait = np.asarray(cols["first_token"]) - np.asarray(cols["transfer_end"])
    assert (wait > 0).all() and wait.max() <= 3 * longest, (wait, longest)


@pytest.mark.parametrize("shared", [False, True])
def test_a_remainder_too_small_to_move_the_clock_still_ends(shared):
    """Late in a long run (the clock at 1e7 s) two transfers whose ends differ by less than the clock's resolution:
    both end, where the event loop used to wait forever for a clock that could not reach the second's end."""
    import signal
    signal.alarm(20)
    try:
        if shared:
            link_ = SharedLink(4.5e10, 1e-6)
            link_.advance(1e7)
            link_.start(1e7, 7.3e7, "a")
            link_.start(1e7, 7.3e7 * (1 + 3e-9), "b")
            done = link_.advance(1e7 + 1.0)
        else:  # three transfers over two senders and two receivers (a case that hung, found by a random search)
            link_ = FairNetwork()
            for side, bw in (("s0", 5.26e10), ("s1", 4.35e10), ("r0", 4.35e10), ("r1", 5.26e10)):
                link_.side(side, bw)
            link_.advance(1e6)
            for t, nbytes, tag, sides in ((1000000.00005008, 220000002.14115497, "a", ("s0", "r1")),
                                          (1000000.0001474251, 130000000.36940718, "b", ("s1", "r0")),
                                          (1000000.0001954478, 220000001.8772335, "c", ("s1", "r1"))):
                link_.advance(t)
                link_.start(t, nbytes, tag, sides, 8.3e-7)
            done = link_.advance(1e6 + 10.0)
    finally:
        signal.alarm(0)
    assert sorted(tag for tag, _ in done) == (["a", "b"] if shared else ["a", "b", "c"])


def test_one_token_prompts_sent_to_a_full_decode_cache_are_admitted_on_the_blocks_they_hold():
    """A one-token prompt arrives with its one block and none of its tokens computed (its last token is the one
    the decode side computes): its admission takes no further block. Before, it was sized as a new request (one
    more block), so a decode cache filled by such loads stood idle for ever (the full-size fuzz's seed 3973)."""
    blocks = 3  # three loaded one-token prompts fill it; each grows within its own block
    result, state = pd(one_by_one((1, 4), (1, 4), (1, 4), (1, 4), gap=0.0001), scheduler="sarathi",
                       decode_pool={"num_blocks": blocks})
    cols = result.requests.cols
    assert list(cols["status"]) == [int(Status.FINISHED)] * 4
    assert state.replicas[1].kv.free == blocks


def test_goodput_serves_prompts_that_hold_their_kv_before_one_that_cannot_grow_into_the_cache_they_hold():
    """A decode instance under goodput with a one-token step: the long decode runs alone while six sent prompts
    arrive and hold most of its cache, waiting. When it finds no block it is preempted; resumed first (goodput's
    rule), it could only recompute up to the same wall again. Before, an idle replica admitted it past the KV
    threshold for ever (the livelock guard ended the run); now the prompts that hold their KV run first."""
    lengths = [(10, 200)] + [(40, 4)] * 6
    source = OpenLoop([Request(i, 1.0 + i * 0.01, p, o) for i, (p, o) in enumerate(lengths)])
    result, state = pd(source, scheduler="goodput", max_num_batched_tokens=1, decode_pool={"num_blocks": 16})
    cols = result.requests.cols
    assert list(cols["status"]) == [int(Status.FINISHED)] * 7
    assert sorted(cols["generated"]) == [4] * 6 + [200]
    assert state.replicas[1].kv.free == 16


def test_a_decode_instance_reserves_at_its_next_step_end_without_asking_its_policy_while_its_plan_repeats(
        monkeypatch):
    """One long request decodes alone on the decode instance (its plan repeats) while short ones are sent to it:
    each is reserved, and its transfer starts, at the end of the decode step after the one it arrived in (vLLM's
    scheduling point, planned without it), as when the policy is asked there; the policy is asked only for what
    it sees (a loaded request's admission, its first-token step, a finish), and the step row that ends at a
    reservation reports the KV as the step left it."""
    short = 6
    reqs = [Request(0, 0.0, 300, 4000)] + [Request(i, 1.0 * i, 300, 3) for i in range(1, short + 1)]
    cfg = RunConfig(latency_boundary="engine", scheduler="sarathi", disaggregate="1P1D")
    asked = []
    build = fleet_setup.build_fleet

    def watched(*args, **kwargs):
        state = build(*args, **kwargs)
        decode = state.replicas[1].scheduler
        schedule = decode.schedule
        decode.schedule = lambda view: (asked.append(view.now), schedule(view))[1]
        return state

    monkeypatch.setattr(fleet_setup, "build_fleet", watched)
    result, _ = simulate_fleet_config(cfg, OpenLoop(reqs))
    cols, steps = result.requests.cols, result.steps.arrays()
    mine = steps["replica"] == 1
    ends = steps["start"][mine] + steps["duration"][mine]
    used = steps["kv_used_blocks"][mine]
    prefill_ends = np.sort(steps["start"][~mine] + steps["duration"][~mine])
    by_id = {int(rid): i for i, rid in enumerate(cols["id"])}
    for rid in range(1, short + 1):
        i = by_id[rid]
        hop = prefill_ends[np.searchsorted(prefill_ends, cols["arrival"][i])]  # its prompt, alone in one step
        in_flight = int(np.searchsorted(ends, hop))  # the decode step it arrived in
        k = in_flight + 1
        assert cols["transfer_start"][i] == ends[k], (rid, cols["transfer_start"][i], ends[k - 1:k + 2])
        # that step's row: the long request's blocks alone (at most one more); the next one's: the prompt's too
        assert used[k] - used[k - 1] <= 1 and used[k + 1] - used[k] >= -(-300 // 16), used[k - 1:k + 2]
    assert set(cols["status"]) == {int(Status.FINISHED)}
    assert len(asked) <= 3 * short, asked


def test_a_reservation_that_would_leave_the_decodes_short_goes_to_the_policy_after_the_row_is_written():
    """One-token blocks: the long request's decode takes a block every step. A short prompt sent when the free
    blocks are exactly its own would leave the decode none: that step is not repeated unasked; the row of the
    step that ended still shows the KV without the reservation (the long request's one more block at most), and
    the policy, asked after the reservation, preempts. Swept over the short prompt's send time so that one of the
    sends meets the cache exactly full."""
    at_step_ends = 0
    for i in range(100):
        reqs = [Request(0, 0.0, 100, 200), Request(1, 1.0 + 0.03 * i, 20, 5)]
        result, _ = pd(OpenLoop(reqs), scheduler="sarathi", block_size=1, decode_pool={"num_blocks": 310})
        cols, steps = result.requests.cols, result.steps.arrays()
        assert set(cols["status"]) == {int(Status.FINISHED)}
        mine = steps["replica"] == 1
        ends = steps["start"][mine] + steps["duration"][mine]
        used = steps["kv_used_blocks"][mine]
        start = cols["transfer_start"][list(cols["id"]).index(1)]
        k = int(np.searchsorted(ends, start))
        if k < len(ends) and ends[k] == start:  # reserved at a step's end (not on an idle replica, after the first)
            assert used[k] - used[k - 1] <= 1, (i, used[k - 2:k + 2])
            at_step_ends += 1
    assert at_step_ends > 50


def test_a_prompt_sent_to_a_sarathi_decode_instance_leaves_the_blocks_a_running_prompt_was_promised():
    """Sarathi allocates a prompt's whole KV at admission (its chunks take no block of their own), so a prompt a
    prefill instance sends is reserved only the blocks beyond that promise. Before, the scheduling point reserved
    every free block for the sent prompt, and the running prompt's next chunk found none: the plan checker stopped
    the run ("KV cache capacity exceeded (preempt first)"; the full-size fuzz's seed 9103, a recompute chunked 3
    tokens a step on a decode instance)."""
    from llmsched.engine.replica import Replica, ReplicaConfig
    from llmsched.schedulers.registry import create_scheduler

    from conftest import AffineStepTime

    cfg = ReplicaConfig(num_blocks=20, block_size=16, max_num_batched_tokens=16, check_invariants=True)
    rep = Replica(0, create_scheduler("sarathi"), AffineStepTime(), cfg)
    long, sent = Request(0, 0.0, 160, 4), Request(1, 0.0, 300, 2)  # 10 blocks for its prompt; 19 for the sent one
    rep.add(long, 0.0)
    t = rep.start_step(0.0)  # its first 16-token chunk: 1 block taken, 9 more promised, 10 free besides
    rep.end_step(t)
    assert rep.kv.free == 19
    rep.receive(sent, t)
    while rep.num_outstanding:
        d = rep.start_step(t)
        reserved = rep.take_reserved()
        if reserved:
            assert long.num_computed >= long.prompt_len  # reserved only once the promise was kept
        if d is not None:
            t += d
            rep.end_step(t)
        for r in reserved:  # its transfer takes no time here
            rep.loaded(r, t)
        assert d is not None or reserved, "idle with work left"
        rep.take_completed()
    assert long.status is sent.status is Status.FINISHED and rep.kv.free == 20


def test_a_pool_table_takes_its_schedulers_parameters_from_a_config_file(tmp_path, capsys):
    """--decode-pool's fields are scalars on the command line; a config file (or the API, as validate-serving's
    1P1D replay) may give a pool its scheduler's parameters as a table, checked against that scheduler."""
    config = tmp_path / "pd.toml"
    config.write_text('disaggregate = "1P1D"\nscheduler = "vllm-chunked"\nnum_requests = 20\n'
                      '[decode_pool.scheduler_params]\ntoken_budget = 256\n')
    out = tmp_path / "run"
    assert main(["simulate", "--config", str(config), "--out", str(out), "--no-progress"]) == 0
    meta = json.loads((out / "meta.json").read_text())
    assert meta["fleet"]["pools"]["decode"]["fields"]["scheduler_params"] == {"token_budget": 256}
    config.write_text(config.read_text().replace("token_budget", "token_budgie"))
    assert main(["simulate", "--config", str(config), "--no-progress"]) == 2
    assert "has no parameter 'token_budgie'" in capsys.readouterr().err


def test_a_pools_card_given_twice_in_two_cases_is_one_card(capsys):
    """--decode-gpu A100 with --decode-pool gpu=a100 names one card (a card's name is read in any case); another card
    is a contradiction (tests/data/bad_inputs.toml)."""
    assert main(["simulate", "--disaggregate", "1P1D", "--decode-gpu", "A100", "--decode-pool", "gpu=a100",
                 "--num-requests", "5", "--batch-time", "roofline"]) == 0
    assert main(["simulate", "--disaggregate", "1P1D", "--decode-gpu", "h100", "--decode-pool", "gpu=A100",
                 "--num-requests", "5"]) == 2
    assert "--decode-gpu h100 contradicts --decode-pool gpu=\"A100\"" in capsys.readouterr().err

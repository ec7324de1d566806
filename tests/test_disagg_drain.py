"""A draining prefill replica and the KV it sent: vLLM's prefill instance keeps a prompt's KV until the decode
instance's connector has read it (NixlConnector's ``request_finished`` delays the free of a request sent on for
remote decode; the decode side's abort of that request frees it), so an instance given up stays until every prompt
it sent has been read, or its request has left, and goes then."""
from __future__ import annotations

import pytest

from llmsched.experiment import RunConfig
from llmsched.fleet.deciders import Always
from llmsched.fleet.disagg import unbuilt
from llmsched.fleet.fleet import Fleet, ScaleEvent
from llmsched.fleet.lifecycle import DRAINING, GONE
from llmsched.fleet.pool import Pool
from llmsched.fleet_setup import simulate_fleet_config
from llmsched.request import Request, Status
from llmsched.workload.workload import OpenLoop

ENGINE = RunConfig(latency_boundary="engine", batch_time="roofline", scheduler="vllm", model="llama-3-8b", gpu="h100")


def run(reqs, decode_fields=None, scale=(), at=0.001):
    """One prefill replica (index 0) given up at ``at`` (1 ms), beside one decode replica (index 1)."""
    fleet = Fleet((Pool("p", 1, role="prefill"), Pool("d", 1, role="decode", fields=decode_fields or {})),
                  scale=tuple(sorted((ScaleEvent(at, "p", 0), *scale), key=lambda e: e.at)), paths=Always(unbuilt()))
    return simulate_fleet_config(ENGINE, OpenLoop(reqs), fleet=fleet)


def test_a_drained_prefill_replica_leaves_when_the_decode_side_has_read_the_last_kv_it_sent():
    """Two 2,048-token prompts prefilled together by a replica draining from 1 ms; the decode replica's 200 blocks
    (3,200 tokens) hold one prompt, so the second's KV is read only once the first request's 400 tokens are out,
    seconds after both prefills ended. The prefill replica is gone at that read, not at its last prefill's end (where
    it was gone before, with that KV still to read), and is billed up to then."""
    res, state = run([Request(0, 0.0, 2048, 400), Request(1, 0.0, 2048, 4)], {"num_blocks": 200})
    c = res.requests.cols
    assert list(c["prefill_replica"]) == [0, 0] and list(c["replica"]) == [1, 1]
    assert all(Status(s) is Status.FINISHED for s in c["status"])
    assert c["transfer_end"][0] < 0.2  # both prompts prefilled and the first read within the first 0.2 s
    assert c["transfer_start"][1] >= c["finish"][0] > 3.0  # the second read only after the first request left
    life = dict(state.lives[0].entered)
    assert life[DRAINING] == 0.001
    assert life[GONE] == c["transfer_end"][1]
    assert res.fleet["pools"]["p"]["billed_replica_s"] == c["transfer_end"][1]


def test_a_sent_prompt_no_decode_replica_takes_frees_its_prefill_replica_when_it_is_rejected():
    """The decode pool scaled to 0 with the prefill: the prompt's request is rejected when its prefill ends, for want
    of a decode replica, and the prefill replica holds its KV no more: it is gone then, not draining for ever."""
    res, state = run([Request(0, 0.0, 2048, 400)], scale=(ScaleEvent(0.001, "d", 0),))
    c = res.requests.cols
    assert Status(c["status"][0]) is Status.REJECTED and c["prefill_replica"][0] == 0
    assert "no replica of the fleet's 'decode' pools" in res.requests.reasons[0]
    assert state.draining == set()
    assert dict(state.lives[0].entered)[GONE] == c["finish"][0] > 0.001


def test_a_prefill_replica_given_up_after_its_kv_was_read_goes_at_once():
    """Given up at 1 s, after its one prompt's KV was read (within 0.1 s) while the request still decodes on the
    decode replica: nothing it sent is left to read, so it is gone the instant it is given up."""
    res, state = run([Request(0, 0.0, 2048, 400)], at=1.0)
    c = res.requests.cols
    assert Status(c["status"][0]) is Status.FINISHED
    assert c["transfer_end"][0] < 0.1 and c["finish"][0] > 1.0
    assert dict(state.lives[0].entered)[GONE] == 1.0


def test_a_decode_replica_given_up_goes_when_an_aborted_requests_kv_lands():
    """Fuzz seed 40,647: a decode replica given up while a prompt's KV crossed a slow link, whose client gave up
    during the transfer. The request leaves ABORTED at once, but the replica keeps its blocks until the transfer
    lands (vLLM delays the free of a WAITING_FOR_REMOTE_KVS request); it then holds nothing, and is gone at that
    landing. It stayed draining to the end of the run before: nothing completed there to check it."""
    cfg = RunConfig.checked({**vars(ENGINE), "pd_decider": "always", "kv_link": "bw=50MB/s,latency=1ms",
                             "client_timeout": 1.0})
    fleet = Fleet((Pool("p", 1, role="prefill"), Pool("d", 1, role="decode")),
                  scale=(ScaleEvent(0.5, "d", 0),), paths=Always(unbuilt()))
    res, state = simulate_fleet_config(cfg, OpenLoop([Request(0, 0.0, 2048, 400)]), fleet=fleet)
    c = res.requests.cols
    assert Status(c["status"][0]) is Status.ABORTED and c["replica"][0] == 1
    # the transfer (its end is not logged: the request left before) lands 1 ms + 256 MiB at 50 MB/s after its
    # start, after the replica was given up (0.5 s) and the client gave up (1 s)
    landed = c["transfer_start"][0] + 0.001 + c["transfer_bytes"][0] / 50e6
    assert c["transfer_start"][0] < 0.5 < c["finish"][0] == 1.0 < landed
    life = dict(state.lives[1].entered)
    assert life[DRAINING] == 0.5 and life[GONE] == pytest.approx(landed, rel=1e-12)
    assert state.draining == set()

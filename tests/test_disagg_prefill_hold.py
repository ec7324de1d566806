"""A prefill instance keeps a finished prompt's KV blocks until the decode side has read them (vLLM's NIXL
connector delays their free), so a decode pool that cannot take prompts fast enough fills the prefill instance's
cache and holds its queue back."""
from __future__ import annotations

from conftest import AffineStepTime

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import run
from llmsched.request import Request, Status
from llmsched.run_config import RunConfig
from llmsched.schedulers.registry import create_scheduler

# 30 prompts of 1,024 tokens at once; the prefill instance's cache holds three (64 blocks each), the decode
# instance takes one request at a time
BACKLOG = dict(model="llama-3-8b", gpu="a100", workload="shared-prefix", num_requests=30, rate=50.0, seed=2,
               workload_params={"num_groups": 1, "num_prompts_per_group": 30, "system_prompt_len": 1000,
                                "question_len": 24, "output_len": 200},
               prefix_caching=False, scheduler="vllm-chunked", disaggregate="1P1D",
               prefill_pool={"num_blocks": 200}, decode_pool={"max_num_seqs": 1}, check_invariants=True)


def test_a_prefill_instance_holds_a_prompts_blocks_until_the_decode_side_reads_them():
    """Before 2026-11-30 the blocks went at the prefill's end: the prefill instance ran 29 prompts ahead of a
    decode instance that could take one."""
    log = run(RunConfig(**BACKLOG)).requests
    assert (log.column("status") == int(Status.FINISHED)).all()
    scheduled, read = log.column("first_scheduled"), log.column("transfer_end")
    unread = [int(((scheduled <= t) & (t < read)).sum()) for t in scheduled]  # prefilled or prefilling, not read
    assert max(unread) == 3


def test_a_prefill_replicas_steps_count_the_blocks_it_keeps_for_the_decode_side():
    """Over a slow link (each prompt's 128 MiB of KV in about 0.13 s), the prefill instance's steps during a
    transfer count that prompt's 64 blocks among those in use."""
    result = run(RunConfig(**{**BACKLOG, "decode_pool": {}, "prefill_pool": {}, "rate": 10.0},
                           kv_link="bw=1GB/s,latency=1ms"))
    log, steps = result.requests, result.steps
    on_prefill = steps.column("replica") == 0
    start, used = steps.column("start")[on_prefill], steps.column("kv_used_blocks")[on_prefill]
    seen = 0
    for begin, end in zip(log.column("transfer_start"), log.column("transfer_end")):
        during = (start >= begin) & (start < end)
        assert (used[during] >= 64).all()  # the prompt's blocks, until its transfer ends
        seen += int(during.sum())
    assert seen >= 10


def test_a_prompt_short_of_the_blocks_kept_for_the_decode_side_preempts_itself_and_waits_for_them():
    """A prefill instance (vllm-chunked admitting on a first chunk's blocks, vLLM before its full-prompt gate) keeps
    the 4 blocks of a prompt it sent; the one running prompt then needs 3 blocks with 2 free, and preempts itself
    with nothing else to run, as vLLM does. Before 2026-12-02 the replica refused that plan (preemptions without
    work) unless a decode instance's transfers held the blocks. Once the decode side has read the sent prompt, the
    other finishes."""
    cfg = ReplicaConfig(num_blocks=8, block_size=16, max_num_batched_tokens=48, check_invariants=True)
    rep = Replica(0, create_scheduler("vllm-chunked", token_budget=48, reserve_full_isl=False), AffineStepTime(), cfg)
    rep.send_kv()
    sent, long = Request(0, 0.0, 64, 1), Request(1, 0.0, 96, 1)
    rep.add(sent, 0.0)
    rep.add(long, 0.0)
    t = 0.0
    for _ in range(3):
        t += rep.start_step(t)
        rep.end_step(t)
        rep.take_completed()
    assert sent.status is Status.FINISHED and rep.sent == {0: sent}
    assert long.preemptions == 1 and long.status is Status.RUNNING  # preempted itself, then admitted again
    assert rep.read_sent(sent.id)
    while rep.num_outstanding:
        t += rep.start_step(t)
        rep.end_step(t)
        rep.take_completed()
    assert long.status is Status.FINISHED and rep.sent == {1: long} and rep.kv.free == 8 - 6

"""A prefill instance keeps a finished prompt's KV blocks until the decode side has read them (vLLM's NIXL
connector delays their free), so a decode pool that cannot take prompts fast enough fills the prefill instance's
cache and holds its queue back."""
from __future__ import annotations

from llmsched.experiment import run
from llmsched.request import Status
from llmsched.run_config import RunConfig

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

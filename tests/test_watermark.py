"""A prompt that needs more KV blocks than the cache less a policy's admission watermark can never be admitted: it is
rejected with that reason (vLLM v0's AllocStatus.NEVER), never left waiting on an idle replica."""
from __future__ import annotations

import pytest

from llmsched.experiment import RunConfig, build_replicas
from llmsched.request import Request, Status
from llmsched.schedulers.registry import create_scheduler, scheduler_names
from llmsched.sim.simulator import simulate
from llmsched.workload.workload import OpenLoop


WATERMARKED = [name for name in scheduler_names() if hasattr(create_scheduler(name), "watermark")]


@pytest.mark.parametrize("name", WATERMARKED)
def test_a_prompt_above_the_watermark_is_rejected_not_stalled(name):
    """Every policy with an admission watermark, at 1% (rad and InferMax default to none). InferMax's watermark
    yields on an idle replica (infermax.py), so there the prompt runs; every other policy rejects it."""
    # 328 blocks of 16 tokens, a 1% watermark of 3 blocks: 325 can be admitted into; 5,201 tokens need 326
    cfg = RunConfig(scheduler=name, scheduler_params={"watermark": 0.01}, num_blocks=328,
                    max_num_batched_tokens=8192, oracle=True)
    fits = Request(0, 0.0, 325 * 16 - 9, 8)
    never = Request(1, 0.1, 5201, 9)
    result = simulate(OpenLoop([fits, never]), build_replicas(cfg))
    assert fits.status is Status.FINISHED
    assert "stalled" not in " ".join(result.requests.reasons.values())
    if name.startswith("infermax"):
        assert never.status is Status.FINISHED
        return
    assert never.status is Status.REJECTED
    assert "can never be admitted" in never.reject_reason and "326 KV blocks" in never.reject_reason


def test_without_a_watermark_the_same_prompt_runs():
    cfg = RunConfig(scheduler="sarathi", scheduler_params={"watermark": 0.0}, num_blocks=328)
    never = Request(1, 0.1, 5201, 9)
    simulate(OpenLoop([never]), build_replicas(cfg))
    assert never.status is Status.FINISHED

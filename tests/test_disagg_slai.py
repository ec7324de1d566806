"""SLAI (Bari et al.) on a disaggregated fleet's decode pool (Scheduler.serves_transferred_kv). The prompts a prefill
instance sent wait holding their blocks and go first, whatever SLAI's prefill order (vLLM 0.32 drains its KV-holding
waiting queue first), and a plan of preemptions alone stands when such a prompt waits: the blocks it frees let that
prompt in. Before, both held only beside KV tiers, and the decode-pool fuzz (``scripts/decode_pool_fuzz.py slai``)
failed 50 of 1,184 disaggregated seeds, each a stall."""
from __future__ import annotations

import pytest
from conftest import AffineStepTime

from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.request import Request, Status
from llmsched.schedulers.registry import create_scheduler
import test_fuzz_conservation as fuzz
from test_disagg_priority import drive


def test_a_sent_prompt_goes_before_a_shorter_prompt_that_does_not_fit():
    """Shortest-prefill-first puts a 40-token prompt (3 blocks) ahead of a 64-token prompt a prefill instance sent
    (its 4 blocks held, 2 of the 6 free): the short one does not fit, and before, admissions stopped there and
    nothing ever ran. The sent prompt runs first; its blocks then admit the other."""
    cfg = ReplicaConfig(num_blocks=6, block_size=16, max_num_batched_tokens=512, check_invariants=True)
    rep = Replica(0, create_scheduler("slai"), AffineStepTime(), cfg)
    sent = Request(0, 0.0, 64, 3)
    rep.receive(sent, 0.0)
    short = Request(1, 0.0, 40, 2)
    rep.add(short, 0.0)
    assert drive(rep) == [sent, short]
    assert sent.status is Status.FINISHED and short.status is Status.FINISHED and rep.kv.free == 6


@pytest.mark.parametrize("seed", [25, 85, 273])
def test_the_fuzz_seeds_that_stalled_with_slai_on_every_decode_pool_run(seed, monkeypatch):
    """Stalls the decode-pool fuzz found: a decode instance idle with a sent prompt behind a prompt that did not fit
    (273: 4 waiting, none running, 55 of 183 blocks free), and one whose only running request, short of a block,
    could not preempt itself for the sent prompts waiting (85: 0 of 48 blocks free)."""
    monkeypatch.setattr(fuzz, "decode_schedulers", lambda: ["slai"])
    kind, message = fuzz.outcome(seed)
    assert kind == "ok", message

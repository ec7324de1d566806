"""every policy meets every replica limit (token budget, sequences, KV blocks, swap space) in
every preemption mode, or its configuration is refused before the run; the replica's plan check is the safety
net, and a plan it rejects is a bug of the policy. Each configuration that showed a bug is kept here."""
import warnings
from pathlib import Path

import pytest

from llmsched.experiment import RunConfig, run
from llmsched.request import Status

from test_fuzz_conservation import STALLED, builtin_schedulers
from test_reliability_engine import RECOMPUTE_ONLY


def accounted(**cfg):
    """Run ``cfg`` under invariant checking; every request finished or rejected with a reason (none stalled)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run(RunConfig(check_invariants=True, **cfg))
    log = result.requests
    status = [Status(s) for s in log.cols["status"]]
    assert len(status) == cfg["num_requests"]
    for s, rid in zip(status, log.cols["id"]):
        reason = log.reasons.get(rid, "")
        assert s is Status.FINISHED or (s is Status.REJECTED and reason and STALLED not in reason), (s, reason)
    return status


@pytest.mark.parametrize("name", ["rad", "rad-lowtbt"])
def test_rad_decode_batches_stay_within_a_one_token_budget(name):
    """'max_num_batched_tokens exceeded (20 > 1)': RAD filled t*_col = 128 decode seats whatever the budget."""
    status = accounted(scheduler=name, num_requests=20, max_num_batched_tokens=1, max_total_tokens=256)
    assert status.count(Status.FINISHED) == 20


def test_rad_lowtbt_issue_configuration():
    accounted(scheduler="rad-lowtbt", seed=3179, num_requests=51, model="llama-3-70b-tp4", gpu="h100",
              batch_time="linear", workload="sharegpt", rate=9.42, max_num_batched_tokens=16)


def test_slai_swap_ins_do_not_take_blocks_reserved_for_paused_prefills():
    """'KV cache capacity exceeded (plan needs 4 more blocks, 3 free)': swapped decodes came back into blocks SLAI
    had reserved for a paused prefill, whose next chunk then found them taken."""
    status = accounted(scheduler="slai-priority", seed=8944, num_requests=33, model="qwen3-14b", gpu="a100",
                       batch_time="roofline-staircase", workload="lmsys", rate=27.73, num_blocks=64,
                       max_num_batched_tokens=64, preemption_mode="swap")
    assert Status.FINISHED in status


def test_fairbatching_under_kv_pressure_decodes_within_the_token_budget():
    """Fuzz seed 1237: 'max_num_batched_tokens exceeded (6 > 5)': under KV pressure FairBatching planned every
    decode, whatever the budget."""
    model = str(Path(__file__).parent / "data" / "configs" / "codellama-34b")
    accounted(scheduler="fairbatching", model=model, gpu="h200", router="least-load", workload="lmsys",
              rate=3.728280579824054, num_requests=30, arrival="constant",
              tiers="gold:ttft=1:tpot=0.05:share=0.5,bronze:ttft=5", max_total_tokens=512, block_size=32,
              max_num_seqs=64, max_num_batched_tokens=5, max_model_len=4096, num_blocks=19, preemption_mode="swap",
              swap_space_gb=0.0, seed=444027839)


@pytest.mark.parametrize("mode", ["recompute", "swap"])
@pytest.mark.parametrize("name", builtin_schedulers())
def test_every_policy_at_tiny_limits(name, mode):
    """A 3-token budget, 2 seats, a 24-block cache, a 1-block swap space: served, rejected with a reason, or
    refused before the run with one line naming the option."""
    cfg = dict(scheduler=name, num_requests=8, rate=20.0, max_num_batched_tokens=3, max_num_seqs=2, num_blocks=24,
               max_total_tokens=128, preemption_mode=mode, swap_space_gb=0.002, oracle=True)
    if mode == "swap" and name in RECOMPUTE_ONLY:
        with pytest.raises(ValueError, match="preemption_mode 'recompute'"):
            accounted(**cfg)
        return
    if name == "vllm":  # vLLM without chunked prefill refuses a 3-token budget below its context
        with pytest.raises(ValueError, match=r"vLLM refuses these limits at start-up: max_num_batched_tokens \(3\) "
                                             r"is smaller than max_model_len"):
            accounted(**cfg)
        return
    accounted(**cfg)


@pytest.mark.parametrize("scheduler", ["sarathi", "sarathi-spf"])
def test_sarathi_swap_ins_stay_within_a_token_budget_below_max_num_seqs(scheduler):
    """Fuzz seed 6313, run colocated: a 4-token budget, 16 seats, swap under a tight cache. The engine swapped
    requests back while seats were free, so five decodes met a four-token step ('max_num_batched_tokens exceeded
    (5 > 4)'); swap-ins now leave a token of the budget to every running request (vLLM v0's _schedule_swapped).
    Then Sarathi, preempting prompts for a decode, kept their reserved blocks counted as taken and went on to
    preempt the decode itself ('preempt requires work in the same plan'); a preempted prompt now gives its
    reservation back."""
    accounted(scheduler=scheduler, workload="lmsys", rate=50.0, num_requests=40, max_num_batched_tokens=4,
              max_num_seqs=16, num_blocks=40, preemption_mode="swap", swap_space_gb=1.0, max_total_tokens=512,
              seed=3)

"""Budgets below the concurrency: every policy keeps the token budget when more requests run than the budget has
tokens (decodes beyond it wait, as in vLLM's scheduler), and the runs of vLLM's own scheduler refuse the limits
vLLM refuses at start-up, with vLLM's words. Each configuration that stopped a run midway is kept here."""
import warnings
from pathlib import Path

import numpy as np
import pytest

from llmsched.engine.limits import vllm_refusal
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import RunConfig, run
from llmsched.request import Request, Status
from llmsched.schedulers.registry import create_scheduler
from llmsched.sim.simulator import simulate
from llmsched.vllm.launch import EngineConfig

from conftest import AffineStepTime, ListSource
from test_fuzz_conservation import STALLED, builtin_schedulers


def short_prompts(tmp_path: Path, n: int = 200, seed: int = 1) -> str:
    """A length file of prompts of 1-12 tokens (so that a whole prompt fits a budget of a few tokens) and outputs
    of 1-60."""
    rng = np.random.default_rng(seed)
    path = tmp_path / "short.csv"
    rows = [f"{int(p)},{int(o)}" for p, o in zip(rng.integers(1, 13, n), rng.integers(1, 61, n))]
    path.write_text("num_prefill_tokens,num_decode_tokens\n" + "\n".join(rows) + "\n")
    return str(path)


def within_budget(**cfg):
    """Run ``cfg`` under invariant checking: every request finished or rejected with a reason, no step over the
    budget."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run(RunConfig(check_invariants=True, **cfg))
    log = result.requests
    status = [Status(s) for s in log.cols["status"]]
    assert len(status) == cfg["num_requests"]
    for s, rid in zip(status, log.cols["id"]):
        reason = log.reasons.get(rid, "")
        assert s is Status.FINISHED or (s is Status.REJECTED and reason and STALLED not in reason), (s, reason)
    steps = result.steps.columns()
    tokens = np.asarray(steps["prefill_tokens"]) + np.asarray(steps["num_decodes"])
    assert tokens.max() <= cfg["max_num_batched_tokens"]
    return status


def test_wait_with_a_two_token_budget_at_concurrency_four():
    """'scheduler 'wait' on replica 0: max_num_batched_tokens exceeded (3 > 2)': WAIT's fallback decoded every
    running request when a cohort did not fit."""
    status = within_budget(scheduler="wait", oracle=True, workload="lmsys", concurrency=4, num_requests=58,
                           max_num_batched_tokens=2)
    assert Status.FINISHED in status


@pytest.mark.parametrize("name", ["wait", "nested-wait", "fastertransformer", "deferred-prefill"])
@pytest.mark.parametrize("concurrency, budget, seats", [(32, 16, 256), (8, 1, 256), (16, 3, 8)])
def test_decodes_beyond_the_budget_wait(name, concurrency, budget, seats, tmp_path):
    """Concurrency 32 with a 16-token budget (and budgets of 1 and 3 tokens): the policies that decoded every
    running request stopped the run midway ('max_num_batched_tokens exceeded (32 > 16)')."""
    status = within_budget(scheduler=name, oracle=True, lengths=short_prompts(tmp_path), concurrency=concurrency,
                           num_requests=60, max_num_batched_tokens=budget, max_num_seqs=seats)
    if budget >= 12:  # every prompt fits the budget: nothing is turned away
        assert status.count(Status.FINISHED) == 60
    else:  # prompts longer than the budget are rejected at arrival by these whole-prompt policies
        assert Status.FINISHED in status


@pytest.mark.parametrize("name", builtin_schedulers())
def test_every_policy_keeps_a_five_token_budget_under_an_open_loop(name, tmp_path):
    """Each policy at a budget below the requests in flight (an open loop at 50 requests/s of short prompts):
    served within the budget, or (vLLM's own scheduler) refused before the run with vLLM's reason."""
    cfg = dict(scheduler=name, oracle=True, lengths=short_prompts(tmp_path), rate=50.0, arrival="constant",
               num_requests=40, max_num_batched_tokens=5)
    if create_scheduler(name).models_vllm:
        with pytest.raises(ValueError, match="vLLM refuses these limits at start-up"):
            within_budget(**cfg)
        return
    within_budget(**cfg)


def test_vllm_decodes_in_running_order_within_the_budget():
    """vLLM's scheduler (v0's policy) given limits vLLM would refuse (built here without the run's check): a
    decode step holds the first running requests the budget takes, in order; the others wait, and all finish."""
    cfg = ReplicaConfig(num_blocks=400, block_size=16, max_num_seqs=32, max_num_batched_tokens=4, max_model_len=64)
    rep = Replica(0, create_scheduler("vllm"), AffineStepTime(), cfg)
    rep.config.check_invariants = True
    reqs = [Request(id=i, arrival=0.0, prompt_len=2, output_len=5) for i in range(12)]
    result = simulate(ListSource(reqs), [rep])
    assert all(Status(s) is Status.FINISHED for s in result.requests.cols["status"])
    decodes = result.steps.columns()["num_decodes"]
    assert max(decodes) == 4 and 0 < min(d for d in decodes if d) <= 4


@pytest.mark.parametrize("args, reason", [
    (dict(max_num_batched_tokens=100, max_model_len=64), "max_num_batched_tokens (100) must be greater than or equal to max_num_seqs "
                                       "(256)."),
    (dict(max_num_batched_tokens=4096, max_num_seqs=64), "max_num_batched_tokens (4096) is smaller than max_model_len "
                                                         "(8192). This effectively limits"),
])
def test_vllm_refuses_what_vllm_refuses(args, reason):
    with pytest.raises(ValueError, match="scheduler 'vllm' is vLLM's, and vLLM refuses") as e:
        run(RunConfig(scheduler="vllm", num_requests=5, **args))
    assert reason in str(e.value) and "\n" not in str(e.value)


def test_vllm_chunked_refuses_only_the_seat_rule():
    with pytest.raises(ValueError, match=r"max_num_batched_tokens \(100\) must be greater than or equal to "
                                         r"max_num_seqs \(256\)"):
        run(RunConfig(scheduler="vllm-chunked", num_requests=5, max_num_batched_tokens=100))
    run(RunConfig(scheduler="vllm-chunked", num_requests=5, max_num_batched_tokens=4096))  # chunks: no context rule


def test_vllm_default_budget_below_a_long_context_still_runs():
    """vLLM raises its own default budget to the context without chunked prefill; llmsched keeps 8192 and rejects
    longer prompts at arrival with a reason, so a default run of a 32k-context model is not refused."""
    run(RunConfig(scheduler="vllm", model="mistral-7b", num_requests=5))


def test_the_rules_are_vllms():
    # vllm/config/scheduler.py (0.32.0), SchedulerConfig.verify_max_model_len
    assert vllm_refusal(8, 16, 2048, chunked_prefill=True) == ("max_num_batched_tokens (8) must be greater than or "
                                                               "equal to max_num_seqs (16).")
    assert vllm_refusal(1024, 16, 2048, chunked_prefill=True) is None
    assert vllm_refusal(1024, 16, 2048, chunked_prefill=False).startswith("max_num_batched_tokens (1024) is smaller "
                                                                          "than max_model_len (2048).")
    assert vllm_refusal(2048, 16, 2048, chunked_prefill=False) is None


def test_the_engine_config_refuses_before_starting_vllm():
    with pytest.raises(ValueError, match=r"vLLM refuses these limits at start-up: max_num_batched_tokens \(32\)"):
        EngineConfig(model="m", max_num_seqs=64, max_num_batched_tokens=32)

"""no request lost and no stall, each with the configuration that showed it."""
import warnings
from dataclasses import dataclass, field

import pytest

from llmsched.engine.plan import BatchPlan
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.experiment import RunConfig, run
from llmsched.request import Request, Status
from llmsched.schedulers.base import Scheduler
from llmsched.schedulers.registry import create_scheduler
from llmsched.sim.simulator import simulate

from conftest import AffineStepTime, ListSource
from test_fuzz_conservation import STALLED, builtin_schedulers

RECOMPUTE_ONLY = {n for n in builtin_schedulers() if create_scheduler(n).recompute_only}


def quiet_run(**cfg):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # WAIT's (11)/(12) checks warn on small caches
        return run(RunConfig(**cfg))


def outcomes(result):
    """(status, reason) of every request that left the run."""
    log = result.requests
    return [(Status(s), log.reasons.get(i, "")) for s, i in zip(log.cols["status"], log.cols["id"])]


def assert_conserved(result, n):
    out = outcomes(result)
    assert len(out) == n, f"{len(out)} of {n} requests left the run"
    for status, reason in out:
        assert status in (Status.FINISHED, Status.REJECTED)
        assert status is Status.FINISHED or reason, "rejected without a reason"
        assert STALLED not in reason, reason


# --- defect 1: a policy's rejections leave at once, so a closed loop refills ------------------------------------
def test_closed_loop_keeps_every_request_when_the_policy_rejects():
    # fcfs: a policy that never chunks (vllm itself refuses a 512-token budget below its context, as vLLM does)
    result = quiet_run(scheduler="fcfs", concurrency=4, num_requests=40, max_num_batched_tokens=512, rate=None)
    assert_conserved(result, 40)
    out = outcomes(result)
    assert sum(s is Status.FINISHED for s, _ in out) >= 5
    assert all("max_num_batched_tokens 512" in r for s, r in out if s is Status.REJECTED)


def test_closed_loop_command_writes_all_forty_rows(tmp_path, capsys):
    from llmsched.cli import main
    out = tmp_path / "run"
    assert main(["simulate", "--scheduler", "fcfs", "--concurrency", "4", "--num-requests", "40",
                 "--max-num-batched-tokens", "512", "--out", str(out), "--no-progress"]) == 0
    rows = (out / "requests.csv").read_text().splitlines()
    assert len(rows) == 41  # header + every request, none left neither finished nor rejected


@dataclass
class RejectsAll(Scheduler):
    """Rejects every waiting request from its plan (not at arrival): only plan.reject can end them."""

    name = "test-rejects-in-plan"

    def schedule(self, view):
        return BatchPlan(reject=[(r, "refused by the test policy") for r in view.waiting])


class Loop:
    """A closed loop of one user: the next request is issued only when the previous one has left."""

    def __init__(self, n):
        self.n, self.issued = n, 0

    def initial(self):
        self.issued = 1
        return [Request(0, 0.0, 10, 5)]

    def on_done(self, req, now):
        if self.issued >= self.n:
            return []
        self.issued += 1
        return [Request(self.issued - 1, now, 10, 5)]


def test_plan_rejections_run_completion_callbacks_immediately():
    rep = Replica(0, RejectsAll(), AffineStepTime(), ReplicaConfig(num_blocks=100))
    result = simulate(Loop(7), [rep])
    assert len(result.requests) == 7
    assert set(result.requests.reasons.values()) == {"test-rejects-in-plan: refused by the test policy"}


# --- defect 2: FairBatching's low-memory branch never returns a plan that only preempts -----------------------
@pytest.mark.parametrize("name, seed", [("fairbatching", 0), ("fairbatching", 1), ("fairbatching-fb", 0),
                                        ("fairbatching-fb", 1), ("fairbatching-tb", 0)])
def test_fairbatching_on_a_small_kv_cache(name, seed):
    # 80 blocks of 16 tokens hold one or two requests: before the fix the fairbatching and fairbatching-fb runs
    # ended in "preempt requires work in the same plan"
    result = quiet_run(scheduler=name, concurrency=4, num_requests=30, max_total_tokens=1024, seed=seed,
                       num_blocks=80, rate=None)
    assert_conserved(result, 30)
    assert all(s is Status.FINISHED for s, _ in outcomes(result))


@pytest.mark.parametrize("mode", ["recompute", "swap"])
def test_fairbatching_preempts_when_prompts_in_progress_hold_the_whole_cache(mode):
    # 64 blocks of 32 tokens and 2047-token prompts: two half-prefilled prompts each wait for blocks the other
    # holds unless the policy preempts one (found by the fuzz, seed 4)
    result = quiet_run(scheduler="fairbatching", model="qwen3-14b", gpu="h200", workload="azure-conv", rate=1.439073857210809,
                       num_requests=31, max_total_tokens=2048, block_size=32, max_num_seqs=4,
                       max_num_batched_tokens=512, max_model_len=4096, num_blocks=64, preemption_mode=mode,
                       seed=670988334)
    assert_conserved(result, 31)


# --- defect 3: a request its policy can never schedule is rejected at arrival ----------------------------------
@pytest.mark.parametrize("name", ["fcfs", "wait", "nested-wait", "orca", "fastertransformer"])
def test_prompt_over_the_budget_is_rejected_at_arrival_by_whole_prompt_schedulers(name):
    # vllm is left out: vLLM refuses a budget below the context without chunked prefill (tests/test_budgets.py)
    result = quiet_run(scheduler=name, workload="arxiv-summarization", rate=1.0, num_requests=30,
                       max_num_batched_tokens=2048, oracle=True, latency_boundary="engine")  # arrival: the engine's
    assert_conserved(result, 30)
    log = result.requests
    for i, status in enumerate(log.cols["status"]):
        too_long = log.cols["prompt_len"][i] > 2048
        assert (Status(status) is Status.REJECTED) == too_long
        if too_long:
            reason = log.reasons[log.cols["id"][i]]
            assert reason.startswith(f"{name}: ") and "does not chunk prompts" in reason
            assert log.cols["finish"][i] == log.cols["arrival"][i]  # at arrival, not after waiting


@pytest.mark.parametrize("name", builtin_schedulers())
def test_every_scheduler_serves_or_rejects_long_prompts_without_stalling(name):
    # vLLM's own scheduler without chunked prefill runs only with a context within the budget, as vLLM
    limits = {"max_model_len": 2048} if name == "vllm" else {}
    result = quiet_run(scheduler=name, workload="arxiv-summarization", rate=1.0, num_requests=12,
                       max_num_batched_tokens=2048, oracle=True, **limits)
    assert_conserved(result, 12)


@dataclass
class Scripted(Scheduler):
    name = "test-scripted-whole"
    chunks_prompts = False
    plans: list = field(default_factory=list)

    def schedule(self, view):
        return self.plans.pop(0)(view) if self.plans else BatchPlan()


def test_recompute_preemption_past_the_prefill_limit_rejects_with_the_reason():
    a, b = Request(0, 0.0, 10, 50), Request(1, 0.0, 500, 50)
    policy = Scripted([lambda v: BatchPlan(prefills=[(a, 10), (b, 500)])]
                      + [lambda v: BatchPlan(decodes=[a, b])] * 20
                      + [lambda v: BatchPlan(decodes=[a], preempt=[b])])
    rep = Replica(0, policy, AffineStepTime(),
                  ReplicaConfig(num_blocks=100, max_num_batched_tokens=512, check_invariants=True))
    assert rep.add(a, 0.0) and rep.add(b, 0.0)
    t = 0.0
    for _ in range(22):
        d = rep.start_step(t)
        t += d
        rep.end_step(t)
    assert b.status is Status.REJECTED and b in rep.completed and b not in rep.waiting
    assert "preempted by recompute" in b.reject_reason and "521-token prefill" in b.reject_reason
    assert rep.kv.free + a.num_blocks == rep.kv.total


def test_wait_rejects_a_request_its_kv_rule_never_admits_instead_of_stalling():
    # 8 blocks of 32 tokens: the replica accepts 19 + 227 tokens, WAIT's KV profile (with block rounding) never does
    reqs = [Request(0, 0.0, 19, 227), Request(1, 0.0, 20, 30)]
    rep = Replica(0, create_scheduler("wait", lengths="lmsys", max_wait=0.1), AffineStepTime(),
                  ReplicaConfig(num_blocks=8, block_size=32, oracle=True, check_invariants=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        simulate(ListSource(reqs), [rep])
    assert reqs[1].status is Status.FINISHED
    assert reqs[0].status is Status.REJECTED and "even alone on an idle replica" in reqs[0].reject_reason


# --- defect 4: swap-in is the mechanism's, so no policy strands a swapped request -----------------------------
@pytest.mark.parametrize("name", [n for n in builtin_schedulers() if n not in RECOMPUTE_ONLY])
def test_every_scheduler_with_swap_preemption_on_a_small_cache(name):
    result = quiet_run(scheduler=name, rate=20.0, num_requests=40, max_total_tokens=1024, num_blocks=128,
                       preemption_mode="swap", oracle=True, seed=3)
    assert_conserved(result, 40)


def test_swap_mode_preempts_and_every_swapped_request_comes_back():
    swapped = {}
    for name in ("fcfs", "sarathi", "slai", "rad", "vllm-chunked", "wait"):
        result = quiet_run(scheduler=name, rate=20.0, num_requests=40, max_total_tokens=1024, num_blocks=128,
                           preemption_mode="swap", oracle=True, seed=3)
        assert_conserved(result, 40)
        swapped[name] = int(sum(result.requests.cols["preemptions"]))
    assert sum(swapped.values()) > 0, swapped


def test_policy_that_ignores_swapped_requests_still_gets_them_back():
    a, b = Request(0, 0.0, 30, 10), Request(1, 0.0, 30, 10)

    def decode_running(view):  # a policy that never looks at view.swapped
        return BatchPlan(decodes=[r for r in view.running if r.is_decode])

    policy = Scripted([lambda v: BatchPlan(prefills=[(a, 30), (b, 30)]),
                       lambda v: BatchPlan(decodes=[a], preempt=[b])] + [decode_running] * 30)
    rep = Replica(0, policy, AffineStepTime(),
                  ReplicaConfig(num_blocks=100, preemption_mode="swap", swap_blocks=10, swap_seconds_per_block=0.5,
                                check_invariants=True))
    result = simulate(ListSource([a, b]), [rep])
    assert a.status is Status.FINISHED and b.status is Status.FINISHED and b.preemptions == 1
    assert rep.kv.swap_free == rep.kv.swap_total and not rep.swapped
    assert result.steps.columns()["duration"][2] >= 1.0  # the step after the swap-in carries its two blocks


def test_recompute_only_scheduler_refuses_swap_mode_when_built():
    assert "infermax" in RECOMPUTE_ONLY
    with pytest.raises(ValueError, match="recomputation only"):
        quiet_run(scheduler="infermax", preemption_mode="swap", num_requests=5)


# --- determinism per seed ----------------------------------------------------------------------------------------
def test_same_config_same_seed_gives_identical_records():
    cfg = dict(scheduler="sarathi", replicas=2, router="random", rate=15.0, num_requests=40, num_blocks=200,
               preemption_mode="swap", tiers="paid:tbt=0.1:share=0.3,free:tbt=0.5", seed=11)
    a, b = quiet_run(**cfg), quiet_run(**cfg)
    for key in a.requests.cols:
        assert a.requests.cols[key].tobytes() == b.requests.cols[key].tobytes(), key
    assert a.steps.columns()["duration"].tobytes() == b.steps.columns()["duration"].tobytes()
    c = quiet_run(**{**cfg, "seed": 12})
    assert c.requests.cols["arrival"].tobytes() != a.requests.cols["arrival"].tobytes()

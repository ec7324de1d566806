"""A policy's own token budget above the replica's max_num_batched_tokens is lowered to it before the run: recorded
in meta.json, warned about when the user set it, never a silent min; with every default nothing is lowered."""
import json
import subprocess
import sys
import warnings

import pytest

from llmsched.experiment import RunConfig, build_replicas, run
from llmsched.schedulers.registry import create_scheduler, scheduler_info, scheduler_names

SMALL = dict(num_requests=40, rate=4.0, num_blocks=800)


@pytest.mark.parametrize("name", [n for n in scheduler_names() if create_scheduler(n).token_budgets])
def test_default_runs_lower_nothing(name):
    cfg = RunConfig(scheduler=name, oracle=scheduler_info(name)["needs_oracle"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        policy = build_replicas(cfg)[0].scheduler
    assert "token_budgets" not in policy.describe()
    for budget in policy.token_budgets:
        assert getattr(policy, budget) == scheduler_info(name)["params"][budget]


def test_a_default_budget_above_the_cap_is_lowered_and_recorded_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        result = run(RunConfig(scheduler="vllm-chunked", max_num_batched_tokens=1000, **SMALL))
    described = result.meta["scheduler"]
    assert described["params"]["token_budget"] == 1000
    assert described["token_budgets"] == {"token_budget": {"given": 2048, "used": 1000}}


def test_a_budget_set_above_the_cap_is_warned_about_and_runs_as_the_cap(tmp_path):
    cfg = RunConfig(scheduler="sarathi", scheduler_params={"token_budget": 900}, max_num_batched_tokens=300,
                    **SMALL)
    with pytest.warns(UserWarning, match="'sarathi': token_budget 900 above max_num_batched_tokens 300"):
        lowered = run(cfg)
    same = run(RunConfig(**{**cfg.__dict__, "scheduler_params": {"token_budget": 300}}))
    assert lowered.meta["scheduler"]["token_budgets"] == {"token_budget": {"given": 900, "used": 300}}
    assert list(lowered.requests.cols["finish"]) == list(same.requests.cols["finish"])  # what the min ran
    assert "token_budgets" not in same.meta["scheduler"]
    # on the command line: one line on stderr, and meta.json says what ran
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "llmsched", "simulate", "--scheduler", "sarathi", "--param",
                           "token_budget=900", "--max-num-batched-tokens", "300", "--num-requests", "20", "--out",
                           str(out), "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "llmsched simulate: warning: scheduler 'sarathi': token_budget 900 above max_num_batched_tokens 300: each "
        "step uses at most 300 (lower the parameter or raise --max-num-batched-tokens)"]
    assert json.loads((out / "meta.json").read_text())["scheduler"]["token_budgets"]["token_budget"]["used"] == 300


def test_a_budget_left_to_the_cap_stays_none():
    policy = create_scheduler("infermax")
    assert policy.fit_token_budgets(64) == {} and policy.batch_tokens is None
    policy = create_scheduler("infermax", batch_tokens=128)
    assert policy.fit_token_budgets(64) == {"batch_tokens": {"given": 128, "used": 64}}
    assert policy.batch_tokens == 64

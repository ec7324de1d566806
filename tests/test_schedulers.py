"""Each baseline's defining behaviour, checked on real simulated runs."""
import numpy as np
import pytest

from llmsched.request import Status
from llmsched.schedulers import create_scheduler, scheduler_info, scheduler_names
from llmsched.schedulers.registry import _lookup

from conftest import make_requests, run_sim

BASELINES = ["vllm", "vllm-chunked", "sarathi", "sarathi-spf", "orca", "fastertransformer"]


def watch(name, check, **params):
    """Wrap a registered scheduler so ``check(view, plan)`` runs on every plan it returns."""
    cls = _lookup(name)[0]

    class Watched(cls):
        def schedule(self, view):
            running_before = list(view.running)
            waiting_before = list(view.waiting)
            plan = super().schedule(view)
            check(view, plan, running_before, waiting_before)
            return plan

    Watched.name = name
    return Watched


def is_decode(r):
    return r.num_generated > 0 and r.num_computed + 1 == r.prompt_len + r.num_generated


@pytest.mark.parametrize("name", BASELINES)
def test_every_request_finishes_and_kv_is_returned(name):
    reqs = make_requests(200, rate=6.0)
    result, reps = run_sim(name, reqs, max_num_seqs=64)
    assert all(r.status is Status.FINISHED for r in reqs)
    assert all(r.num_generated == r.output_len for r in reqs)
    assert reps[0].kv.free == reps[0].kv.total
    assert len(result.requests) == len(reqs)


@pytest.mark.parametrize("name", BASELINES)
def test_every_baseline_cites_its_source(name):
    info = scheduler_info(name)
    assert info["source"] and info["summary"]


def test_vllm_never_mixes_prefill_and_decode():
    result, _ = run_sim("vllm", make_requests(300, rate=10.0))
    s = result.steps
    mixed = (np.frombuffer(s.num_prefills, np.int64) > 0) & (np.frombuffer(s.num_decodes, np.int64) > 0)
    assert not mixed.any()
    assert (np.frombuffer(s.num_prefills, np.int64) > 0).sum() > 10


def test_sarathi_keeps_budget_and_every_running_decode(monkeypatch):
    seen = {"steps": 0}

    def check(view, plan, running, waiting):
        seen["steps"] += 1
        tokens = plan.num_tokens
        assert tokens <= max(256, len(plan.decodes))
        preempted = {r.id for r in plan.preempt}
        must = {r.id for r in running if is_decode(r) and r.id not in preempted}
        assert must <= {r.id for r in plan.decodes}

    cls = watch("sarathi", check)
    import llmsched.schedulers.registry as reg
    monkeypatch.setitem(reg._REGISTRY, "sarathi-watched", (cls, {"token_budget": 256}, "watched"))
    reqs = make_requests(300, rate=10.0)
    result, reps = run_sim("sarathi-watched", reqs, num_blocks=600, max_num_seqs=64)
    assert seen["steps"] > 100
    assert reps[0].num_preemptions > 0  # the check ran under memory pressure too
    assert all(r.status is Status.FINISHED for r in reqs)


def test_fastertransformer_admits_nothing_until_its_batch_drains(monkeypatch):
    cohorts = []
    state = {"decoding": False}

    def check(view, plan, running, waiting):
        admitted = [r for r, _ in plan.prefills if r.status is Status.WAITING]
        if not running:
            state["decoding"] = False
            cohorts.append(0)
        if admitted:
            assert not state["decoding"], "admitted while a cohort was decoding"
            cohorts[-1] += len(admitted)
        if plan.decodes:
            assert not plan.prefills, "static batching decodes its cohort alone"
            state["decoding"] = True

    cls = watch("fastertransformer", check)
    import llmsched.schedulers.registry as reg
    monkeypatch.setitem(reg._REGISTRY, "ft-watched", (cls, {"batch_size": 8}, "watched"))
    reqs = make_requests(120, rate=20.0)
    run_sim("ft-watched", reqs, max_model_len=2048, max_num_batched_tokens=4096)
    sizes = [c for c in cohorts if c]
    assert max(sizes) == 8 and sum(sizes) == 120


@pytest.mark.parametrize("name", ["vllm", "vllm-chunked", "sarathi"])
def test_preemption_when_blocks_run_out_and_preempted_requests_complete(name):
    reqs = make_requests(150, rate=20.0, prompt=(200, 800), output=(100, 400))
    result, reps = run_sim(name, reqs, num_blocks=300, max_num_seqs=64)
    preempted = [r for r in reqs if r.preemptions]
    assert reps[0].num_preemptions > 0 and preempted
    assert all(r.status is Status.FINISHED and r.num_generated == r.output_len for r in preempted)


def test_spf_admits_shorter_prompts_first():
    reqs = make_requests(200, rate=30.0)
    run_sim("sarathi-spf", reqs, max_num_seqs=16)
    spf_order = sorted(reqs, key=lambda r: r.first_scheduled)
    fcfs = make_requests(200, rate=30.0)
    run_sim("sarathi", fcfs, max_num_seqs=16)
    mean_first_prompts = lambda rs: np.mean([r.prompt_len for r in sorted(rs, key=lambda r: r.first_scheduled)[:60]])
    assert mean_first_prompts(reqs) < 0.8 * mean_first_prompts(fcfs)
    assert spf_order


def test_unknown_scheduler_and_parameter_are_clear_errors():
    with pytest.raises(ValueError, match="unknown scheduler 'nope'.*sarathi"):
        create_scheduler("nope")
    with pytest.raises(ValueError, match="has no parameter.*token_budget"):
        create_scheduler("sarathi", budget=3)
    with pytest.raises(ValueError, match="order must be"):
        create_scheduler("sarathi", order="lifo")


def test_registry_table_names_exactly_the_modules_that_register():
    """BUILTIN_MODULES is the one list of built-in scheduler modules: every module under schedulers/ that registers
    a scheduler is in it, and nothing else is (a helper module beside the policies is never imported for it)."""
    import ast
    from pathlib import Path

    import llmsched.schedulers as package
    from llmsched.schedulers.registry import BUILTIN_MODULES
    root = Path(package.__file__).parent
    registering = set()
    for path in root.rglob("*.py"):
        nodes = list(ast.walk(ast.parse(path.read_text())))
        calls = {n.func.id for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        decorators = {d.id for n in nodes if isinstance(n, ast.ClassDef)
                      for d in n.decorator_list if isinstance(d, ast.Name)}
        if "register_variant" in calls or "register" in decorators:
            registering.add(".".join(["llmsched.schedulers", *path.relative_to(root).with_suffix("").parts]))
    assert registering == set(BUILTIN_MODULES)


def test_registry_lists_baselines_with_defaults():
    assert set(BASELINES) <= set(scheduler_names())
    assert scheduler_info("sarathi")["params"]["token_budget"] == 512
    assert scheduler_info("sarathi-spf")["params"]["order"] == "spf"
    assert create_scheduler("sarathi-spf").name == "sarathi-spf"


@pytest.mark.parametrize("name", ["vllm", "orca", "fastertransformer"])
def test_whole_prompt_schedulers_reject_prompts_over_the_token_budget(name):
    reqs = make_requests(50, rate=5.0, prompt=(10, 600))
    reqs[10].prompt_len = 1500  # can never run whole under a 1024-token budget
    run_sim(name, reqs, max_num_batched_tokens=1024)
    assert reqs[10].status is Status.REJECTED and "does not chunk prompts" in reqs[10].reject_reason
    assert all(r.status is Status.FINISHED for r in reqs if r is not reqs[10])

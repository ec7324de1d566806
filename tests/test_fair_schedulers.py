"""vtc and wfq: without tenants they serve first come, first served; with tenants they share the service fairly, lift a tenant
that comes back from idling, and serve weights in proportion."""
import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_replicas, build_source, run, simulate_config
from llmsched.metrics.summary import summarize
from llmsched.request import Request, Status, Tenant
from llmsched.schedulers.registry import create_scheduler

FAIR = ("vtc", "wfq")


@pytest.mark.parametrize("name", FAIR)
@pytest.mark.parametrize("setting", [dict(num_blocks=600), dict(num_blocks=600, preemption_mode="swap",
                                                                 swap_space_gb=0.05)])
def test_without_tenants_they_admit_first_come_first_served(name, setting):
    result = run(RunConfig(scheduler=name, rate=3, num_requests=200, check_invariants=True, latency_boundary="engine",
                           **setting))  # first come at the engine: its arrivals
    log = result.requests
    order = np.argsort(log.column("id"))
    first = log.column("first_scheduled")[order]
    assert (log.column("status") == int(Status.FINISHED)).all()
    assert (np.diff(first) >= 0).all()  # each request admitted no later than the one after it


def fairness(scheduler: str, tenants: str, n: int = 500) -> dict:
    return summarize(run(RunConfig(scheduler=scheduler, tenants=tenants, num_requests=n, seed=1)))


@pytest.mark.parametrize("name", FAIR)
def test_two_backlogged_tenants_get_equal_service(name):
    fcfs = fairness("vllm-chunked", "heavy:rate=8,med:rate=2")
    fair = fairness(name, "heavy:rate=8,med:rate=2")
    assert fcfs["fairness"]["jain_while_all_backlogged"] < 0.8  # FCFS serves them 4:1, as they ask
    assert fair["fairness"]["jain_while_all_backlogged"] >= 0.95
    assert fair["tenants"]["med"]["latency"]["ttft"]["p50"] < fcfs["tenants"]["med"]["latency"]["ttft"]["p50"] / 5


@pytest.mark.parametrize("name", FAIR)
def test_weights_share_the_service_in_proportion(name):
    s = fairness(name, "a:rate=6,b:rate=6:weight=3")
    during = s["fairness"]["service_while_all_backlogged"]
    assert 2.4 < during["b"] / during["a"] < 3.6
    assert s["fairness"]["jain_while_all_backlogged"] >= 0.95  # over service divided by weight


def waiting(i, tenant, t=0.0):
    return Request(i, t, 100, 10, tenant=tenant)


def test_vtc_lifts_a_tenant_back_from_idling_to_the_least_served_backlogged_one():
    vtc = create_scheduler("vtc")
    a, b, c = Tenant("a"), Tenant("b"), Tenant("c")
    vtc.counters.update({"a": 500.0, "b": 20.0, "c": 900.0})
    vtc.on_arrival(waiting(0, a), None)  # nobody else backlogged, nobody left yet: keeps its counter
    assert vtc.counters["a"] == 500.0
    vtc.on_arrival(waiting(1, b), None)  # a is backlogged: b's 20 of credit is not banked
    assert vtc.counters["b"] == 500.0
    vtc.on_arrival(waiting(2, c), None)  # c owes more than the floor: it keeps its deficit
    assert vtc.counters["c"] == 900.0
    vtc.queues.pop("a")
    vtc.queues.pop("b")
    vtc.queues.pop("c")  # c left last
    vtc.counters["d"] = 3.0
    vtc.on_arrival(waiting(3, Tenant("d")), None)  # the queue is empty: lifted to the one that left last
    assert vtc.counters["d"] == 900.0


@pytest.mark.parametrize("name, first", [("vtc", "long"), ("wfq", "short")])
def test_wfq_weighs_the_next_prompt_in_and_vtc_does_not(name, first):
    """Two tenants equally served, one seat: vtc takes the first backlogged tenant whatever its prompt, wfq the
    request that finishes first in virtual time."""
    rep = build_replicas(RunConfig(scheduler=name, max_num_seqs=1))[0]
    rep.add(Request(0, 0.0, 1500, 10, tenant=Tenant("long")), 0.0)
    rep.add(Request(1, 0.0, 120, 10, tenant=Tenant("short")), 0.0)
    rep.start_step(0.0)
    assert [r.tenant.name for r in rep.running] == [first]


def light_run(name: str, mode: str, tenants: str = "heavy:rate=8,light:rate=0.5", **extra):
    """A heavy tenant over capacity and a light one on Llama-3-8B/A100, every plan recorded with whether it was a
    light step."""
    cfg = RunConfig(scheduler=name, tenants=tenants, duration=40, seed=0, model="llama-3-8b", gpu="a100",
                    scheduler_params={"light_first": mode, **extra}, check_invariants=True, latency_boundary="engine")
    replicas = build_replicas(cfg)
    policy = replicas[0].scheduler
    plans = []
    inner = policy.schedule

    def schedule(view):
        plan = inner(view)
        plans.append((plan, policy.light_step, [r for r in view.running if r.num_generated
                                                 and r.num_computed + 1 == r.prompt_len + r.num_generated]))
        return plan

    policy.schedule = schedule
    return simulate_config(cfg, build_source(cfg), replicas), plans


@pytest.mark.parametrize("name", FAIR)
def test_light_first_off_and_without_tenants_decides_as_before(name):
    """light_first acts only between tenants: without tenants every mode makes the same run."""
    runs = [run(RunConfig(scheduler=name, rate=4, num_requests=150, num_blocks=900, seed=2,
                          scheduler_params={"light_first": mode})) for mode in ("off", "step")]
    a, b = (r.requests for r in runs)
    for col in ("first_scheduled", "first_token", "finish"):
        assert np.array_equal(a.column(col), b.column(col))


@pytest.mark.parametrize("name", FAIR)
def test_light_first_step_gives_the_light_tenant_its_own_steps(name):
    off, _ = light_run(name, "off")
    on, plans = light_run(name, "step")
    light = [i for i, (_, is_light, _) in enumerate(plans) if is_light]
    assert len(light) >= 10
    for i in light:
        plan, _, decoding = plans[i]
        assert plan.prefills and all(r.tenant.name == "light" for r, _ in plan.prefills)
        assert all(r.tenant.name == "light" for r in plan.decodes)  # the heavy decodes wait ...
        assert not plans[i + 1][1]  # ... one step only: the next plan is an ordinary one
        waited = [r for r in decoding if r.tenant.name == "heavy" and r not in plan.preempt]
        nxt = plans[i + 1][0]
        assert all(r in nxt.decodes or r in nxt.preempt for r in waited)
    ttft = [summarize(x)["tenants"]["light"]["latency"]["ttft"]["p50"] for x in (off, on)]
    assert ttft[1] < 0.7 * ttft[0]


def test_light_first_rejects_a_mode_it_does_not_know():
    with pytest.raises(ValueError, match="light_first must be one of off, prompts, step"):
        create_scheduler("vtc", light_first="always")

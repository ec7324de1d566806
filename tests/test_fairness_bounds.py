"""The fairness bounds of vtc and wfq (their docstrings), checked at every decision over random workloads.

Each run wraps the policy's ``schedule``: after every decision the test recomputes, from the plan and the requests'
true lengths (which the policy never reads), what the bound's proof says, and checks it: the counters (vtc) or
tags (wfq) of backlogged tenants against the bound, that a counter moves only by the service the plans charge,
and the service difference of two tenants over every interval both stay backlogged.
"""
import os
import random

import pytest

from llmsched.experiment import RunConfig, build_replicas, build_source
from llmsched.request import Status
from llmsched.routing.registry import make_router
from llmsched.sim.simulator import simulate
from llmsched.workload.tenants.streams import parse_tenants

EPS = 1e-6
SEEDS = range(int(os.environ.get("LLMSCHED_FUZZ_FIRST", "0")),
              int(os.environ.get("LLMSCHED_FUZZ_FIRST", "0")) + int(os.environ.get("LLMSCHED_FAIR_COUNT", "8")))
RUNNING, SWAPPED = Status.RUNNING, Status.SWAPPED


def random_config(seed: int, scheduler: str) -> RunConfig:
    rnd = random.Random(seed)
    tenants = ",".join(f"t{i}:rate={rnd.choice([0.5, 1, 2, 4, 6])}:weight={rnd.choice([0.5, 1, 1, 2, 3])}"
                       f"{':workload=azure-code' if rnd.random() < 0.3 else ''}" for i in range(rnd.randint(2, 4)))
    mode = rnd.choice(["recompute", "recompute", "swap"])
    return RunConfig(scheduler=scheduler, tenants=tenants, num_requests=rnd.choice([150, 250]),
                     num_blocks=rnd.choice([400, 900, 3000, None]), preemption_mode=mode,
                     swap_space_gb=rnd.choice([0.02, 1.0]), max_num_seqs=rnd.choice([16, 64, 256]),
                     scheduler_params={"token_budget": rnd.choice([256, 1024, 2048, 4096]),
                                       "light_first": rnd.choice(["off", "prompts", "step"]),
                                       "lead": rnd.choice([0.0, 2048.0, 8192.0]),
                                       "light_budget": rnd.choice([512, 8192])}, seed=seed,
                     check_invariants=True)


def owed(r, weights) -> float:
    """Weighted work ``r`` can still be charged from its state now, if never preempted (true output length): a
    recompute's last token may run as a decode (one token left of prompt plus output: the replica's definition)."""
    wi, wo = weights
    g = r.num_generated
    if g and r.num_computed + 1 == r.prompt_len + g:
        return wo * (r.output_len - g)
    prefill = r.prompt_len + g - r.num_computed
    last = max(wi, wo) if g else wi
    return wi * (prefill - 1) + last + wo * (r.output_len - g - 1)


def charges(plan, weights) -> dict:
    """What ``plan`` charges each request, as the policies count service."""
    wi, wo = weights
    out = {r: wo for r in plan.decodes}
    for r, n in plan.prefills:
        decode = r.num_generated and r.num_computed + 1 == r.prompt_len + r.num_generated
        out[r] = wo if decode else wi * n
    return out


class Watch:
    """Everything the bound needs, recorded decision by decision."""

    def __init__(self, policy, clock, head_term: bool = False):
        self.policy = policy
        self.head_term = head_term  # wfq: a tenant is admitted up to the largest head's L / w above the floor
        self.largest_admission = 0.0  # the most one admission charged (unweighted)
        self.head = 0.0  # wfq: A / w_min, A = input_weight * min(B, the longest prefill of the workload)
        self.step_term = 0.0  # one plan's charges to a tenant, taken back when the plan preempts its requests
        self.lead = 0.0  # light_first: how far above the others' smallest counter a light tenant may be admitted
        self.min_weight = min(s.tenant.weight for s in parse_tenants(policy_tenants(policy)))
        self.weights = (policy.input_weight, policy.output_weight)
        self.clock = clock  # the tenant's virtual clock: vtc's counter, wfq's finish tag of its last admission
        self.bound = {}  # tenant -> U_h at its last admission
        self.u = 0.0  # the largest U_h seen
        self.served = {}  # tenant -> service charged so far (unweighted)
        self.floor = -float("inf")  # the smallest clock among backlogged tenants, last decision
        self.prev = None  # (clocks, served, backlogged) after the last decision
        self.worst = {}  # (f, g) -> (lowest, highest) of the weighted service difference in the current interval
        self.decisions = 0
        self.checked_pairs = 0

    def after(self, view, plan):
        weights = self.weights
        billed = charges(plan, weights)
        admitted = {r for r, _ in plan.prefills if r.status is Status.WAITING}
        for r, cost in billed.items():
            key = r.tenant.name
            self.served[key] = self.served.get(key, 0.0) + cost
        last = {r.tenant.name: r for r, _ in plan.prefills if r in admitted}  # each tenant's last admission
        for key, r in last.items():  # U_h at it: its chunk plus what h's admitted requests still owe after it
            mine = [x for x in view.running if x.tenant.name == key and x not in plan.preempt]
            mine += [x for x in view.swapped if x.tenant.name == key]
            mine += [x for x in admitted if x.tenant.name == key]
            rest = sum(owed(x, weights) - billed.get(x, 0.0) for x in mine)
            self.largest_admission = max(self.largest_admission, billed[r])
            self.bound[key] = (billed[r] + rest) / r.tenant.weight
            self.u = max(self.u, self.bound[key])
        waiting = [r for r in view.waiting if r not in admitted]
        backlogged = {r.tenant.name: r.tenant.weight for r in waiting}
        clocks = {k: self.clock(self.policy, k) for k in self.policy.known_tenants()}
        if backlogged:
            m = min(clocks[k] for k in backlogged)
            assert m >= self.floor - EPS, f"the smallest backlogged clock fell from {self.floor} to {m}"
            self.floor = m
            head = self.head + self.step_term + self.lead
            for k in backlogged:
                assert clocks[k] - m <= self.bound.get(k, 0.0) + head + EPS, (
                    f"decision {self.decisions}: tenant {k} is {clocks[k] - m} above the floor, bound "
                    f"{self.bound.get(k, 0.0)} + {head}")
        if self.prev is not None:
            pclocks, pserved, pback = self.prev
            still = [k for k in backlogged if k in pback]
            for k in still:  # a tenant backlogged since the last decision moves by its charged service only
                moved = clocks[k] - pclocks[k]
                paid = (self.served.get(k, 0.0) - pserved.get(k, 0.0)) / backlogged[k]
                self.check_move(k, moved, paid)
            for f in still:
                for g in still:
                    if f < g:
                        d = (self.served.get(f, 0.0) / backlogged[f]) - (self.served.get(g, 0.0) / backlogged[g])
                        lo, hi = self.worst.get((f, g), (d, d))
                        lo, hi = min(lo, d), max(hi, d)
                        self.worst[(f, g)] = (lo, hi)
                        u = self.u + self.head + self.step_term + self.lead
                        assert hi - lo <= 2 * u + EPS, (
                            f"tenants {f} and {g}: weighted service difference moved {hi - lo} while both stayed "
                            f"backlogged, bound 2U = {2 * u}")
                        self.checked_pairs += 1
            for pair in list(self.worst):
                if not (pair[0] in still and pair[1] in still):
                    del self.worst[pair]  # the interval ended
            for f in still:
                for g in still:
                    if f < g and (f, g) not in self.worst:
                        d = (self.served.get(f, 0.0) / backlogged[f]) - (self.served.get(g, 0.0) / backlogged[g])
                        self.worst[(f, g)] = (d, d)
        self.prev = (clocks, dict(self.served), set(backlogged))
        self.decisions += 1

    def check_move(self, key, moved, paid):
        assert abs(moved - paid) <= EPS * max(1.0, abs(paid)), (
            f"tenant {key}: counter moved {moved} while backlogged, its plans charged {paid}")


def run_watched(cfg: RunConfig, clock=None):
    source = build_source(cfg)
    replicas = build_replicas(cfg)
    policy = replicas[0].scheduler
    policy.run_tenants = cfg.tenants
    watch = Watch(policy, clock or vtc_clock, head_term=cfg.scheduler == "wfq")
    budget = policy.token_budget
    if policy.light_first != "off":  # a light step's budget, and a light tenant admitted up to lead above the floor
        budget = max(budget, policy.light_budget)
        watch.lead = policy.lead
    budget = min(budget, replicas[0].config.max_num_batched_tokens)
    watch.step_term = max(policy.input_weight, policy.output_weight) * budget / watch.min_weight
    if watch.head_term:
        longest = max(r.prompt_len + r.output_len - 1 for r in build_source(cfg).initial())
        watch.head = policy.input_weight * min(budget, longest) / watch.min_weight
    inner = policy.schedule

    def schedule(view):
        plan = inner(view)
        watch.after(view, plan)
        return plan

    policy.schedule = schedule
    result = simulate(source, replicas, make_router(cfg.router), seed=cfg.seed)
    return watch, result


def vtc_clock(policy, key):
    return policy.counters.get(key, 0.0)


def policy_tenants(policy):
    return policy.run_tenants


@pytest.mark.parametrize("name", ["vtc", "wfq"])
@pytest.mark.parametrize("seed", SEEDS)
def test_bound_holds_at_every_decision(seed, name):
    cfg = random_config(seed, name)
    watch, result = run_watched(cfg)
    assert watch.decisions > 50
    assert len(result.requests) == cfg.num_requests


@pytest.mark.parametrize("name", ["vtc", "wfq"])
def test_bound_holds_while_two_overloading_tenants_compete(name):
    cfg = RunConfig(scheduler=name, tenants="a:rate=6,b:rate=3:weight=2", num_requests=300, num_blocks=2000, seed=5)
    watch, _ = run_watched(cfg)
    assert watch.checked_pairs > 200  # both backlogged for most of the run

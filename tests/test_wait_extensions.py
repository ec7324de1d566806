"""Ao et al. §7 options (time-varying rates, segment design), the authors'-code entry gate, and the §6 settings."""
import math

import pytest

from llmsched.batchtime.linear import LinearBatchTime
from llmsched.engine.plan import BatchPlan
from llmsched.engine.replica import Replica, ReplicaConfig
from llmsched.reproduce.wait_runs.experiments import memory_cap
from llmsched.request import Request
from llmsched.schedulers.registry import create_scheduler
from llmsched.schedulers.wait.fluid_model import PromptType
from llmsched.schedulers.wait.nested import memory_requirement, segments
from llmsched.schedulers.wait.synthetic_workloads import Mixture
from llmsched.sim.simulator import simulate
from test_wait_schedulers import Scripted
from llmsched.workload.arrivals.processes import Piecewise
from llmsched.workload.workload import OpenLoop, Workload

BT = LinearBatchTime.from_wait(0.01, 1e-5)


def replica(scheduler, memory=1 << 20, **kw):
    cfg = ReplicaConfig(num_blocks=memory, block_size=1, max_num_seqs=4096, max_model_len=1 << 20, **kw)
    return Replica(0, scheduler, BT, cfg)


def test_adapt_window_raises_thresholds_with_the_rate_and_lowers_them_after():
    types = "200:10:10,100:10:20"  # designed for 300/s; the rate goes 300 → 1200 → 300
    sched = create_scheduler("nested-wait", types=types, rule="fluid", d0=0.01, d1=1e-6, adapt_window=1.0)
    rep = replica(sched)
    lengths = Mixture([(2, 10, 11), (1, 10, 21)])
    wl = Workload(Piecewise([(0, 300), (4, 1200), (8, 300)]), lengths, duration=12, seed=1)
    simulate(OpenLoop(wl.requests()), [rep])

    def n1_at(t):  # thresholds in force at time t (the log records each change)
        return [n for when, n in sched.adapted if when <= t][-1]

    low, high, after = n1_at(3.9), n1_at(7.9), n1_at(11.9)
    static = create_scheduler("nested-wait", types=types, rule="fluid", d0=0.01, d1=1e-6)
    static.setup(rep.view)
    assert high >= 3 * static.n[0] > 0   # thresholds follow the 4× rate
    assert after < high / 2              # and come back down
    assert abs(low - static.n[0]) <= 1


def test_static_thresholds_never_change_without_adapt_window():
    sched = create_scheduler("nested-wait", types="200:10:10,100:10:20", rule="fluid", d0=0.01, d1=1e-5)
    rep = replica(sched)
    wl = Workload(Piecewise([(0, 300), (1, 1200)]), Mixture([(2, 10, 11), (1, 10, 21)]), duration=2, seed=1)
    simulate(OpenLoop(wl.requests()), [rep])
    assert len(sched.adapted) == 1


def test_segment_design_merges_types_and_prompts_leave_mid_segment():
    # four decode lengths merged into S = 2 segments with edges 3 and 8 (engine outputs ≤ 3 and ≤ 8 tokens)
    sched = create_scheduler("nested-wait", lengths="sharegpt", edges="3,8", thresholds="2,2", max_wait=0, rate=1)
    rep = replica(Scripted())
    sched.setup(rep.view)
    assert len(sched.segments_) == 2 and len(sched.n) == 2
    short, long_ = Request(0, 0, 4, 2), Request(1, 0, 4, 6)  # both inside segment 1 (stages 0..2)
    s = rep.scheduler
    for r in (short, long_):
        rep.add(r, 0)
    s.plan = BatchPlan(prefills=[(short, 4), (long_, 4)])
    rep.end_step(rep.start_step(0))
    s.plan = BatchPlan(decodes=[short, long_])
    rep.end_step(rep.start_step(rep.now))
    assert short.status.name == "FINISHED"  # its EOS came mid-segment: it left without a boundary wait
    s.plan = BatchPlan(decodes=[long_])
    rep.end_step(rep.start_step(rep.now))
    # the survivor waits at segment 2's boundary alone (< n_2 = 2); with nothing else to run, nothing runs
    assert long_.num_generated == 3 and sched.segment_of(3) == 1
    assert not sched.schedule(rep.view).has_work


def test_entry_gate_advances_prompts_inside_a_segment_below_threshold():
    sched = create_scheduler("nested-wait", types="1:4:2,1:4:5", thresholds="2,2", max_wait=0, gate="entry")
    s = Scripted()
    rep = replica(s)
    reqs = [Request(i, 0, 4, 6) for i in range(3)]
    for r in reqs:
        rep.add(r, 0)
    s.plan = BatchPlan(prefills=[(r, 4) for r in reqs[:2]])
    rep.end_step(rep.start_step(0))
    plan = sched.schedule(rep.view)  # req 2 alone below n_1 = 2 is not admitted, but 0 and 1 keep decoding
    assert set(plan.decodes) == set(reqs[:2]) and not plan.prefills
    paper = create_scheduler("nested-wait", types="1:4:2,1:4:5", thresholds="2,2", max_wait=0)
    assert not paper.schedule(rep.view).has_work  # Algorithm 2 pauses segment 1 with its cohort


def test_wait_entry_gate_keeps_cohorts_decoding():
    sched = create_scheduler("wait", types="1:5:3", thresholds="3", max_wait=0, gate="entry")
    s = Scripted()
    rep = replica(s, oracle=True)
    reqs = [Request(i, 0, 5, 4) for i in range(4)]
    for r in reqs:
        rep.add(r, 0)
    s.plan = BatchPlan(prefills=[(r, 5) for r in reqs[:3]])
    rep.end_step(rep.start_step(0))
    plan = sched.schedule(rep.view)
    assert set(plan.decodes) == set(reqs[:3]) and not plan.prefills  # 1 waiting < 3: no admission


def test_bad_gate_is_a_clear_error():
    with pytest.raises(ValueError, match="gate"):
        create_scheduler("nested-wait", gate="sometimes")
    with pytest.raises(ValueError, match="gate"):
        create_scheduler("wait", gate="sometimes")


def test_buffer_is_infinite_when_12b_fails_and_zero_when_the_queue_cannot_grow():
    segs = segments([PromptType(3.0, 4, 4), PromptType(2.0, 4, 9), PromptType(1.0, 4, 14)])
    up = memory_requirement(4, segs, [6, 5, 1], 0.05, 5e-4, horizon=100, delta=0.1)  # p_3·n_2 = 5/3 > n_3 = 1
    assert up["drift_ok"][2] is False and math.isinf(up["total"])
    flat = memory_requirement(4, segs, [6, 6, 6], 0.05, 5e-4, horizon=100, delta=0.1)
    assert flat["buffer"] == pytest.approx((4 + 4) * 6 + (4 + 9) * 6)


def test_memory_cap_fills_the_kv_on_average():
    types = [PromptType(20, 10, 10), PromptType(10, 10, 20)]
    b = memory_cap(types, 10_000, 4096)
    per_prompt = sum(t.rate * t.memory for t in types) / sum(t.rate * t.stages for t in types)
    assert b * per_prompt <= 10_000 < (b + 1) * per_prompt
    assert memory_cap(types, 10_000, 50) == 50

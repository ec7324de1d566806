"""RAD (Algorithm 1) and its Appendix D mirror: modes, cycles, tiling, on real simulated runs."""
import numpy as np
import pytest

from llmsched.request import Status
from llmsched.schedulers import create_scheduler, scheduler_info
from llmsched.schedulers.registry import _lookup

from conftest import make_requests, run_sim

TILES = dict(t_row=8, t_col=4, t_red=2)  # t*_lcm = 8, at most 4 decoding


def record(monkeypatch, name, params):
    """Register a copy of ``name`` that logs (plan, view state before it) for every step."""
    cls = _lookup(name)[0]
    log = []

    class Recorded(cls):
        def schedule(self, view):
            decoding = [r.id for r in view.running if r.is_decode]
            prefilling = [r.id for r in view.running if not r.is_decode]
            k = getattr(self, "_k", None)
            plan = super().schedule(view)
            log.append(dict(plan=plan, decoding=decoding, prefilling=prefilling, waiting=len(view.waiting), k=k,
                            prefills=[(r.id, r.num_computed, n, r.num_tokens) for r, n in plan.prefills],
                            decodes=[r.id for r in plan.decodes]))
            return plan

    Recorded.name = name
    import llmsched.schedulers.registry as reg
    monkeypatch.setitem(reg._REGISTRY, name + "-rec", (Recorded, params, "recorded"))
    return name + "-rec", log


@pytest.mark.parametrize("name", ["rad", "rad-lowtbt"])
def test_batches_are_pure_single_prefills_or_decodes_in_lcm_chunks(monkeypatch, name):
    rec, log = record(monkeypatch, name, dict(n=6, **TILES))
    reqs = make_requests(150, rate=20.0, prompt=(1, 60), output=(1, 30))
    run_sim(rec, reqs)
    assert all(r.status is Status.FINISHED for r in reqs)
    assert len(log) > 200
    last_chunk_of = {}
    for s in log:
        assert not (s["prefills"] and s["decodes"]), "RAD never mixes prefill and decode (spec A28)"
        assert len(s["prefills"]) <= 1
        assert len(s["decodes"]) <= 4 and len(s["decoding"]) + len(s["prefilling"]) <= 4 + (name != "rad") * 999
        for rid, done, n, total in s["prefills"]:
            assert done % 8 == 0, "every chunk starts at a multiple of t*_lcm"
            assert n == min(8, total - done), "chunks are t*_lcm tokens, the last one the remainder"
            last_chunk_of[rid] = done
    # a started prefill is never interrupted: the next step continues it
    for a, b in zip(log, log[1:]):
        if a["prefills"]:
            rid, done, n, total = a["prefills"][0]
            if done + n < total:
                assert b["prefills"] and b["prefills"][0][0] == rid


def test_rad_modes_follow_algorithm_1(monkeypatch):
    rec, log = record(monkeypatch, "rad", dict(n=6, **TILES))
    reqs = make_requests(200, rate=30.0, prompt=(1, 40), output=(2, 40))
    run_sim(rec, reqs)
    decode_with_queue = starts = 0
    for s in log:
        new_start = s["prefills"] and s["prefills"][0][1] == 0 and s["prefills"][0][0] not in s["prefilling"]
        if new_start:
            starts += 1
            k = s["k"] if s["decoding"] else 0  # D empty: the last cycle ended, k restarts at 0
            assert len(s["decoding"]) < 4 and k < 6 and not s["prefilling"]
        if s["decodes"] and s["waiting"] and not s["prefilling"]:
            decode_with_queue += 1
            # decode mode with work queued: D is full (t*_col) or the cycle has started n requests
            assert len(s["decoding"]) == 4 or s["k"] == 6
    assert starts == 200 and decode_with_queue > 50


def test_rad_cycle_of_n_decodes_until_d_empties(monkeypatch):
    rec, log = record(monkeypatch, "rad", dict(n=3, **TILES))
    reqs = make_requests(60, rate=1000.0, prompt=(1, 9), output=(5, 20))  # everyone queued at once
    run_sim(rec, reqs)
    # starts come in groups of n=3; between groups D drains to empty (only decodes run)
    started_since_empty = 0
    for s in log:
        if not s["decoding"] and not s["prefilling"]:
            started_since_empty = 0
        if s["prefills"] and s["prefills"][0][1] == 0:
            started_since_empty += 1
            assert started_since_empty <= 3


def test_lowtbt_decodes_active_requests_in_consecutive_batches(monkeypatch):
    rec, log = record(monkeypatch, "rad-lowtbt", dict(n=5, **TILES))
    reqs = make_requests(80, rate=1000.0, prompt=(1, 20), output=(3, 15))
    run_sim(rec, reqs)
    assert all(r.status is Status.FINISHED for r in reqs)
    # once a request decodes, it decodes in every batch until it finishes: each request's TBT gaps are
    # single decode batches, so no gap spans a prefill batch
    for r in reqs:
        if r.output_len > 2:
            gaps = np.diff(np.asarray(r.token_times)[1:])
            assert (gaps < 0.015).all()  # one ~10 ms decode step, never two steps
    # prefill mode starts at most n requests, then decode mode drains them all
    in_prefill = 0
    for s in log:
        if s["prefills"] and s["prefills"][0][1] == 0:
            in_prefill += 1
            assert in_prefill <= 5
        if s["decodes"]:
            in_prefill = 0


def test_rad_defaults_and_bad_parameters():
    info = scheduler_info("rad")
    assert "Algorithm 1" in info["source"] and info["params"]["n"] >= 1
    with pytest.raises(ValueError, match="n must be >= 1"):
        create_scheduler("rad", n=0)
    with pytest.raises(ValueError, match="power of two"):
        create_scheduler("rad-lowtbt", t_col=96)


def test_rad_reads_the_tiles_of_the_gpu_preset():
    from llmsched.batchtime import make_batch_time_model
    from llmsched.engine.replica import Replica, ReplicaConfig
    from llmsched.schedulers.rad_slai.rad import tile_of
    rep = Replica(0, create_scheduler("rad"), make_batch_time_model("roofline-staircase", "mistral-7b",
                                                                     "rtx-6000-ada"), ReplicaConfig(num_blocks=100))
    assert tile_of(rep.view) == (128, 128, 32)
    assert rep.scheduler._tiles(rep.view) == (128, 128)

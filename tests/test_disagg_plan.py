"""Capacity and plan over disaggregated deployments: each pool's sound bound (the prompt and one token; the
prompt's last token and the decodes) holds against saturated runs, a fleet's bound is its binding pool's, the
plan's disaggregated candidates count both pools' GPUs and price, and the report names the pool that binds."""
from __future__ import annotations

import numpy as np
import pytest

from llmsched.experiment import RunConfig, build_source
from llmsched.fleet_setup import fleet_of, pool_configs, simulate_fleet_config
from llmsched.plan.candidates import build_candidates, parse_ratios
from llmsched.plan.prune import LengthCache, screen
from llmsched.request import Status
from llmsched.theory.throughput_bound import engine_of, stage_work, throughput_bound, request_work


@pytest.mark.parametrize("scheduler", ["sarathi", "vllm", "vllm-chunked"])
def test_each_pools_busy_time_is_at_least_its_bound(scheduler):
    """2P1D at 300 req/s (far above what it carries), every request run to its end: each pool's busy time is at
    least the least GPU time its part of the finished requests needs, so each pool's bound bounds its
    throughput, and the fleet's (the least) bounds the fleet's."""
    cfg = RunConfig(scheduler=scheduler, disaggregate="2P1D", decode_gpu="h100", rate=300.0, num_requests=150,
                    workload="azure-conv", latency_boundary="engine")
    result, state = simulate_fleet_config(cfg, build_source(cfg))
    log = result.requests
    done = log.column("status") == int(Status.FINISHED)
    assert done.all()
    prompts, outputs = log.column("prompt_len")[done], log.column("output_len")[done]
    configs = pool_configs(cfg, fleet_of(cfg))
    for pool, stage in (("prefill", "prefill"), ("decode", "decode")):
        bt, limits = engine_of(configs[pool])
        bound = throughput_bound(bt, prompts, outputs, limits, stage=stage)
        busy = result.fleet["pools"][pool]["busy_s"]
        assert busy >= bound.seconds_per_request * done.sum() * (1 - 1e-9), (pool, busy, bound)


def test_the_pools_work_adds_up_to_the_whole_requests():
    """The prefill pool's least work and the decode pool's together are the whole request's, but for the chunk
    that recomputes the prompt's last token (one token, its attention over the prompt) and the prompt's one
    sampled token the prefill pool throws away."""
    p, d = np.array([100, 2000]), np.array([1, 50])
    whole, pre, dec = request_work(p, d), stage_work("prefill", p, d), stage_work("decode", p, d)
    assert np.all(pre["tokens"] + dec["tokens"] == whole["tokens"] + 1)
    assert np.all(pre["decode_context"] + dec["decode_context"] == whole["decode_context"])
    assert np.all(pre["attention_pairs"] + dec["attention_pairs"] == whole["attention_pairs"] + p)
    assert np.all(dec["rows"] == d) and np.all(pre["rows"] == 1)


def test_plan_candidates_count_both_pools_and_name_the_binding_one():
    cands = build_candidates(["h100", "a100"], [1], ["sarathi"], ["round-robin"], None,
                             ratios=parse_ratios("1:1,2:1,1:2"))
    assert len(cands) == 2 + 2 * 2 * 3  # colocated, and each prefill (GPU, TP) with each decode one per ratio
    hetero = next(c for c in cands if c.pd == ("h100", 1, "a100", 1, 2, 1))
    prices = {"h100": 3.0, "a100": 1.5}
    assert hetero.gpus(3) == 9 and hetero.usd_per_hour(prices.get, 3) == pytest.approx(3 * (2 * 3.0 + 1.5))
    base = RunConfig(workload="sharegpt", num_requests=200, disaggregate="1P1D")
    cfg = hetero.config(base, 5.0, 2)
    assert cfg.disaggregate == "4P2D" and cfg.prefill_gpu == "h100" and cfg.decode_gpu == "a100"
    colocated = cands[0].config(base, 5.0, 3)
    assert colocated.disaggregate is None and colocated.replicas == 3
    s = screen(hetero, base, 5.0, (0,), 16, LengthCache())
    assert s.binding.split(" pool")[0] in ("prefill", "decode") and s.bound_rps_per_replica > 0
    with pytest.raises(ValueError, match="--pd-ratios '2:0'"):
        parse_ratios("2:0")


def test_plan_names_the_schedulers_it_tried_colocated_only(tmp_path, monkeypatch, capsys):
    """A scheduler that cannot run a decode pool is planned colocated only, and plan says so on stderr."""
    from llmsched.cli import main
    from tests.colocated_only import NAME
    monkeypatch.chdir(tmp_path)
    assert main(f"plan --target-rate 2 --slo ttft_p90<=5s --gpus a100 --schedulers vtc,{NAME} --pd-ratios 1:1 "
                f"--num-requests 60 --no-progress".split()) == 0
    out = capsys.readouterr()
    assert f"tried colocated only: {NAME} (cannot run a decode pool" in out.err and "vtc" not in out.err
    assert "3 candidates" in out.out and "1 of them disaggregated" in out.out

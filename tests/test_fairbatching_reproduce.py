"""The FairBatching reproduction's CI version: FB's goodput is not below tuned Sarathi's, single node and cluster."""
from llmsched.reproduce import fairbatching as fb


def args(**kw) -> dict:
    return {"fast": True, "jobs": 1, **kw}


def test_fast_single_node_and_cluster():
    out = fb.reproduce(**args(parts="single,cluster"))
    single = out["single"]["llama-3.1-8b/a800 azure-conv"]
    assert single["sarathi_budget"] in (256, 512)
    cap = single["capacity"]
    assert cap["FB-v"] >= cap["vLLM-sara"] > 0
    assert cap["FB-PAB"] >= cap["vLLM-sara"]
    assert single["capacity_m1"]["vLLM-sara"] > 0
    cl = out["cluster"]["capacity"]
    assert cl["PAB-LB+FB-v"] >= cl["vLLM-LB+vLLM-sara"] > 0
    assert cl["vLLM-LB+FB-v"] >= cl["vLLM-LB+vLLM-sara"]
    # the shared definition (llmsched.capacity): bracketed, to the fast run's 10% resolution
    for caps in (single["shared_capacity"], out["cluster"]["shared_capacity"]):
        for v in caps.values():
            lo, hi = v["interval"]
            assert v["capacity"] == lo > 0 and hi / lo - 1 <= 0.1
    assert out["cluster"]["sarathi_budget_source"] == "single part"
    text = fb.report(out)
    assert "single node" in text and "cluster of 4" in text


def test_a_part_run_alone_tunes_the_sarathi_budget(capsys):
    out = fb.reproduce(**args(parts="latency"))
    assert "tuning vLLM-sara's token budget" in capsys.readouterr().out
    assert out["latency"]["systems"]["vLLM-sara"]["eff_rps"] > 0


def test_bad_arguments_are_clear_errors():
    import pytest
    with pytest.raises(ValueError, match="--parts"):
        fb.reproduce(**args(parts="single,nope"))
    with pytest.raises(ValueError, match="--models"):
        fb.reproduce(**args(models="gpt-5/tpu"))

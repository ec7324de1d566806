"""`llmsched reproduce fairness` on 20 s of arrivals: every figure comes from the runs it makes, the fair policies
beat first come, first served where the issue's targets say they should, and priority's thrown-away work stays
within its bound."""
import json

from llmsched.cli.commands import main


def test_reproduce_fairness_short(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LLMSCHED_CHECK_FIGURES", "1")
    assert main(["reproduce", "fairness", "--duration", "20", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "Jain's index" in printed and "| vtc |" in printed
    out = json.loads((tmp_path / "results.json").read_text())
    assert (tmp_path / "service.png").stat().st_size > 0
    light = {r["scheduler"]: r for r in out["light_tenant"] if not r["params"]}
    for name in ("vtc", "wfq"):
        assert light[name]["light_ttft_p50_s"] < light["vllm-chunked"]["light_ttft_p50_s"] / 5
        assert light[name]["throughput_vs_fcfs"] >= 0.95
    jain = {r["scheduler"]: r["jain_backlogged"] for r in out["backlogged"] if not r["params"]}
    assert min(jain["vtc"], jain["wfq"]) >= 0.95 > jain["vllm-chunked"]
    assert all(r["jain_backlogged"] >= 0.95 for r in out["backlogged"] if r["params"])  # light_first keeps it
    assert {r["params"] for r in out["light_tenant"] if r["scheduler"] == "vtc"} >= {"", "light_first=step"}
    prio = out["priority"]
    fcfs = next(r for r in prio if r["scheduler"] == "vllm-chunked")
    for r in prio:
        if r["scheduler"] == "priority":
            assert r["high_ttft_p99_s"] < fcfs["high_ttft_p99_s"]
            assert r["thrown_away_tokens"] <= r["thrown_away_bound_tokens"]
            assert r["most_preemptions_of_one_request"] <= r["max_preemptions"]

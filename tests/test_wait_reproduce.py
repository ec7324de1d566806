"""The fast mode of `llmsched reproduce wait` (CI)."""
import json

from llmsched.cli import main


def test_reproduce_wait_fast(tmp_path, capsys):
    assert main(["reproduce", "wait", "--fast", "--skip-lmsys", "--out", str(tmp_path)]) == 0
    out = json.loads((tmp_path / "results.json").read_text())
    toy = {(r["arrivals"], r["policy"]): r for r in out["toy"]}
    restart = toy[("poisson", "fcfs (evict-newest, restart)")]
    wait = toy[("poisson", "wait n=4")]
    assert restart["evictions"] > 0 and wait["evictions"] == 0
    assert restart["completions_per_iteration"] < wait["completions_per_iteration"]
    assert all(r["evictions"] == 0 for r in out["scaling"])
    buffered = next(r for r in out["overflow"] if r["memory"].startswith("M(n) +"))
    assert buffered["overflow_rate"] <= buffered["delta"]
    assert {r["scheduler"] for r in out["nested"]} == {"nested-wait (Alg. 2)", "nested-wait gate=entry",
                                                       "nested-wait (Alg. 2) fluid-random", "vllm", "sarathi"}
    assert all(r["preemptions"] == 0 for r in out["nested"] + out["wait_synthetic"] if "wait" in r["scheduler"])
    assert {r["scheduler"] for r in out["authors"]} >= {"vllm", "sarathi", "wait (authors' code: budget gate)"}
    assert {r["setting"] for r in out["nested"]} == {"vidur-like", "eq1-linear", "memory-bound"}
    adaptive = next(r for r in out["time_varying"] if "adapt" in r["policy"])
    assert adaptive["n1_max"] > adaptive["n1_min"] and adaptive["finished"] == adaptive["offered"]
    assert [r["segments"] for r in out["segment_design"]] == [1, 2, 5, 10, 20]
    assert all(r["finished"] == r["offered"] for r in out["nested"] + out["wait_synthetic"])
    assert "Example 2" in capsys.readouterr().out

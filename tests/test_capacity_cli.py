"""`llmsched capacity` end to end: output files, bad input, an unreachable Ray address."""
import json
import subprocess
import sys
import time

import pytest


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "llmsched.cli", "capacity", *args], capture_output=True, text=True,
                          env=env)


def test_capacity_writes_json_csv_and_plot(tmp_path):
    out = tmp_path / "cap"
    p = run_cli("--schedulers", "sarathi,vllm", "--slo", "ttft_p50<=2s,tbt_p99<=200ms", "--duration", "120",
                "--resolution", "0.1", "--jobs", "2", "--cache", str(tmp_path / "cache"), "--out", str(out),
                "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "capacity:" in p.stdout and "probes in" in p.stdout
    data = json.loads((out / "capacity.json").read_text())
    assert set(data["schedulers"]) == {"sarathi", "vllm"}
    for res in data["schedulers"].values():
        lo, hi = res["interval"]
        assert res["capacity"] == lo and hi / lo - 1 <= 0.1
        assert all({"rate", "verdict", "values", "meets", "failed"} <= set(pr) for pr in res["probes"])
        assert any(pr["rate"] == hi and not pr["meets"] for pr in res["probes"])
    rows = (out / "capacity.csv").read_text().splitlines()
    assert rows[0].startswith("scheduler,rate,unit,verdict,meets") and len(rows) > 4
    assert (out / "capacity.png").stat().st_size > 10_000
    again = run_cli("--schedulers", "sarathi,vllm", "--slo", "ttft_p50<=2s,tbt_p99<=200ms", "--duration", "120",
                    "--resolution", "0.1", "--jobs", "2", "--cache", str(tmp_path / "cache"), "--no-progress")
    n = sum(len(r["probes"]) for r in data["schedulers"].values())
    assert f"{n} probe runs from the cache" in again.stdout


@pytest.mark.parametrize("args, needle", [
    (["--slo", "ttft_p42<=2s"], "valid: ttft_mean"),
    (["--slo", "paid.attainment>=0.9", "--duration", "60", "--rate", "1"], "no tier 'paid'"),
    (["--horizon", "100"], "unrecognized arguments"),
    (["--executor", "local", "--ray-address", "127.0.0.1:1"], "only with --executor ray"),
    (["--attainment", "1.5"], "fraction in (0, 1]"),
])
def test_bad_input_is_one_clear_error(args, needle):
    p = run_cli(*args, "--no-cache")
    assert p.returncode == 2
    assert needle in p.stderr


def test_unreachable_ray_address_fails_fast():
    pytest.importorskip("ray")
    t0 = time.perf_counter()
    p = run_cli("--executor", "ray", "--ray-address", "10.255.255.1:6379", "--duration", "60", "--no-cache")
    assert p.returncode == 2 and "cannot reach a Ray head at 10.255.255.1:6379" in p.stderr
    assert time.perf_counter() - t0 < 15


def test_a_trend_failure_in_a_short_window_says_so(capsys):
    """16 A100s never queue over 100 ShareGPT requests (TTFT p90 0.46 s at every rate), yet their 37 s window fails
    the trend at 2.2 req/s: the capacity says the window is too short rather than passing it off as the limit."""
    from llmsched.cli import main
    main(["capacity", "--scheduler", "sarathi", "--replicas", "16", "--slo", "ttft_p90<=2s", "--num-requests", "100",
          "--max-rate", "8", "--jobs", "1", "--no-progress"])
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "capacity:" in ln)
    assert "failed on its trend alone" in line and "offer more requests (--num-requests)" in line


def test_a_probe_that_queues_or_misses_an_slo_gets_no_short_window_note():
    from llmsched.capacity.probe import Probe
    from llmsched.capacity.rate_search import short_window_note

    def probe(failed, admitted):
        rec = {"stability": {"admitted_share": admitted}, "window": {"start": 5.0, "end": 40.0},
               "metrics": {"e2e_p90": 10.0}}
        return Probe(2.0, (0,), "backlogged", {}, False, failed, 2.0, [rec])
    assert short_window_note(probe(["stability: backlogged"], 1.0))
    assert not short_window_note(probe(["stability: backlogged"], 0.8))  # a queue built: the trend has a cause
    assert not short_window_note(probe(["stability: backlogged", "ttft_p90<=2s"], 1.0))

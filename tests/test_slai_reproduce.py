"""The fast version of ``llmsched reproduce slai``: files, and the paper's qualitative ordering."""
import json

from llmsched.cli import main
from llmsched.reproduce.slai import capacity


def test_fast_reproduction_orders_the_schedulers_as_the_paper(tmp_path):
    assert main(["reproduce", "slai", "--fast", "--out", str(tmp_path)]) == 0
    for name in ("results.csv", "results.json", "report.md", "fig7.png", "fig8.png"):
        assert (tmp_path / name).stat().st_size > 0
    data = json.loads((tmp_path / "results.json").read_text())
    main5 = data["report"]["shares"]["0.05"]["schedulers"]
    sweep = [r for r in data["sweep"] if r["share"] == 0.05]
    # the highest rate at which SLAI (SPF, dynamic) meets every target
    top = max(main5["SLAI (SPF, dynamic δ)"]["meets_at"])
    ttft = {r["label"]: r["ttft_p50"] for r in sweep if r["rate"] == top}
    assert ttft["SLAI (SPF, dynamic δ)"] < ttft["Sarathi (SPF)"] < ttft["Sarathi (FCFS)"]
    assert ttft["SLAI (SPF, δ=10)"] < ttft["Sarathi (SPF)"]
    # vLLM breaks the paying users' TBT target before the others do
    vllm = {r["rate"]: r for r in sweep if r["label"] == "vLLM"}
    assert vllm[top]["paid_tbt_p99"] > 0.1 and all(r["paid_tbt_p99"] <= 0.1 for r in sweep
                                                   if r["rate"] == top and r["label"] != "vLLM")


def test_capacity_interpolates_median_ttft_at_half_a_second():
    rows = [dict(rate=1.0, ttft_p50=0.3, paid_tbt_p99=0.05, free_tbt_p99=0.2),
            dict(rate=1.2, ttft_p50=0.7, paid_tbt_p99=0.06, free_tbt_p99=0.2)]
    assert abs(capacity(rows) - 1.1) < 1e-9
    rows[1]["paid_tbt_p99"] = 0.2  # a TBT miss at the next rate: no interpolation past the last good rate
    assert capacity(rows) == 1.0


def test_bad_options_are_refused(tmp_path):
    assert main(["reproduce", "slai", "--fast", "--rates", "-1", "--out", str(tmp_path)]) == 2
    assert main(["reproduce", "slai", "--fast", "--shares", "0.5", "--out", str(tmp_path)]) == 2

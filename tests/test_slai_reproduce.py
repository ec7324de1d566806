"""The fast version of ``llmsched reproduce slai``: files, the paper's qualitative ordering, the extended sweep,
the equal-relative-load comparison and Fig. 8's memory picture."""
import json

import pytest

from llmsched.cli import main
from llmsched.reproduce.slai import equal_load_rate, extensions, kv_stats

import numpy as np


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    out = tmp_path_factory.mktemp("slai")
    assert main(["reproduce", "slai", "--fast", "--out", str(out)]) == 0
    return out, json.loads((out / "results.json").read_text())


def test_fast_reproduction_writes_every_output(fast):
    out, _ = fast
    for name in ("results.csv", "results.json", "report.md", "fig7.png", "fig8.png"):
        assert (out / name).stat().st_size > 0


def test_fast_reproduction_orders_the_schedulers_as_the_paper(fast):
    _, data = fast
    report = data["report"]
    main5 = report["shares"]["0.05"]["schedulers"]
    sweep = [r for r in data["runs"] if r["study"] == "sweep" and r["share"] == 0.05]
    # the highest rate of the paper's sweep at which SLAI (SPF, dynamic) meets every target
    top = max(r for r in main5["SLAI (SPF, dynamic δ)"]["meets_at"] if r in report["base_rates"])
    ttft = {r["label"]: r["ttft_p50"] for r in sweep if r["rate"] == top}
    assert ttft["SLAI (SPF, dynamic δ)"] < ttft["Sarathi (SPF)"] < ttft["Sarathi (FCFS)"]
    assert ttft["SLAI (SPF, δ=10)"] < ttft["Sarathi (SPF)"]
    # vLLM breaks the paying users' TBT target before the others do
    vllm = {r["rate"]: r for r in sweep if r["label"] == "vLLM"}
    assert vllm[top]["paid_tbt_p99"] > 0.1 and all(r["paid_tbt_p99"] <= 0.1 for r in sweep
                                                   if r["rate"] == top and r["label"] != "vLLM")


def test_the_sweep_is_extended_until_a_scheduler_fails(fast):
    _, data = fast
    main5 = data["report"]["shares"]["0.05"]["schedulers"]
    for label, v in main5.items():
        # extended 0.2 req/s at a time while it meets every target, up to --max-rate (2.0 with --fast)
        extra = [r for r in v["rates"] if r > 1.6]
        assert extra == [round(1.6 + 0.2 * i, 1) for i in range(1, len(extra) + 1)]
        top = max(v["rates"])
        assert top == 2.0 or top not in v["meets_at"] or label == "vLLM"
    assert main5["vLLM"]["rates"] == [0.8, 1.6]  # a scheduler that already fails is not extended
    fig8 = {f["rate"]: f for f in data["report"]["fig8"] if f["kind"] != "equal relative load"}
    assert fig8[1.6]["kind"] == "the paper's rate"
    assert all(set(f["offsets"]) == {"δ=10", "δ=5", "dynamic δ"} for f in fig8.values())


def test_capacities_are_the_shared_definition_to_two_percent(fast):
    _, data = fast
    for label, v in data["report"]["shares"]["0.05"]["schedulers"].items():
        lo, hi = v["interval"]
        assert v["bracketed"] and v["capacity"] == lo and hi / lo - 1 <= 0.02, label
        assert v["probes"] <= 12
    # vLLM misses the paying users' TBT target already at 0.8 req/s: its capacity lies below
    assert data["report"]["shares"]["0.05"]["schedulers"]["vLLM"]["capacity"] < 0.8


def test_equal_load_reproduces_fig8s_memory_picture(fast):
    _, data = fast
    eq = data["report"]["equal_load"]
    assert eq["rate"] == pytest.approx(round(1.6 * data["report"]["shares"]["0.05"]["schedulers"]
                                             ["Sarathi (FCFS)"]["capacity"] / 1.15, 2))
    ttft = {label: v["ttft_p50"] for label, v in eq["schedulers"].items()}
    assert ttft["SLAI (SPF, dynamic δ)"] < ttft["SLAI (SPF, δ=10)"] < ttft["Sarathi (SPF)"] < ttft["Sarathi (FCFS)"]
    fig8 = next(f["offsets"] for f in data["report"]["fig8"] if f["kind"] == "equal relative load")
    # δ=5 sits near a full pool longest, δ=10 least; dynamic δ in between
    assert fig8["δ=5"]["kv_t98"] > fig8["dynamic δ"]["kv_t98"] > fig8["δ=10"]["kv_t98"]
    assert fig8["δ=5"]["waiting_end"] >= fig8["dynamic δ"]["waiting_end"]


def test_extension_and_equal_load_rate():
    from llmsched.capacity import CapacityResult

    def row(label, rate, ok):
        return dict(label=label, rate=rate, share=0.05, meets=ok)
    sweep = [row("Sarathi (FCFS)", 1.4, True), row("Sarathi (FCFS)", 1.6, False),
             row("SLAI (SPF, dynamic δ)", 1.4, True), row("SLAI (SPF, dynamic δ)", 1.6, True)]
    nxt = extensions(sweep, 2.4, 100.0, 0, {})
    assert [(s["label"], s["rate"]) for s in nxt] == [("SLAI (SPF, dynamic δ)", 1.8)]
    assert extensions(sweep, 1.7, 100.0, 0, {}) == []  # past --max-rate
    caps = {(0.05, "Sarathi (FCFS)"): CapacityResult("s", "req/s", 1.5, (1.5, 1.53), 0.02)}
    assert equal_load_rate(caps) == pytest.approx(round(1.6 * 1.5 / 1.15, 2))  # capacity 1.5 → 2.09 req/s
    assert equal_load_rate({}) is None  # no baseline capacity, no equal-load point
    caps[(0.05, "Sarathi (FCFS)")] = CapacityResult("s", "req/s", 2.4, (2.4, float("inf")), 0.02)
    assert equal_load_rate(caps) is None  # only a lower bound


def test_kv_stats_weigh_time():
    a = np.array([[0.0, 0.5, 0], [10.0, 0.99, 3], [15.0, 0.97, 5]])  # 10 s at 50%, 5 s at 99%, 5 s at 97%
    s = kv_stats(a, 20.0)
    assert s["kv_mean"] == pytest.approx((5 + 4.95 + 4.85) / 20)
    assert (s["kv_t96"], s["kv_t98"], s["kv_t99"], s["kv_max"], s["waiting_end"]) == (0.5, 0.25, 0.25, 0.99, 5)


def test_bad_options_are_refused(tmp_path):
    assert main(["reproduce", "slai", "--fast", "--rates", "-1", "--out", str(tmp_path)]) == 2
    assert main(["reproduce", "slai", "--fast", "--shares", "0.5", "--out", str(tmp_path)]) == 2
    assert main(["reproduce", "slai", "--fast", "--per-seq-overhead", "-1", "--out", str(tmp_path)]) == 2

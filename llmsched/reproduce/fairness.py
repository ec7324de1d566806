"""Targets for tenants and priorities (a light tenant's TTFT, throughput, Jain's index, priority preemption), each measured here (``llmsched reproduce fairness``,
llmsched/cli/reproduce_fairness.py).

ShareGPT lengths on Llama-3-8B on an A100 (capacity about 2.7 req/s in the simulator), Poisson arrivals per tenant
for ``--duration`` seconds; every tenant's stream is seeded by its name, so a tenant alone and beside others gets
the same requests.

1. **Light tenant** (8 req/s heavy + 0.5 req/s light): the light tenant's TTFT p50 under vtc (and wfq) against what
   it gets alone (target within 1.5x), and the total throughput against vllm-chunked (FCFS) on the same arrivals
   (target at least 95%).
2. **Two backlogged tenants of equal weight** (8 and 2 req/s, both above their half of the capacity): Jain's index
   over the weighted service while both are backlogged (target at least 0.95; FCFS serves them as they ask).
3. **Priority** (a 10% high class in 1.5x the capacity, high 0.42 req/s and low 3.78 req/s): the high class's TTFT
   p99 under priority against the high class alone (target within 1.2x), and the low class's work thrown away by
   priority preemption, with its bound (``max_preemptions`` times each victim's KV).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..experiment import run as run_config
from ..metrics.summary import summarize
from ..results_file import write_results
from ..run_config import RunConfig
from . import PINNED_KIND

CAPACITY = 2.8  # req/s, ShareGPT on Llama-3-8B/A100 (the figure; the simulator saturates at about 2.7)


@dataclass(frozen=True)
class Setup:
    """What every run of the study shares."""
    duration: float
    seed: int
    model: str
    gpu: str


def summary(setup: Setup, scheduler: str, tenants: str, **params) -> dict:
    return summarize(result_of(setup, scheduler, tenants, **params))


def result_of(setup: Setup, scheduler: str, tenants: str, **params):
    cfg = RunConfig(scheduler=scheduler, tenants=tenants, duration=setup.duration, seed=setup.seed,
                    model=setup.model, gpu=setup.gpu, scheduler_params=params, batch_time=PINNED_KIND, latency_boundary="engine")
    return run_config(cfg)


# vtc's and wfq's light_first (a light tenant's prompts in a step of their own), as measured in docs/fairness.md
LIGHT_FIRST = (("vtc", {"light_first": "prompts"}), ("vtc", {"light_first": "step"}),
               ("vtc", {"light_first": "step", "token_budget": 1024}),
               ("vtc", {"light_first": "step", "token_budget": 512}),
               ("wfq", {"light_first": "step", "token_budget": 512}))


def described(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


def light_tenant(setup: Setup) -> list[dict]:
    both, alone = "heavy:rate=8,light:rate=0.5", "light:rate=0.5"
    fcfs = summary(setup, "vllm-chunked", both)
    rows = []
    for name, params in (("vtc", {}), ("wfq", {}), ("vllm-chunked", {})) + LIGHT_FIRST:
        s = fcfs if name == "vllm-chunked" else summary(setup, name, both, **params)
        solo = summary(setup, name, alone, **params)
        ttft, ttft_alone = (x["tenants"]["light"]["latency"]["ttft"]["p50"] for x in (s, solo))
        throughput = s["throughput"]["output_tokens_per_s"] / fcfs["throughput"]["output_tokens_per_s"]
        heavy = s["tenants"]["heavy"]["latency"]
        rows.append({"scheduler": name, "params": described(params), "light_ttft_p50_s": ttft,
                     "light_alone_ttft_p50_s": ttft_alone,
                     "ratio": ttft / ttft_alone, "ttft_ok": ttft / ttft_alone <= 1.5,
                     "light_ttft_p99_s": s["tenants"]["light"]["latency"]["ttft"]["p99"],
                     "heavy_ttft_p50_s": heavy["ttft"]["p50"], "heavy_tbt_p99_s": heavy["tbt"]["p99"],
                     "heavy_tpot_p99_s": heavy["tpot"]["p99"],
                     "output_tok_s": s["throughput"]["output_tokens_per_s"], "throughput_vs_fcfs": throughput,
                     "throughput_ok": throughput >= 0.95, "preemptions": s["preemptions"]["total"]})
    return rows


def backlogged(setup: Setup) -> list[dict]:
    rows = []
    for name, params in (("vtc", {}), ("wfq", {}), ("vllm-chunked", {}), LIGHT_FIRST[2], LIGHT_FIRST[3]):
        s = summary(setup, name, "heavy:rate=8,med:rate=2", **params)
        f = s["fairness"]
        rows.append({"scheduler": name, "params": described(params),
                     "jain_backlogged": f["jain_while_all_backlogged"],
                     "jain_ok": f["jain_while_all_backlogged"] >= 0.95, "both_backlogged_s": f["all_backlogged_s"],
                     "service_heavy": f["service_while_all_backlogged"]["heavy"],
                     "service_med": f["service_while_all_backlogged"]["med"],
                     "med_ttft_p50_s": s["tenants"]["med"]["latency"]["ttft"]["p50"],
                     "output_tok_s": s["throughput"]["output_tokens_per_s"],
                     "service_over_time": f["service_over_time"]})
    return rows


def priority(setup: Setup) -> list[dict]:
    high, low = 0.1 * 1.5 * CAPACITY, 0.9 * 1.5 * CAPACITY
    both = f"high:rate={high:g}:priority=0,low:rate={low:g}:priority=1"
    alone = summary(setup, "priority", f"high:rate={high:g}:priority=0")
    p99_alone = alone["tenants"]["high"]["latency"]["ttft"]["p99"]
    rows = []
    for name, params in (("priority", {}), ("priority", {"max_preemptions": 0}), ("priority", {"max_preemptions": 3}),
                         ("vllm-chunked", {})):
        result = result_of(setup, name, both, **params)
        s = summarize(result)
        p99 = s["tenants"]["high"]["latency"]["ttft"]["p99"]
        figures = s.get("policy", {}).get("preemptions", {}).get("by_group", {}).get("low", {})
        times = s.get("policy", {}).get("priority_preemptions_per_request", {})
        limit = params.get("max_preemptions", 1) if name == "priority" else 0
        rows.append({"scheduler": name, "max_preemptions": limit if name == "priority" else None,
                     "high_ttft_p99_s": p99, "high_alone_ttft_p99_s": p99_alone, "ratio": p99 / p99_alone,
                     "ttft_ok": p99 / p99_alone <= 1.2,
                     "low_ttft_p50_s": s["tenants"]["low"]["latency"]["ttft"]["p50"],
                     "priority_preemptions": figures.get("priority_preemptions", 0),
                     "thrown_away_tokens": figures.get("priority_thrown_away_tokens", 0),
                     "thrown_away_bound_tokens": limit * preempted_kv(result, "low"),
                     "kv_preemptions": figures.get("kv_preemptions", 0) if name == "priority" else None,
                     "preemptions": s["preemptions"]["total"],
                     "most_preemptions_of_one_request": max(map(int, times), default=0),
                     "output_tok_s": s["throughput"]["output_tokens_per_s"]})
    return rows


def preempted_kv(result, tenant: str) -> int:
    """The most KV tokens (prompt + output - 1) of the tenant's requests that were preempted at all: one preemption
    for priority throws away at most that much of one of them."""
    log = result.requests
    mine = (log.column("tenant") == log.tenants.index(tenant)) & (log.column("preemptions") > 0)
    return int((log.column("prompt_len")[mine] + log.column("output_len")[mine] - 1).sum())


def reproduce(*, duration: float | None = None, fast: bool = False, seed: int = RunConfig.seed,
              model: str = RunConfig.model, gpu: str = RunConfig.gpu, out: str | None = None) -> dict:
    """The three studies, printed as tables and written to ``out`` (results.json, service.png) where given; runs
    of ``duration`` seconds of arrivals (default 300, ``fast`` 60)."""
    if duration is None:
        duration = 60.0 if fast else 300.0
    if not (duration > 0 and math.isfinite(duration)):
        raise ValueError(f"--duration must be a positive number of seconds, got {duration}")
    setup = Setup(duration, seed, model, gpu)
    results = {"light_tenant": light_tenant(setup), "backlogged": backlogged(setup), "priority": priority(setup),
               "duration_s": duration, "seed": seed, "model": model, "gpu": gpu}
    print("## 1. Heavy 8 req/s + light 0.5 req/s: the light tenant's TTFT p50 against alone (target <= 1.5x), "
          "throughput against vllm-chunked (>= 95%)\n")
    print(table(results["light_tenant"], ["scheduler", "params", "light_ttft_p50_s", "light_alone_ttft_p50_s",
                                          "ratio", "ttft_ok", "light_ttft_p99_s", "heavy_tbt_p99_s",
                                          "heavy_tpot_p99_s", "output_tok_s", "throughput_vs_fcfs", "throughput_ok",
                                          "preemptions"]))
    print("\n## 2. Two backlogged tenants of equal weight (8 and 2 req/s): Jain's index while both are backlogged "
          "(target >= 0.95)\n")
    print(table(results["backlogged"], ["scheduler", "params", "jain_backlogged", "jain_ok", "both_backlogged_s",
                                        "service_heavy", "service_med", "med_ttft_p50_s"]))
    print("\n## 3. 10% high class at 1.5x capacity: high TTFT p99 against alone (target <= 1.2x), low work thrown "
          "away\n")
    print(table(results["priority"], ["scheduler", "max_preemptions", "high_ttft_p99_s", "high_alone_ttft_p99_s",
                                      "ratio", "ttft_ok", "priority_preemptions", "thrown_away_tokens",
                                      "thrown_away_bound_tokens", "most_preemptions_of_one_request", "kv_preemptions",
                                      "preemptions", "low_ttft_p50_s"]))
    if out:
        write_results(out, results, indent=2)
        plot_service(Path(out) / "service.png", [r for r in results["backlogged"] if not r["params"]], duration)
    return results


def plot_service(path: Path, rows: list[dict], duration: float) -> None:
    """Each tenant's service rate over time (VTC's measure: prompt tokens 1, output tokens 2, per second), the two
    backlogged tenants under each scheduler, one panel each: as the VTC paper's figures of service over time."""
    from ..report.sheet import Sheet
    sheet = Sheet(1, len(rows), panel=(3.6, 2.6))
    colors = {"heavy": "tab:red", "med": "tab:blue"}
    for ax, row in zip(sheet.axes[0], rows):
        series = row["service_over_time"]
        bin_s, start = series["bin_s"], series["start"]
        for tenant, values in series["service"].items():
            t = [start + (i + 0.5) * bin_s for i in range(len(values))]
            ax.plot(t, [v / bin_s for v in values], color=colors.get(tenant), label=f"{tenant} ({tenant_rate(tenant)})")
        ax.axvline(duration, color="k", ls="--", lw=0.7)
        ax.set_title(row["scheduler"], fontsize=10)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("service per second")
        ax.grid(True, alpha=0.3)
    sheet.legend(handles=None, row=0, title="tenant; dashed: arrivals end")
    sheet.save(path)


def tenant_rate(name: str) -> str:
    return {"heavy": "8 req/s", "med": "2 req/s"}.get(name, name)


def table(rows: list[dict], keys: list[str]) -> str:
    def cell(v):
        if isinstance(v, bool):
            return "yes" if v else "no"
        if v is None:
            return "-"
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)

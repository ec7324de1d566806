"""Ao et al. §6 as its authors ran it: the configuration of their Vidur fork, written down as one setting.

Read from github.com/Luoxiaogan/vidur_or (HEAD 853c943, Feb 2025; ``utils.py``, ``run_sh_*.py``,
``vidur/config/config.py``, ``vidur/scheduler/replica_scheduler/{vllm,sarathi,modified_booking_limit,
general_nested_booking_limit}_replica_scheduler.py``, ``vidur/scheduler/utils/memory_planner.py``):

* model ``meta-llama/Meta-Llama-3-8B`` on one ``a100`` (80 GB), Vidur's timing from A100 profiles (here: the
  roofline with efficiencies fitted to Vidur's A100 profiles, ``calibrated``);
* KV: Vidur's memory planner with the custom generator's ``max_tokens = 4096`` and a 10% margin:
  ⌊(0.9·80 GiB − 2·8.03e9 B) / (4096 tokens · 128 KiB)⌋ = 114 request slots × 256 blocks = 29,184 blocks of 16;
* vLLM: ``batch_size_cap = B``, ``max_tokens_in_batch = 4096``, prefill-only admission batches, 1% watermark,
  recompute preemption of the newest; Sarathi: ``batch_size_cap = B``, ``chunk_size = 512``, 1% watermark;
* WAIT = ``modified_booking_limit`` and Nested WAIT = ``general_nested_booking_limit``, ``total_limit = B``,
  no token budget, no batch cap and no KV check of their own (Vidur asserts on overflow); thresholds by the B rule
  ``int(max(B_j/(l'_j+1), 1))`` (WAIT) and ``ceil(B·Λ_s/Σ c̃Λ)`` (Nested), with per-type / per-segment budgets
  B_j (``gate=budget``); ``force_clear`` drops the requests left at the end, which we never do (``max_wait``);
* workloads: Poisson per type (``custom`` generator: type ∝ rate, exponential gaps at the total rate),
  8,000–10,000 requests at rates of 66–8,000 QPS: every run is a drain of a saturated queue;
* metric windows: the whole run (throughput = cumulative completions over time, latency = mean over completed
  requests).
"""
from __future__ import annotations

import numpy as np

from ...experiment import RunConfig, build_replicas
from ...metrics.summary import summarize
from ...schedulers.wait.fluid_model import PromptType
from ...sim.simulator import simulate
from ...workload.arrivals.processes import Poisson
from ...workload.workload import OpenLoop, Workload
from .kv_ledger import kv_ledger
from .paper_model import paper_metrics

VIDUR_A100_LLAMA3_8B_BLOCKS = 29184  # Vidur's memory planner (see the module docstring)

# vLLM without chunked prefill refuses a step budget below the context: the authors' 4096-token budget runs vllm
# with a 4096-token context (their LMSYS prompts and outputs are under 500 and 600 tokens: no request is affected)
VLLM_CONTEXT = 4096
AUTHORS = dict(model="llama-3-8b", gpu="a100", batch_time="calibrated", num_blocks=VIDUR_A100_LLAMA3_8B_BLOCKS,
               block_size=16)


def authors_runs(algo: str, types: list[PromptType], B: int) -> list[tuple[str, str, dict, dict]]:
    """(label, scheduler, scheduler params, replica limits) of one authors'-setting comparison."""
    spec = ",".join(f"{t.rate}:{t.prompt}:{t.decode}" for t in types)
    free = dict(max_num_seqs=1 << 14, max_num_batched_tokens=1 << 22)  # the booking-limit schedulers have none
    paper = "type" if algo == "wait" else "nested"
    return [(f"{algo} (authors' code: budget gate)", algo, {"types": spec, "batch_cap": B, "gate": "budget"}, free),
            (f"{algo} (paper's Alg. {1 if algo == 'wait' else 2})", algo,
             {"types": spec, "batch_cap": B, "gate": paper}, free),
            ("vllm", "vllm", {}, dict(max_num_seqs=B, max_num_batched_tokens=4096, max_model_len=VLLM_CONTEXT)),
            ("sarathi", "sarathi", {"token_budget": 512}, dict(max_num_seqs=B, max_num_batched_tokens=4096))]


def run_one(scheduler: str, params: dict, limits: dict, lengths, rate: float, num_requests: int, seed: int = 0,
            setting: dict | None = None) -> dict:
    """One run in ``setting`` (default :data:`AUTHORS`): the paper's metrics, KV ledger and batch shape."""
    s = setting or AUTHORS
    cfg = RunConfig(scheduler=scheduler, scheduler_params=params, model=s["model"], gpu=s["gpu"],
                    batch_time=s["batch_time"], batch_time_params=dict(s.get("batch_time_params", {})),
                    num_blocks=s["num_blocks"], block_size=s["block_size"], oracle=scheduler == "wait", seed=seed,
                    **limits, latency_boundary="engine")
    reps = build_replicas(cfg)
    wl = Workload(Poisson(rate), lengths, num_requests=num_requests, seed=seed)
    result = simulate(OpenLoop(wl.requests()), reps, seed=seed)
    counts = summarize(result)["counts"]
    pm = paper_metrics(result, reps[0])
    log = reps[0].steps
    steps = max(len(log), 1)
    kv = kv_ledger(log, reps[0].config.block_size, reps[0].index)
    arrivals = result.requests.column("arrival")
    return {**authors_metric(log, float(arrivals.min()), float(arrivals.max())),
            "finished": counts["finished"], "offered": counts["offered"], "throughput_tok_s": pm["throughput"],
            "window_tok_s": pm["throughput_window"], "latency_s": pm["latency"], "ttft_s": pm["ttft"],
            "preemptions": pm["preemptions"] + pm["evictions"], "decodes_per_step": sum(log.num_decodes) / steps,
            "mean_step_ms": 1e3 * sum(log.duration) / steps, "resident_kv": kv["resident_kv"],
            "paused_kv": kv["paused_kv"], "waiting_q": kv["waiting"]}


def authors_metric(log, first: float, last: float) -> dict:
    """The authors' plotted "throughput": requests processed per iteration, summed (prefill included, counted when
    the batch ends, finished or not), here as a rate over the window in which arrivals last; and the mean number
    of requests holding KV over that window."""
    start = np.asarray(log.start)
    end = start + np.asarray(log.duration)
    inside = (end > first) & (end <= last)
    work = np.asarray(log.num_decodes) + np.asarray(log.num_prefills)
    dur = np.asarray(log.duration)[inside]
    span = last - first
    return {"authors_req_iter_s": float(work[inside].sum()) / span if span > 0 else float("nan"),
            "in_flight": float(dur @ np.asarray(log.num_running)[inside] / dur.sum()) if dur.sum() > 0 else 0.0}


def compare_authors(algo: str, types: list[PromptType], lengths, rate: float, num_requests: int, B: int,
                    seed: int = 0, baseline_caps: tuple[int, ...] = ()) -> list[dict]:
    """WAIT or Nested WAIT (authors' budget gate and the paper's Algorithm) vs vLLM and Sarathi, authors' setting;
    with ``baseline_caps`` also the baselines at other B (the threshold policies keep B: their in-flight count is
    not capped by it, so this is the baselines at WAIT's concurrency)."""
    rows = []
    runs = authors_runs(algo, types, B)
    for cap in baseline_caps:
        runs += [(f"{label} B={cap}", name, params, {**limits, "max_num_seqs": cap})
                 for label, name, params, limits in authors_runs(algo, types, B)[2:]]
    for label, name, params, limits in runs:
        cap = limits["max_num_seqs"] if name in ("vllm", "sarathi") else B
        rows.append({"scheduler": label, "B": cap,
                     **run_one(name, params, limits, lengths, rate, num_requests, seed)})
    return rows

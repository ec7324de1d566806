"""Randomized check of the sound throughput bound (llmsched/theory/throughput_bound.py) on settings no test lists.

Each case draws a model (presets, Hugging Face ids, a measured run's config.json), GPU, TP, batch-time model,
scheduler, workload (presets and real traces), engine limits (chunk 256..16384, seats), replicas, prefix cache
on/off and preemption mode; runs the simulator far above capacity until every request leaves; and checks the
bound's two claims on that run:

* the replicas' busy time is at least the bound's least GPU time of the requests they finished, and
* the run's throughput is at most the bound of ``bound_for_config`` (its own requests) when every one finished.

A case whose setting the bound refuses (MoE, sliding windows, a stored profile, a prefix cache over shared prompts)
is counted as refused, with the reason; a run that fails to start (a model too large for the card) as unfit.

    PYTHONPATH=$PWD nice -n 10 python scripts/theory_truths.py --cases 40 --requests 200 --seed 0
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
import warnings

import numpy as np

from llmsched.experiment import RunConfig, build_replicas, run
from llmsched.metrics.summary import summarize
from llmsched.request import Status
from llmsched.schedulers.registry import scheduler_info, scheduler_names
from llmsched.theory.throughput_bound import bound_for_config, engine_limits, throughput_bound

MODELS = ["llama-2-7b", "llama-3-8b", "mistral-7b", "qwen3-14b", "granite-3.1-8b", "llama-2-70b", "codellama-34b",
          "qwen3-32b", "llama-3-70b", "bloom-176b", "meta-llama/Llama-3.2-1B-Instruct", "Qwen/Qwen3-8B",
          "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen3-4B", "google/gemma-3-4b-it", "mixtral-8x7b",
          "tests/data/gpu_runs/h200-qwen3-32b/config.json", "tests/data/gpu_runs/h200-llama-3.1-8b/config.json"]
GPUS = ["a100", "h100", "h200", "rtx-6000-ada", "h20", "l40s", "b200", "mi300x", "l4", "rtx-pro-6000"]
BATCH_TIMES = ["vllm-v1", "roofline", "roofline-staircase", "calibrated", "engine", "h100-vllm", "linear"]
WORKLOADS = ["sharegpt", "azure-conv", "azure-code", "arxiv-summarization", "lmsys",
             "trace:../shared/data/traces/AzureLLMInferenceTrace_code.csv",
             "trace:../shared/data/traces/vidur_splitwise_conv.csv"]
CHUNKS = [256, 512, 1024, 2048, 4096, 8192, 16384]
SEATS = [8, 32, 64, 128, 256, 512]
SCHEDULERS = [n for n in scheduler_names() if not n.startswith("test-")]


def draw(rng: random.Random, requests: int) -> RunConfig:
    """One random case."""
    scheduler = rng.choice(SCHEDULERS)
    workload = rng.choice(WORKLOADS)
    fields = dict(model=rng.choice(MODELS), gpu=rng.choice(GPUS), tp=rng.choice([1, 1, 2, 4, 8]),
                  batch_time=rng.choice(BATCH_TIMES), scheduler=scheduler, rate=1000.0, num_requests=requests,
                  max_num_batched_tokens=rng.choice(CHUNKS), max_num_seqs=rng.choice(SEATS),
                  replicas=rng.choice([1, 1, 1, 2, 3]), prefix_caching=rng.random() < 0.5,
                  preemption_mode=rng.choice(["recompute", "swap"]), seed=rng.randrange(1000),
                  oracle=scheduler_info(scheduler)["needs_oracle"])
    if scheduler.startswith("infermax"):        # its preemptions are by recomputation only
        fields["preemption_mode"] = "recompute"
    if fields["batch_time"] == "calibrated" and fields["gpu"] not in ("a100", "h100"):
        fields["batch_time"] = "roofline"       # calibrated exists for these two cards only
    if rng.random() < 0.25:
        fields["kv_cache_dtype"] = "fp8"
    if rng.random() < 0.2:
        fields["kv_offload"] = "cpu:64GiB"
    if rng.random() < 0.1:
        fields["dp"] = 2
    if rng.random() < 0.3 and not workload.startswith("trace:"):
        fields.update(arrival="gamma", cv=rng.choice([0.5, 2.0, 4.0]))
    if rng.random() < 0.2:      # prefill/decode disaggregation: each pool against its stage's bound
        fields.update(disaggregate=rng.choice(["1P1D", "2P1D", "1P2D"]), replicas=1,
                      pd_first_token=rng.choice(["decode", "prefill"]),
                      kv_connector=rng.choice(["nixl", "layerwise"]), latency_boundary="engine")
        fields.pop("dp", None)
        if rng.random() < 0.3:
            fields["decode_gpu"] = rng.choice(GPUS)
    if rng.random() < 0.1 and not fields.get("disaggregate"):
        fields.update(autoscaler=rng.choice(["hpa", "kpa", "saturation"]), min_replicas=1,
                      max_replicas=rng.choice([2, 3]), replicas=1)
        fields.pop("dp", None)
    elif rng.random() < 0.1 and not fields.get("disaggregate") and not workload.startswith("trace:"):
        fields.update(concurrency=rng.choice([8, 64, 512]), rate=None)     # a closed loop
        fields.pop("arrival", None), fields.pop("cv", None)
    elif rng.random() < 0.1 and not workload.startswith("trace:"):
        fields["tenants"] = "a:rate=500:weight=2,b:rate=500:workload=azure-code"
        fields.pop("arrival", None), fields.pop("cv", None)
    if fields["replicas"] > 1:
        fields["router"] = rng.choice(["round-robin", "least-outstanding", "least-load", "random"])
    if fields["batch_time"] == "linear":
        fields["batch_time_params"] = {"const": rng.uniform(0.002, 0.02), "per_token": rng.uniform(1e-5, 1e-4),
                                       "per_context": rng.uniform(1e-9, 5e-8)}
    if workload.startswith("trace:"):
        fields.update(trace=workload[6:], workload=None)
    else:
        fields["workload"] = workload
    fields = {k: v for k, v in fields.items() if v is not None}
    return RunConfig.from_dict(fields, origin="theory_truths")


def run_case(cfg: RunConfig):
    """``(result, finished mask)`` of one case's run, or ``(None, why)`` where the run refuses the case."""
    try:
        result = run(cfg)
    except ValueError as e:
        return None, {"verdict": "unfit", "why": str(e)[:160]}
    return result, result.requests.column("status") == int(Status.FINISHED)


def check(cfg: RunConfig) -> dict:
    """One case's verdict: its margins (positive: the claim holds by that fraction), or why it was skipped."""
    if cfg.disaggregate:
        return check_pools(cfg)
    try:
        bound = bound_for_config(cfg)
    except ValueError as e:
        return {"verdict": "refused", "why": str(e)[:160]}
    result, done = run_case(cfg)
    if result is None:
        return done
    log = result.requests
    bt = build_replicas(cfg)[0].batch_time
    out = {"verdict": "ok", "finished": int(done.sum()), "offered": len(done), "bound_rps": bound.requests_per_s,
           "binding": bound.binding}
    if done.any():
        finished = throughput_bound(bt, log.column("prompt_len")[done], log.column("output_len")[done],
                                    engine_limits(cfg), bound.replicas)
        busy = sum(s["busy_time"] for s in result.replica_stats)
        least = finished.seconds_per_request * done.sum()
        out["busy_margin"] = busy / least - 1          # >= 0: busy time at least the least GPU time
        if out["busy_margin"] < -1e-9:
            out["verdict"] = "VIOLATION busy"
    if done.all():
        throughput = summarize(result)["throughput"]["requests_per_s"]
        out["throughput_rps"] = throughput
        out["rps_margin"] = 1 - throughput / bound.requests_per_s   # >= 0: throughput below the bound
        if out["rps_margin"] < -1e-9:
            out["verdict"] = "VIOLATION throughput"
    return out


def check_pools(cfg: RunConfig) -> dict:
    """A disaggregated run: each pool's busy time is at least its stage's least GPU time of the finished requests
    (the prompt and one token on the prefill pool; the prompt's last token and the decodes on the decode pool),
    the per-pool bound ``llmsched plan`` prunes with (plan/prune.py)."""
    from llmsched.fleet_setup import fleet_of, pool_configs
    from llmsched.theory.throughput_bound import engine_of
    configs = pool_configs(cfg, fleet_of(cfg))
    try:
        forms = {pool: engine_of(configs[pool]) for pool in ("prefill", "decode")}
        for bt, limits in forms.values():
            throughput_bound(bt, [100], [10], limits)
    except ValueError as e:
        return {"verdict": "refused", "why": str(e)[:160]}
    result, done = run_case(cfg)
    if result is None:
        return done
    log = result.requests
    out = {"verdict": "ok", "finished": int(done.sum()), "offered": len(done)}
    if not done.any():
        return out
    prompts, outputs = log.column("prompt_len")[done], log.column("output_len")[done]
    margins = {}
    for pool in ("prefill", "decode"):
        bt, limits = forms[pool]
        least = throughput_bound(bt, prompts, outputs, limits, stage=pool).seconds_per_request * done.sum()
        margins[pool] = result.fleet["pools"][pool]["busy_s"] / least - 1
    out["busy_margin"] = min(margins.values())
    out["pool_margins"] = margins
    if out["busy_margin"] < -1e-9:
        out["verdict"] = "VIOLATION pool busy"
    return out


def check_capacity_search(cfg: RunConfig) -> dict:
    """The capacity search on ``cfg`` (stability only): a capacity above the bound of its own probe at the 95% of
    work a stable probe serves raises SoundBoundViolation inside the search (capacity/sound_bound.py); for a
    disaggregated deployment, which that check skips, the capacity against the per-pool bound plan prunes with."""
    import re

    from llmsched.capacity.probe import probe_config
    from llmsched.capacity.rate_search import find_capacity
    from llmsched.capacity.sound_bound import SERVED_FRACTION, SoundBoundViolation
    from llmsched.fleet_setup import fleet_of, pool_configs
    from llmsched.theory.throughput_bound import config_lengths, engine_of
    base = cfg if cfg.concurrency is not None else dataclasses.replace(cfg, rate=1.0)
    try:
        result = find_capacity(base, [], resolution=0.05)
    except SoundBoundViolation as e:
        return {"verdict": "VIOLATION capacity", "why": str(e)[:300]}
    except ValueError as e:
        return {"verdict": "unfit", "why": str(e)[:160]}
    out = {"verdict": "ok", "capacity": result.capacity, "unit": result.unit,
           "overruled": "sound throughput bound" in result.note}
    if result.capacity is None or result.unit != "req/s":
        return out
    probe = probe_config(base, result.capacity, 0)
    if not cfg.disaggregate:
        try:
            bound = bound_for_config(probe, SERVED_FRACTION).requests_per_s
        except ValueError as e:
            return {**out, "why": str(e)[:160]}
    else:
        x, y = (int(v) for v in re.fullmatch(r"(\d+)P(\d+)D", cfg.disaggregate).groups())
        configs = pool_configs(probe, fleet_of(probe))
        prompts, outputs = config_lengths(probe)
        per_pool = []
        for pool, count in (("prefill", x), ("decode", y)):
            try:
                bt, limits = engine_of(configs[pool])
                per_pool.append(count * throughput_bound(bt, prompts, outputs, limits, 1, SERVED_FRACTION,
                                                         pool).per_replica_rps)
            except ValueError as e:
                return {**out, "why": str(e)[:160]}
        bound = min(per_pool)
    out.update(bound_rps=bound, cap_margin=1 - result.capacity / bound if bound else -1.0)
    if result.capacity > bound * (1 + 1e-9):
        out["verdict"] = "VIOLATION capacity above the bound"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write every case's config and verdict to this JSON file")
    ap.add_argument("--capacity", action="store_true", help="run a capacity search on each case instead of a "
                    "saturated run, and check the capacity against the bound")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    rows, bad = [], 0
    warnings.simplefilter("ignore")
    for i in range(args.cases):
        while True:
            try:
                cfg = draw(rng, args.requests)
                break
            except ValueError as e:  # a combination the run fields refuse: draw again
                print(f"    (redrawn: {str(e)[:120]})")
        t0 = time.time()
        try:
            verdict = check_capacity_search(cfg) if args.capacity else check(cfg)
        except Exception as e:  # a crash is a finding too: record it, go on
            verdict = {"verdict": f"CRASH {type(e).__name__}", "why": str(e)[:200]}
        verdict["wall_s"] = round(time.time() - t0, 1)
        label = (f"{cfg.model} {cfg.gpu} tp{cfg.tp} {cfg.batch_time} {cfg.scheduler} "
                 f"{cfg.trace or cfg.workload} M={cfg.max_num_batched_tokens} N={cfg.max_num_seqs} "
                 f"r={cfg.replicas} dp={cfg.dp} pc={int(cfg.prefix_caching)} {cfg.preemption_mode} "
                 f"kv={cfg.kv_cache_dtype} offload={cfg.kv_offload} pd={cfg.disaggregate}/{cfg.pd_first_token}/"
                 f"{cfg.kv_connector}/{cfg.decode_gpu} as={cfg.autoscaler} cl={cfg.concurrency} ten={bool(cfg.tenants)}")
        print(f"[{i}] {label}: {json.dumps(verdict)}", flush=True)
        bad += verdict["verdict"].startswith(("VIOLATION", "CRASH"))
        rows.append({"config": {k: v for k, v in dataclasses.asdict(cfg).items() if v is not None}, **verdict})
    ok = [r for r in rows if r["verdict"] == "ok"]
    for key in ("busy_margin", "rps_margin", "cap_margin"):
        vals = [r[key] for r in ok if key in r]
        if vals:
            print(f"{key}: {len(vals)} cases, worst {min(vals):.4f}, median {float(np.median(vals)):.4f}")
    counts = {}
    for r in rows:
        counts[r["verdict"].split(" ")[0]] = counts.get(r["verdict"].split(" ")[0], 0) + 1
    print("verdicts:", counts)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

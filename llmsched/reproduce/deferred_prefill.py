"""``llmsched reproduce deferred-prefill``: seed 004's Table 1 experiment in the simulator.

Granite-3.1-8B (C = 331) and Llama-3-8B (C = 410) on an A100, max_model_len 1024 (the context at which these C
are vLLM's maximum concurrency, spec §1.3), an always-backlogged closed loop of 2C requests, and a sweep of K.
Two timing sources, because the paper's fitted constants are not published:

* ``roofline`` — the foundation's batch-time model of that model on that GPU;
* ``paper`` — the spec's Appendix A constants, back-solved from Table 1's predicted optimum (13.09 at K = 26,
  21.04 at K = 58) and default throughput, as a linear batch-time model.

Two workloads: ``synthetic`` (285-token prompts, geometric outputs of mean 201, outputs cut at max_model_len as
a max_tokens limit would) and ``sharegpt`` (the sharegpt preset under the vLLM benchmark's filter at 1024
tokens). The prediction beside every measurement is Theorem 1 with the timing constants fitted to the same
batch-time model, α̂ = 1/(mean output) and d_0 = mean prompt of the workload (the paper's choices).
"""
from __future__ import annotations

import csv
import json
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..deferred.closed_loop import sweep
from ..deferred.lengths import BenchmarkFiltered
from ..deferred.throughput import exact_throughput, optimal_K
from ..deferred.timing import Timing, timing_from_batch_time
from ..experiment import RunConfig
from ..batchtime.registry import make_batch_time_model
from ..hardware.models import model as model_preset
from ..theory.deferred_prefill import APPENDIX_A
from ..workload.lengths import Capped, Geometric
from ..workload.presets import length_preset

NAME = "deferred-prefill"
HELP = "seed 004 Table 1: throughput and completion time vs K for Granite (C=331) and Llama-3 (C=410) on A100"

MAX_MODEL_LEN = 1024
MODELS = {"granite": ("granite-3.1-8b", 331, "g-exact"), "llama": ("llama-3-8b", 410, "l-exact")}
# Paper Table 1 (ShareGPT): (K, throughput) measured best, (K, throughput) predicted, default K = 1 throughput,
# normalised mean / P95 completion time at the measured optimum and at K = 1 (s/token).
PAPER = {"granite": {"measured": (32, 12.92), "predicted": (26, 13.09), "default": 11.38,
                     "opt_norm": (0.1161, 0.1656), "default_norm": (0.1230, 0.1400)},
         "llama": {"measured": (75, 17.24), "predicted": (58, 21.04), "default": 15.16,
                   "opt_norm": (0.1289, 0.210625), "default_norm": (0.1297, 0.149398)}}
FULL_K = (1, 2, 5, 10, 16, 20, 26, 32, 40, 58, 75, 100, 150, 200)
FAST_K = (1, 26)


def add_arguments(p) -> None:
    p.add_argument("--models", default="granite,llama", help="granite, llama (default both)")
    p.add_argument("--timings", default="roofline,paper", help="roofline, paper (default both)")
    p.add_argument("--workloads", default="synthetic,sharegpt", help="synthetic, sharegpt (default both)")
    p.add_argument("--K", default=None, help="thresholds, comma-separated (default a spread; K* is always added)")
    p.add_argument("--requests", type=int, default=None, help="requests per run (default 12·C; --fast 3·C + 1200)")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel processes (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fast", action="store_true", help="Granite, synthetic, K = 1, 26 and K*: seconds, for CI")
    p.add_argument("--out", default=None, help="write results.json and results.csv here")


def _names(text: str, known, what: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise ValueError(f"--{what} {text!r}: choose from {', '.join(known)}")
    return names


def workload(name: str):
    if name == "synthetic":
        return Capped(Geometric(285, 201), MAX_MODEL_LEN)
    return BenchmarkFiltered(length_preset("sharegpt"), MAX_MODEL_LEN)


def config(model_key: str, timing_name: str) -> tuple[RunConfig, Timing | None]:
    model, C, preset = MODELS[model_key]
    base = RunConfig(model=model, gpu="a100", max_num_seqs=C, max_model_len=MAX_MODEL_LEN,
                     max_num_batched_tokens=C * MAX_MODEL_LEN)   # a refill is one prefill step, as in eq. (1)
    if timing_name == "roofline":
        return base, None
    _, c_p, c_d, A = APPENDIX_A[preset]
    t = Timing.from_A(c_p, c_d, A, 1 / 201)
    bt = {"per_prefill": t.s_p, "extra": {"has_prefill": t.c_p, "has_decode": t.c_d, "per_decode": t.t_d}}
    return replace(base, batch_time="linear", batch_time_params=bt), t


def predict(cfg: RunConfig, timing: Timing | None, lengths, seed: int) -> dict:
    prompts, outputs = lengths.sample(200_000, np.random.default_rng(seed + 1))
    mean_prompt, mean_output = float(prompts.mean()), float(outputs.mean())
    alpha = 1 / mean_output
    C = cfg.max_num_seqs
    if timing is None:
        bt = make_batch_time_model(cfg.batch_time, model_preset(cfg.model), cfg.gpu, **cfg.batch_time_params)
        timing = timing_from_batch_time(bt, C, round(mean_prompt), alpha, cfg.max_num_batched_tokens).timing
    rho = exact_throughput(C, alpha, timing)
    return {"mean_prompt": mean_prompt, "mean_output": mean_output, "timing": timing.as_dict(),
            "K_star": optimal_K(rho), "rho": rho}


def _one(job):
    cfg, lengths, K, n, seed = job
    return sweep(cfg, lengths, [K], n, seed=seed)[0].as_dict()


def compute(args) -> list[dict]:
    if args.fast:
        models, timings, workloads = ["granite"], ["roofline", "paper"], ["synthetic"]
    else:
        models = _names(args.models, MODELS, "models")
        timings = _names(args.timings, ("roofline", "paper"), "timings")
        workloads = _names(args.workloads, ("synthetic", "sharegpt"), "workloads")
    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    grid = FAST_K if args.fast else FULL_K
    if args.K:
        try:
            grid = tuple(int(v) for v in args.K.split(","))
        except ValueError:
            raise ValueError(f"--K {args.K!r}: give comma-separated integers") from None
    plans, jobs = [], []
    for m in models:
        C = MODELS[m][1]
        n = args.requests or (3 * C + 1200 if args.fast else 12 * C)
        if n < 3 * C + 20:
            raise ValueError(f"--requests {n} is too few for C={C}: the closed loop holds 2C and the first C "
                             f"completions are warm-up; use at least {3 * C + 20}")
        for t in timings:
            cfg, timing = config(m, t)
            for w in workloads:
                lengths = workload(w)
                pred = predict(cfg, timing, lengths, args.seed)
                Ks = sorted({K for K in grid if 1 <= K <= C} | {1, pred["K_star"]})  # K = 1 is the baseline
                plans.append((m, t, w, C, pred, Ks))
                jobs += [(cfg, lengths, K, n, args.seed) for K in Ks]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            measured = list(pool.map(_one, jobs))
    else:
        measured = [_one(j) for j in jobs]
    out, i = [], 0
    for m, t, w, C, pred, Ks in plans:
        rows = measured[i:i + len(Ks)]
        i += len(Ks)
        for row in rows:
            row["predicted"] = float(pred["rho"][row["K"]])
        best = max(rows, key=lambda r: r["throughput"])
        at = {r["K"]: r for r in rows}
        out.append({"model": MODELS[m][0], "key": m, "C": C, "timing": t, "workload": w,
                    "mean_prompt": pred["mean_prompt"], "mean_output": pred["mean_output"],
                    "constants": pred["timing"], "K_star_predicted": pred["K_star"],
                    "rho_predicted_K_star": float(pred["rho"][pred["K_star"]]), "rho_predicted_1": float(pred["rho"][1]),
                    "K_star_measured": best["K"], "rho_measured_best": best["throughput"],
                    "rho_measured_at_predicted": at[pred["K_star"]]["throughput"], "rho_measured_1": at[1]["throughput"],
                    "rows": rows})
    return out


def run(args) -> int:
    results = compute(args)
    for r in results:
        paper = PAPER[r["key"]]
        print(f"\n{r['model']} C={r['C']}, {r['timing']} timing, {r['workload']} (mean prompt {r['mean_prompt']:.0f}, "
              f"output {r['mean_output']:.0f})")
        c = r["constants"]
        print(f"  constants: c_p {c['c_p'] * 1e3:.2f} ms, s_p {c['s_p'] * 1e3:.2f} ms, c_d {c['c_d'] * 1e3:.2f} ms, "
              f"t_d {c['t_d'] * 1e3:.4f} ms")
        print(f"  {'K':>4} {'thr req/s':>10} {'Thm 1':>8} {'err':>7} {'mean s':>8} {'norm mean':>10} {'norm p95':>9}")
        for row in r["rows"]:
            mark = " <- K* predicted" if row["K"] == r["K_star_predicted"] else ""
            if row["K"] == r["K_star_measured"]:
                mark += " <- best measured"
            print(f"  {row['K']:>4} {row['throughput']:>10.3f} {row['predicted']:>8.3f} "
                  f"{(row['throughput'] / row['predicted'] - 1) * 100:>+6.1f}% {row['mean_completion']:>8.2f} "
                  f"{row['mean_normalised']:>10.4f} {row['p95_normalised']:>9.4f}{mark}")
        gain = r["rho_measured_best"] / r["rho_measured_1"] - 1
        print(f"  measured best {r['rho_measured_best']:.2f} at K={r['K_star_measured']} (+{gain * 100:.1f}% over "
              f"K=1: {r['rho_measured_1']:.2f}); predicted {r['rho_predicted_K_star']:.2f} at K={r['K_star_predicted']} "
              f"(measured there {r['rho_measured_at_predicted']:.2f})")
        print(f"  paper (ShareGPT): measured {paper['measured'][1]} at K={paper['measured'][0]}, predicted "
              f"{paper['predicted'][1]} at K={paper['predicted'][0]}, default {paper['default']}")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({"results": results, "paper": PAPER}, indent=2) + "\n")
        with (out / "results.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "C", "timing", "workload", "K", "throughput", "predicted", "mean_completion",
                        "mean_normalised", "p95_normalised", "mean_running", "completions"])
            for r in results:
                for row in r["rows"]:
                    w.writerow([r["model"], r["C"], r["timing"], r["workload"], row["K"], row["throughput"],
                                row["predicted"], row["mean_completion"], row["mean_normalised"],
                                row["p95_normalised"], row["mean_running"], row["completions"]])
        print(f"\nwrote {out / 'results.json'} and {out / 'results.csv'}")
    return 0

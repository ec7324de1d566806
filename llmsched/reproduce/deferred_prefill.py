"""Mohanty et al.'s Table 1 experiment in the simulator (``llmsched reproduce deferred-prefill``,
llmsched/cli/reproduce_deferred_prefill.py).

Granite-3.1-8B (C = 331) and Llama-3-8B (C = 410) on an A100, max_model_len 1024 (the context at which these C
are vLLM's maximum concurrency), an always-backlogged closed loop of 2C requests, and a sweep of K.
Three timing sources, because the paper's fitted constants are not published:

* ``measured`` — step times rebuilt from measurements (``deferred.vllm_timing``): Vidur's A100 per-operator
  profile for the layers, the roofline's attention and LM head, vLLM's per-step host cost from public figures;
  on the paper's A100 PCIe. No constant in it comes from Table 1;
* ``roofline`` — the foundation's batch-time model of that model on that GPU;
* ``paper`` — the constants, back-solved from Table 1's predicted optimum (13.09 at K = 26,
  21.04 at K = 58) and default throughput, as a linear batch-time model (checks the scheduler, not the model).

``--parts sensitivity`` adds what the gain depends on (Theorem 1 around the measured Granite point: host cost,
c_p, C, mean output, prompt length) and theory against simulation on held-out workloads (lmsys, azure-conv).

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

from ..batchtime.registry import make_batch_time_model
from ..experiment import RunConfig
from ..hardware.models import model as model_preset
from ..schedulers.deferred.throughput import exact_throughput, optimal_K, prop1_throughput
from ..schedulers.deferred.timing_constants import Timing, timing_from_batch_time
from ..theory.deferred_prefill import APPENDIX_A
from ..workload.lengths.length_presets import length_preset
from ..workload.lengths.distributions import Capped, Geometric
from .deferred_prefill_runs.closed_loop import sweep
from .deferred_prefill_runs.measured_step_time import PROFILE, MeasuredVLLMStepTime, find_profile
from .deferred_prefill_runs.request_model import BenchmarkFiltered
from . import PINNED_KIND


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
TIMINGS = ("measured", "roofline", "paper")
WORKLOADS = ("synthetic", "sharegpt", "lmsys", "azure-conv")
PARTS = ("table", "sensitivity")
HELD_OUT = ("lmsys", "azure-conv")
SENSITIVITY_K = (1, 5, 10, 20, 40, 75)


def _names(text: str, known, what: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise ValueError(f"--{what} {text!r}: choose from {', '.join(known)}")
    return names


def workload(name: str):
    if name == "synthetic":
        return Capped(Geometric(285, 201), MAX_MODEL_LEN)
    return BenchmarkFiltered(length_preset(name), MAX_MODEL_LEN)


def config(model_key: str, timing_name: str, profile: str = PROFILE, host_scale: float = 1.0,
           C: int | None = None) -> tuple[RunConfig, Timing | None, MeasuredVLLMStepTime | None]:
    """(run config, the paper's constants or None, a batch-time model that replaces the config's or None)."""
    model, C_paper, preset = MODELS[model_key]
    C = C or C_paper
    gpu = "a100-pcie" if timing_name == "measured" else "a100"   # the paper's GPU (§4.1); roofline as before
    base = RunConfig(latency_boundary="engine", model=model, gpu=gpu, max_num_seqs=C, max_model_len=MAX_MODEL_LEN, batch_time=PINNED_KIND,
                     max_num_batched_tokens=C * MAX_MODEL_LEN)   # a refill is one prefill step, as in eq. (1)
    if timing_name == "roofline":
        return base, None, None
    if timing_name == "measured":
        return base, None, MeasuredVLLMStepTime(model, find_profile(profile), gpu, host_scale=host_scale)
    _, c_p, c_d, A = APPENDIX_A[preset]
    t = Timing.from_A(c_p, c_d, A, 1 / 201)
    bt = {"per_prefill": t.s_p, "extra": {"has_prefill": t.c_p, "has_decode": t.c_d, "per_decode": t.t_d}}
    return replace(base, batch_time="linear", batch_time_params=bt), t, None


def mean_lengths(lengths, seed: int) -> tuple[float, float]:
    prompts, outputs = lengths.sample(200_000, np.random.default_rng(seed + 1))
    return float(prompts.mean()), float(outputs.mean())


def fitted_timing(cfg: RunConfig, model, mean_prompt: float, alpha: float) -> Timing:
    """(c_p, s_p, c_d, t_d) fitted to the run's batch-time model, as the paper fits them to its engine."""
    if model is None:
        model = make_batch_time_model(cfg.batch_time, model_preset(cfg.model), cfg.gpu, **cfg.batch_time_params)
    return timing_from_batch_time(model, cfg.max_num_seqs, round(mean_prompt), alpha,
                                  cfg.max_num_batched_tokens).timing


def predict(cfg: RunConfig, timing: Timing | None, lengths, seed: int, model=None) -> dict:
    mean_prompt, mean_output = mean_lengths(lengths, seed)
    alpha = 1 / mean_output
    C = cfg.max_num_seqs
    if timing is None:
        timing = fitted_timing(cfg, model, mean_prompt, alpha)
    rho = exact_throughput(C, alpha, timing)
    return {"mean_prompt": mean_prompt, "mean_output": mean_output, "timing": timing.as_dict(),
            "K_star": optimal_K(rho), "rho": rho, "rho_prop1": prop1_throughput(C, alpha, timing)}


def _one(job):
    cfg, lengths, K, n, seed, model = job
    return sweep(cfg, lengths, [K], n, seed=seed, batch_time=model)[0].as_dict()


def _run_jobs(jobs: list, n_jobs: int) -> list[dict]:
    if n_jobs > 1:
        with ProcessPoolExecutor(n_jobs) as pool:
            return list(pool.map(_one, jobs))
    return [_one(j) for j in jobs]


def _grid(K: str | None, fast: bool) -> tuple[int, ...]:
    if not K:
        return FAST_K if fast else FULL_K
    try:
        return tuple(int(v) for v in K.split(","))
    except ValueError:
        raise ValueError(f"--K {K!r}: give comma-separated integers") from None


def compute(*, models: str = "granite,llama", timings: str = ",".join(TIMINGS),
            workloads: str = "synthetic,sharegpt", profile: str = PROFILE, K: str | None = None,
            requests: int | None = None, jobs: int = 1, seed: int = 0, fast: bool = False) -> list[dict]:
    """Table 1: for each of ``models`` × ``timings`` × ``workloads`` (comma-separated names), throughput and
    completion time measured at each K of the grid (``K``, comma-separated, or a spread) and K*, beside Theorem 1's
    prediction; ``fast`` runs Granite, synthetic, the roofline and paper timings only."""
    if fast:
        model_keys, timing_keys, workload_keys = ["granite"], ["roofline", "paper"], ["synthetic"]
    else:
        model_keys = _names(models, MODELS, "models")
        timing_keys = _names(timings, TIMINGS, "timings")
        workload_keys = _names(workloads, WORKLOADS, "workloads")
    if jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {jobs}")
    grid = _grid(K, fast)
    plans, runs = [], []
    for m in model_keys:
        C = MODELS[m][1]
        n = requests or (3 * C + 1200 if fast else 12 * C)
        if n < 3 * C + 20:
            raise ValueError(f"--requests {n} is too few for C={C}: the closed loop holds 2C and the first C "
                             f"completions are warm-up; use at least {3 * C + 20}")
        for t in timing_keys:
            cfg, timing, model = config(m, t, profile)
            for w in workload_keys:
                lengths = workload(w)
                pred = predict(cfg, timing, lengths, seed, model)
                Ks = sorted({k for k in grid if 1 <= k <= C} | {1, pred["K_star"]})  # K = 1 is the baseline
                plans.append((m, t, w, C, pred, Ks))
                runs += [(cfg, lengths, k, n, seed, model) for k in Ks]
    measured = _run_jobs(runs, jobs)
    out, i = [], 0
    for m, t, w, C, pred, Ks in plans:
        rows = measured[i:i + len(Ks)]
        i += len(Ks)
        for row in rows:
            row["predicted"] = float(pred["rho"][row["K"]])
            row["predicted_prop1"] = float(pred["rho_prop1"][row["K"]])
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


# --- sensitivity: what the gain depends on, and Theorem 1 on non-geometric workloads ---------------------------
SWEEPS = (("host cost ×", "host_scale", (0.0, 0.5, 1.0, 1.5, 2.0), 1.0),
          ("c_p ×", "cp_scale", (0.5, 1.0, 1.5, 2.0, 3.0), 1.0),
          ("C", "C", (83, 166, 331, 662), 331),
          ("mean output", "mean_output", (50, 100, 201, 402, 804), 201),
          ("prompt d_0", "prompt", (71, 142, 285, 570), 285))


def theory_point(profile: str, host_scale: float = 1.0, cp_scale: float = 1.0, C: int = 331,
                 mean_output: float = 201, prompt: int = 285) -> dict:
    """Theorem 1 for Granite with the measured timing, one quantity moved away from the paper's setting."""
    cfg, _, model = config("granite", "measured", profile, host_scale, C)
    t = fitted_timing(cfg, model, prompt, 1 / mean_output)
    t = replace(t, c_p=t.c_p * cp_scale)
    rho = exact_throughput(C, 1 / mean_output, t)
    K = optimal_K(rho)
    return {"K_star": K, "rho_1": float(rho[1]), "rho_K": float(rho[K]), "gain": float(rho[K] / rho[1] - 1),
            "r": t.c_p / t.c_d, **{k: v * 1e3 for k, v in t.as_dict().items()}}


def cp_for_gain(profile: str, target: float) -> dict:
    """The c_p multiplier (others as measured) at which Theorem 1's gain reaches ``target`` (bisection)."""
    lo, hi = 1.0, 1.0
    while theory_point(profile, cp_scale=hi)["gain"] < target and hi < 64:
        lo, hi = hi, hi * 2
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if theory_point(profile, cp_scale=mid)["gain"] < target else (lo, mid)
    return {"cp_scale": hi, **theory_point(profile, cp_scale=hi)}


def sensitivity(*, profile: str = PROFILE, requests: int | None = None, jobs: int = 1, seed: int = 0,
                fast: bool = False) -> dict:
    """What the gain depends on (Theorem 1 with one quantity moved), and theory against simulation on held-out
    workloads."""
    sweeps = []
    for label, key, values, base in SWEEPS:
        rows = [{"value": v, **theory_point(profile, **{key: v})} for v in values]
        at = {r["value"]: r["gain"] for r in rows}
        half, double = (min(values, key=lambda v: abs(v - base * f)) for f in (0.5, 2.0))
        sweeps.append({"quantity": label, "key": key, "base": base, "rows": rows,
                       "half_to_double": (at[half], at[double])})
    ranked = sorted(sweeps, key=lambda x: -abs(x["half_to_double"][1] - x["half_to_double"][0]))
    C = MODELS["granite"][1]
    n = requests or (3 * C + 1200 if fast else 12 * C)
    cfg, _, model = config("granite", "measured", profile)
    plans, runs = [], []
    for w in ("synthetic", "sharegpt", *HELD_OUT):
        lengths = workload(w)
        pred = predict(cfg, None, lengths, seed, model)
        t = Timing(**pred["timing"])
        linear = replace(cfg, batch_time="linear", batch_time_params={
            "per_prefill": t.s_p, "extra": {"has_prefill": t.c_p, "has_decode": t.c_d, "per_decode": t.t_d}})
        Ks = sorted({K for K in ((1,) if fast else SENSITIVITY_K) if K <= C} | {pred["K_star"]})
        plans.append((w, pred, Ks))
        runs += [(cfg, lengths, K, n, seed, model) for K in Ks]
        runs += [(linear, lengths, K, n, seed, None) for K in Ks]
    measured = _run_jobs(runs, jobs)
    held, i = [], 0
    for w, pred, Ks in plans:
        rows, lin = measured[i:i + len(Ks)], measured[i + len(Ks):i + 2 * len(Ks)]
        i += 2 * len(Ks)
        for row, row_lin in zip(rows, lin):
            row["linear_throughput"] = row_lin["throughput"]
            row["predicted"] = float(pred["rho"][row["K"]])
            row["predicted_prop1"] = float(pred["rho_prop1"][row["K"]])
        best = max(rows, key=lambda r: r["throughput"])
        one = next(r for r in rows if r["K"] == 1)
        best_lin = max(rows, key=lambda r: r["linear_throughput"])
        held.append({"workload": w, "mean_prompt": pred["mean_prompt"], "mean_output": pred["mean_output"],
                     "K_star_predicted": pred["K_star"], "constants": pred["timing"],
                     "gain_predicted": float(pred["rho"][pred["K_star"]] / pred["rho"][1] - 1),
                     "gain_measured": best["throughput"] / one["throughput"] - 1, "K_best": best["K"],
                     "gain_linear": best_lin["linear_throughput"] / one["linear_throughput"] - 1,
                     "K_best_linear": best_lin["K"], "rows": rows})
    return {"sweeps": sweeps, "most_sensitive": ranked[0]["quantity"],
            "paper_gain_needs": cp_for_gain(profile, 0.135), "held_out": held}


def print_sensitivity(sens: dict) -> None:
    print("\nSensitivity of the gain ρ(K*)/ρ(1) − 1 (Theorem 1, Granite, measured timing; one quantity moved, the "
          "rest at the paper's setting: C 331, d_0 285, geometric outputs of mean 201, host cost ×1)")
    print(f"  {'quantity':<12} {'value':>7} {'K*':>4} {'ρ(1)':>7} {'ρ(K*)':>7} {'gain':>7} {'c_p ms':>7} "
          f"{'c_d ms':>7} {'r=c_p/c_d':>9}")
    for sweep_ in sens["sweeps"]:
        for r in sweep_["rows"]:
            mark = " <- paper's setting" if r["value"] == sweep_["base"] else ""
            print(f"  {sweep_['quantity']:<12} {r['value']:>7g} {r['K_star']:>4} {r['rho_1']:>7.2f} {r['rho_K']:>7.2f} "
                  f"{r['gain'] * 100:>+6.1f}% {r['c_p']:>7.2f} {r['c_d']:>7.2f} {r['r']:>9.2f}{mark}")
    print("  gain at half / double the paper's value:")
    for sweep_ in sorted(sens["sweeps"], key=lambda x: -abs(x["half_to_double"][1] - x["half_to_double"][0])):
        lo, hi = sweep_["half_to_double"]
        print(f"    {sweep_['quantity']:<12} {lo * 100:+.1f}% -> {hi * 100:+.1f}%  ({(hi - lo) * 100:+.1f} points)")
    print(f"  most sensitive: {sens['most_sensitive']}")
    need = sens["paper_gain_needs"]
    print(f"  the paper's +13.5% needs c_p = {need['c_p']:.1f} ms (×{need['cp_scale']:.2f} the measured timing's; "
          f"r = {need['r']:.2f}, K* = {need['K_star']}) with c_d, t_d, s_p as measured")
    print("\nTheorem 1 (α̂ = 1/mean output, d_0 = mean prompt) against simulation, Granite C=331: 'measured' simulates "
          "the measured step times, 'linear' the paper's model of them (c_p + s_p·n, c_d + t_d·X with the fitted "
          "constants), so its error is that of the length distribution alone (synthetic = geometric control; "
          "lmsys and azure-conv held out)")
    for h in sens["held_out"]:
        print(f"  {h['workload']} (mean prompt {h['mean_prompt']:.0f}, output {h['mean_output']:.0f}): K* predicted "
              f"{h['K_star_predicted']}, gain predicted {h['gain_predicted'] * 100:+.1f}%, simulated "
              f"{h['gain_measured'] * 100:+.1f}% (best K={h['K_best']}), linear {h['gain_linear'] * 100:+.1f}% "
              f"(best K={h['K_best_linear']})")
        print(f"    {'K':>4} {'measured':>9} {'linear':>8} {'Thm 1':>8} {'err meas':>9} {'err lin':>8} {'Prop 1':>8}")
        for row in h["rows"]:
            print(f"    {row['K']:>4} {row['throughput']:>9.3f} {row['linear_throughput']:>8.3f} {row['predicted']:>8.3f} "
                  f"{(row['throughput'] / row['predicted'] - 1) * 100:>+8.1f}% "
                  f"{(row['linear_throughput'] / row['predicted'] - 1) * 100:>+7.1f}% {row['predicted_prop1']:>8.3f}")


def summary(results: list[dict]) -> None:
    """Table 1's layout, one row per (model, timing, workload)."""
    print("\nSummary (Table 1 layout; ρ in requests/s, normalised completion times in s/token)")
    print(f"  {'model':<15} {'timing':<9} {'workload':<10} {'best ρ':>7} {'at K':>5} {'pred ρ':>7} {'K*':>4} "
          f"{'ρ(1)':>7} {'gain':>7} {'pred gain':>9} {'mean/p95 best':>15} {'mean/p95 K=1':>15}")
    for r in results:
        best = next(x for x in r["rows"] if x["K"] == r["K_star_measured"])
        one = next(x for x in r["rows"] if x["K"] == 1)
        gain = r["rho_measured_best"] / r["rho_measured_1"] - 1
        pred_gain = r["rho_predicted_K_star"] / r["rho_predicted_1"] - 1
        print(f"  {r['model']:<15} {r['timing']:<9} {r['workload']:<10} {r['rho_measured_best']:>7.2f} "
              f"{r['K_star_measured']:>5} {r['rho_predicted_K_star']:>7.2f} {r['K_star_predicted']:>4} "
              f"{r['rho_measured_1']:>7.2f} {gain * 100:>+6.1f}% {pred_gain * 100:>+8.1f}% "
              f"{best['mean_normalised']:>7.4f}/{best['p95_normalised']:.4f} "
              f"{one['mean_normalised']:>7.4f}/{one['p95_normalised']:.4f}")
    print("  paper Table 1 (ShareGPT, vLLM 0.6.3, A100 PCIe): Granite best 12.92 at K=32, predicted 13.09 at K=26, "
          "ρ(1) 11.38, +13.5%; Llama-3 best 17.24 at K=75, predicted 21.04 at K=58, ρ(1) 15.16, +13.7%")


def reproduce(*, parts: str = ",".join(PARTS), models: str = "granite,llama", timings: str = ",".join(TIMINGS),
              workloads: str = "synthetic,sharegpt", profile: str = PROFILE, K: str | None = None,
              requests: int | None = None, jobs: int = 1, seed: int = RunConfig.seed, fast: bool = False,
              out: str | None = None) -> dict:
    """The chosen ``parts`` (table, sensitivity; ``fast`` with the default parts: the table only), printed and
    written to ``out`` (results.json, results.csv)."""
    chosen = _names(parts, PARTS, "parts") if not (fast and parts == ",".join(PARTS)) else ["table"]
    common = dict(profile=profile, requests=requests, jobs=jobs, seed=seed, fast=fast)
    results = compute(models=models, timings=timings, workloads=workloads, K=K, **common) if "table" in chosen else []
    for r in results:
        paper = PAPER[r["key"]]
        print(f"\n{r['model']} C={r['C']}, {r['timing']} timing, {r['workload']} (mean prompt {r['mean_prompt']:.0f}, "
              f"output {r['mean_output']:.0f})")
        c = r["constants"]
        print(f"  constants: c_p {c['c_p'] * 1e3:.2f} ms, s_p {c['s_p'] * 1e3:.2f} ms, c_d {c['c_d'] * 1e3:.2f} ms, "
              f"t_d {c['t_d'] * 1e3:.4f} ms")
        print(f"  {'K':>4} {'thr req/s':>10} {'Thm 1':>8} {'err':>7} {'Prop 1':>8} {'mean s':>8} {'norm mean':>10} "
              f"{'norm p95':>9}")
        for row in r["rows"]:
            mark = " <- K* predicted" if row["K"] == r["K_star_predicted"] else ""
            if row["K"] == r["K_star_measured"]:
                mark += " <- best measured"
            print(f"  {row['K']:>4} {row['throughput']:>10.3f} {row['predicted']:>8.3f} "
                  f"{(row['throughput'] / row['predicted'] - 1) * 100:>+6.1f}% {row['predicted_prop1']:>8.3f} "
                  f"{row['mean_completion']:>8.2f} "
                  f"{row['mean_normalised']:>10.4f} {row['p95_normalised']:>9.4f}{mark}")
        gain = r["rho_measured_best"] / r["rho_measured_1"] - 1
        print(f"  measured best {r['rho_measured_best']:.2f} at K={r['K_star_measured']} (+{gain * 100:.1f}% over "
              f"K=1: {r['rho_measured_1']:.2f}); predicted {r['rho_predicted_K_star']:.2f} at K={r['K_star_predicted']} "
              f"(measured there {r['rho_measured_at_predicted']:.2f})")
        print(f"  paper (ShareGPT): measured {paper['measured'][1]} at K={paper['measured'][0]}, predicted "
              f"{paper['predicted'][1]} at K={paper['predicted'][0]}, default {paper['default']}")
    if results:
        summary(results)
    sens = sensitivity(**common) if "sensitivity" in chosen else None
    if sens:
        print_sensitivity(sens)
    if out:
        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps({"results": results, "sensitivity": sens, "paper": PAPER},
                                                        indent=2) + "\n")
        with (folder / "results.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "C", "timing", "workload", "K", "throughput", "predicted", "mean_completion",
                        "mean_normalised", "p95_normalised", "mean_running", "completions"])
            for r in results:
                for row in r["rows"]:
                    w.writerow([r["model"], r["C"], r["timing"], r["workload"], row["K"], row["throughput"],
                                row["predicted"], row["mean_completion"], row["mean_normalised"],
                                row["p95_normalised"], row["mean_running"], row["completions"]])
        print(f"\nwrote {folder / 'results.json'} and {folder / 'results.csv'}")
    return {"results": results, "sensitivity": sens}

"""``llmsched theory deferred-prefill``: exact ρ(K) (Theorem 1), Prop. 1 and the optimal threshold K* of deferred
prefill (Mohanty et al., seed 004)."""
from __future__ import annotations

import json

import numpy as np

from ..argtypes import count
from ..batchtime.registry import make_batch_time_model
from ..hardware.models import model as model_preset
from ..schedulers.deferred.k_star import alpha_from_mean_output
from ..schedulers.deferred.renewal import check_K, cycle_stats
from ..schedulers.deferred.throughput import exact_throughput, optimal_K, prop1_throughput, r_interval
from ..schedulers.deferred.timing_constants import Timing, timing_from_batch_time, timing_from_steps

NAME = "deferred-prefill"
HELP = ("Mohanty et al. (seed 004): throughput ρ(K) of refilling after K departures (Theorem 1, Prop. 1) and "
        "the optimal K*")

# Spec Appendix A: constants back-solved from the paper's Table 1 (not published by the paper). (C, c_p, c_d, A)
APPENDIX_A = {"g-exact": (331, 0.02725, 0.03733, 0.05183), "g-approx": (331, 0.01239, 0.01797, 0.06458),
              "l-exact": (410, 0.01650, 0.00652, 0.04381), "l-approx": (410, 0.00674, 0.00275, 0.04596)}
DEFAULT_K = (1, 2, 5, 10, 26, 32, 58, 75, 100, 200)


def add_arguments(p) -> None:
    p.add_argument("--C", type=count, default=None, help="batch size (default 331, or the preset's)")
    p.add_argument("--mean-output", type=float, default=201.0,
                   help="mean output tokens; α = 1/mean (default 201, the paper's)")
    p.add_argument("--prompt", type=count, default=285, help="prompt tokens d_0 (default 285, the paper's)")
    src = p.add_argument_group("timing constants (one source; default: fitted to --model/--gpu/--batch-time)")
    src.add_argument("--preset", choices=sorted(APPENDIX_A),
                     help="the spec's Appendix A constants, back-solved from Table 1 (sets C)")
    src.add_argument("--timing", metavar="C_P,S_P,C_D,T_D", help="explicit constants in seconds")
    src.add_argument("--steps", metavar="STEPS_CSV", help="fit to measured steps (a steps.csv of a non-mixing "
                                                           "scheduler, e.g. deferred-prefill or vllm)")
    src.add_argument("--model", default="llama-3-8b", help="model preset (default llama-3-8b)")
    src.add_argument("--gpu", default="a100", help="GPU preset (default a100)")
    src.add_argument("--batch-time", default="roofline", help="batch-time model kind (default roofline)")
    src.add_argument("--max-num-batched-tokens", type=count, default=None,
                     help="token budget that splits a refill into steps (default: one step per refill)")
    p.add_argument("--K", default=None, help="thresholds to tabulate, comma-separated (default a spread plus K*)")
    p.add_argument("--json", action="store_true", help="print JSON")


def compute(args) -> dict:
    alpha = alpha_from_mean_output(args.mean_output)
    fit = None
    if sum(x is not None for x in (args.preset, args.timing, args.steps)) > 1:
        raise ValueError("give one timing source: --preset, --timing or --steps (or none, to fit --model/--gpu)")
    if args.preset:
        C_pre, c_p, c_d, A = APPENDIX_A[args.preset]
        C = args.C or C_pre
        timing = Timing.from_A(c_p, c_d, A, alpha)
        source = f"spec Appendix A '{args.preset}' (back-solved from the paper's Table 1; only A = t_d/α + s_p counts)"
    elif args.timing:
        try:
            values = [float(v) for v in args.timing.split(",")]
            if len(values) != 4:
                raise ValueError
        except ValueError:
            raise ValueError(f"--timing {args.timing!r}: give four numbers C_P,S_P,C_D,T_D in seconds") from None
        C, timing, source = args.C or 331, Timing(*values), "given"
    elif args.steps:
        fit = timing_from_steps(args.steps)
        C, timing, source = args.C or 331, fit.timing, fit.source
    else:
        C = args.C or 331
        bt = make_batch_time_model(args.batch_time, model_preset(args.model), args.gpu)
        fit = timing_from_batch_time(bt, C, args.prompt, alpha, args.max_num_batched_tokens)
        timing, source = fit.timing, fit.source
    stats = cycle_stats(C, alpha)
    rho = exact_throughput(C, alpha, timing, stats)
    approx = prop1_throughput(C, alpha, timing)
    K_star, K_prop1 = optimal_K(rho), optimal_K(approx)
    Ks = DEFAULT_K if args.K is None else _parse_K(args.K)
    Ks = sorted({check_K(K, C) for K in Ks if K <= C or args.K is not None} | {1, K_star, K_prop1, C})
    r = timing.c_p / timing.c_d if timing.c_d > 0 else float("inf")
    out = {"C": C, "alpha": alpha, "mean_output": args.mean_output, "timing": timing.as_dict(),
           "timing_source": source, "r": r, "A": timing.t_d / alpha + timing.s_p,
           "K_star": K_star, "rho_K_star": float(rho[K_star]), "rho_1": float(rho[1]),
           "gain": float(rho[K_star] / rho[1]), "K_star_prop1": K_prop1,
           "r_interval_for_K_star": list(r_interval(C, alpha, K_star, r_max=max(1e3, 10 * r))),
           "table": [{"K": K, "E_N": float(stats.iterations[K]), "E_D": float(stats.departures[K]),
                      "rho": float(rho[K]), "rho_prop1": None if np.isnan(approx[K]) else float(approx[K])}
                     for K in Ks]}
    if fit is not None:
        out["fit"] = {"prompt_len": fit.prompt_len, "prefill": fit.prefill.as_dict(), "decode": fit.decode.as_dict()}
    return out


def _parse_K(text: str) -> list[int]:
    try:
        return [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--K {text!r}: give comma-separated integers, e.g. 1,26,32") from None


def run(args) -> int:
    out = compute(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    t = out["timing"]
    print(f"C = {out['C']}, α = 1/{out['mean_output']:g}; timing from {out['timing_source']}")
    print(f"c_p = {t['c_p'] * 1e3:.3f} ms, s_p = {t['s_p'] * 1e3:.3f} ms/prompt, c_d = {t['c_d'] * 1e3:.3f} ms, "
          f"t_d = {t['t_d'] * 1e3:.4f} ms/prompt; r = c_p/c_d = {out['r']:.3f}, A = t_d/α + s_p = "
          f"{out['A'] * 1e3:.2f} ms")
    if "fit" in out:
        f = out["fit"]
        print(f"fit R²: prefill {f['prefill']['r2']:.4f}, decode {f['decode']['r2']:.4f}")
    lo, hi = out["r_interval_for_K_star"]
    print(f"K* = {out['K_star']} (exact Theorem 1; argmax for r in [{lo:.3f}, {hi:.3f})), Prop. 1 gives "
          f"{out['K_star_prop1']}; ρ(K*) = {out['rho_K_star']:.3f} vs ρ(1) = {out['rho_1']:.3f} req/s "
          f"(+{(out['gain'] - 1) * 100:.1f}%)")
    print(f"{'K':>5} {'E N_1':>9} {'E D':>9} {'rho exact':>10} {'rho Prop1':>10}")
    for row in out["table"]:
        p1 = "-" if row["rho_prop1"] is None else f"{row['rho_prop1']:.3f}"
        mark = "  <- K*" if row["K"] == out["K_star"] else ""
        print(f"{row['K']:>5} {row['E_N']:>9.4f} {row['E_D']:>9.4f} {row['rho']:>10.3f} {p1:>10}{mark}")
    return 0

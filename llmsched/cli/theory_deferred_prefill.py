"""``llmsched theory deferred-prefill``: exact ρ(K) (Theorem 1), Prop. 1 and the optimal threshold K* of deferred
prefill (Mohanty et al.); llmsched/theory/deferred_prefill.py computes them."""
from __future__ import annotations

from ..theory.deferred_prefill import APPENDIX_A, compute
from .argtypes import count
from .package_commands import run_field_option, run_field_options

FUNCTION = compute


def add_arguments(p) -> None:
    p.add_argument("--C", type=count, default=None, help="batch size (default 331, or the preset's)")
    p.add_argument("--mean-output", type=float, default=201.0,
                   help="mean output tokens; α = 1/mean (default 201, the paper's)")
    p.add_argument("--prompt", type=count, default=285, help="prompt tokens d_0 (default 285, the paper's)")
    src = p.add_argument_group("timing constants (one source; default: fitted to --model/--gpu/--batch-time)")
    src.add_argument("--preset", choices=sorted(APPENDIX_A),
                     help="constants back-solved from Table 1 (sets C)")
    src.add_argument("--timing", metavar="C_P,S_P,C_D,T_D", help="explicit constants in seconds")
    src.add_argument("--steps", metavar="STEPS_CSV", help="fit to measured steps (a steps.csv of a non-mixing "
                                                           "scheduler, e.g. deferred-prefill or vllm)")
    run_field_options(src, "model", "gpu", "batch_time")
    run_field_option(src, "max_num_batched_tokens", "token budget that splits a refill into steps (default: one step "
                                                    "per refill)")
    p.add_argument("--K", default=None, help="thresholds to tabulate, comma-separated (default a spread plus K*)")


def print_text(out, args) -> int:
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

"""``llmsched theory rad-bound``: Bari et al.'s Theorem 1 figure r/T̄ᴿ and Theorem 2's condition on n, beside the
sound throughput bound; llmsched/theory/rad_bound.py computes them."""
from __future__ import annotations

from ..theory.rad_bound import compute
from .argtypes import count
from .package_commands import run_field_option, run_field_options

FUNCTION = compute


def add_arguments(p) -> None:
    run_field_options(p, "workload", "model")
    run_field_option(p, "gpu", "GPU preset (default %(default)s); its tile gives t*_col and t*_lcm")
    run_field_option(p, "batch_time", "batch-time model kind, as the simulator's --batch-time (default %(default)s)")
    run_field_option(p, "replicas", "r, identical replicas (default %(default)s)")
    run_field_option(p, "max_total_tokens", "cap prompt+output (as the simulator)")
    p.add_argument("--tile-prompts", action="store_true",
                   help="round prompts up to a multiple of t*_lcm (the paper's Assumption 3)")
    p.add_argument("--convention", choices=("engine", "theory"), default="engine",
                   help="engine: L^D−1 decodes (the simulator); theory: L^D decodes (the paper's count)")
    p.add_argument("--samples", type=int, default=20000, help="Monte-Carlo samples of the lengths (default 20000)")
    run_field_option(p, "seed")
    p.add_argument("--n", type=count, default=None, help="RAD's cycle parameter: check Theorem 2 at --rate")
    run_field_option(p, "rate", "arrival rate (req/s) for the Theorem 2 check")


def print_text(out, args) -> int:
    print(f"{out['model']} on {out['gpu']} ({out['batch_time']}), {out['workload']} lengths "
          f"(mean prompt {out['mean_prompt']:.0f}, output {out['mean_output']:.0f}; {out['samples']} samples)")
    print(f"tiles: t*_col = {out['t_col']}, t*_lcm = {out['t_lcm']}; decode count: {out['convention']}")
    print(f"T̄ᴿ = {out['t_bar'] * 1e3:.2f} ms (± {out['t_bar_stderr'] * 1e3:.2f}) of one GPU per request")
    print(f"RAD's regime r/T̄ᴿ = {out['capacity_rps']:.4g} req/s with r = {out['replicas']} "
          f"({out['per_replica_rps']:.4g} per replica): Theorem 1's capacity only in the paper's cost model "
          f"(eq. 7); under {out['batch_time']} a batcher that amortises the per-step cost can serve more")
    print(f"sound bound (any scheduler, {out['batch_time']}, default engine limits) = "
          f"{out['sound_bound_rps']:.4g} req/s ({out['sound_bound']['binding']} sets the steps; "
          f"`llmsched theory throughput-bound`)")
    print(f"T^max (eq. 14) = {out['t_max']:.4g} s")
    if "theorem2" in out:
        t2 = out["theorem2"]
        need = f"n > {t2['min_n']:.4g}" if t2["min_n"] is not None else "no n (λT̄ᴿ ≥ r: unstable, Theorem 1)"
        print(f"Theorem 2 at λ = {t2['rate']:g} req/s: ε = {t2['eps']:.4g}, needs {need}; n = {t2['n']} "
              f"{'satisfies' if t2['holds'] else 'does not satisfy'} it")
    return 0

"""``llmsched theory fluid``: Ao et al.'s fluid equilibrium, WAIT's feasible thresholds and Nested WAIT's buffer;
llmsched/theory/fluid.py computes them."""
from __future__ import annotations

from ..schedulers.wait.synthetic_workloads import WAIT_WORKLOADS
from ..theory.fluid import compute
from .argtypes import count, non_negative, positive, probability
from .package_commands import run_field_option

FUNCTION = compute


def add_arguments(p) -> None:
    src = p.add_argument_group("prompt types (one source)")
    src.add_argument("--types", help="RATE:PROMPT:DECODE,... in the paper's units (l' decode iterations), e.g. "
                                     "'20:10:10,10:10:20'")
    src.add_argument("--workload", help=f"a WAIT workload ({', '.join(WAIT_WORKLOADS)}), a length preset or a "
                                        "trace file, binned into types by output length")
    p.add_argument("--rate", type=positive, default=None, help="total arrival rate (prompts/s) for --workload; "
                                                            "rescales a WAIT workload")
    p.add_argument("--bins", type=count, default=10, help="equal-share output bins for --workload (default 10)")
    p.add_argument("--edges", help="output-length bin edges in tokens for --workload, e.g. 50,100,...,500")
    t = p.add_argument_group("iteration time d0 + d1·KV tokens (default: fitted to --model/--gpu)")
    t.add_argument("--d0", type=positive, help="seconds per iteration")
    t.add_argument("--d1", type=non_negative, help="seconds per KV token in the batch")
    run_field_option(t, "model", "model preset (default %(default)s, the paper's)")
    run_field_option(t, "gpu", "GPU preset (default %(default)s, the paper's)")
    run_field_option(t, "batch_time", "batch-time model fitted (default %(default)s)")
    p.add_argument("--memory", type=positive, help="KV memory M in tokens: WAIT's feasible cycle times")
    p.add_argument("--batch-cap", type=count, default=None, help="B: thresholds by the experiments' rule")
    p.add_argument("--delta", type=probability, default=0.01, help="Nested WAIT overflow probability δ (default 0.01)")
    p.add_argument("--horizon", type=positive, help="horizon T in seconds for the buffer (default %(default)g)")


def print_text(out, args) -> int:
    eq, tm = out["equilibrium"], out["timing"]
    print(f"iteration time: d0 = {tm['d0'] * 1e3:.4g} ms, d1 = {tm['d1'] * 1e6:.4g} µs/token ({tm['source']})")
    if "simulate_with" in tm:
        print(f"  fit: {tm['fit']}\n  simulate with: {tm['simulate_with']}")
    if "warning" in tm:
        print(f"  warning: {tm['warning']}")
    print(f"ρ = d1·Σλc = {eq['rho']:.4g} (< 1: stable)   T* = {eq['T'] * 1e3:.4g} ms   M* = {eq['M']:.6g} tokens   "
          f"Thp* = {eq['throughput']:.6g} decode tokens/s")
    sound = out.get("sound_bound")
    if sound and sound["requests_per_s"] is not None:
        print(f"sound throughput bound ({tm['source'].removeprefix('fit to ')}, any scheduler, default engine limits, "
              f"{sound['served_fraction']:g} of the work served): {sound['requests_per_s']:.4g} req/s against "
              f"{sound['rate']:.4g} req/s offered"
              + ("; ABOVE it: no scheduler keeps up in the simulator's model, though eq. (1)'s fit calls it stable"
                 if sound["above"] else ""))
    elif sound:
        print(f"no sound throughput bound: {sound['why']}")
    print(f"{'type':>4} {'rate':>10} {'l':>6} {'l_dec':>6} {'c_j':>12} {'n*_j':>10}")
    for j, ((lam, l, lp), c, n) in enumerate(zip(out["types"], eq["c"], eq["n"])):
        print(f"{j:>4} {lam:>10.4g} {l:>6} {lp:>6} {c:>12.6g} {n:>10.4g}")
    if "wait_feasible" in out:
        w = out["wait_feasible"]
        print("WAIT feasible thresholds: none (M < M*)" if w is None else
              f"WAIT feasible cycle times τ ∈ [{w['tau_min'] * 1e3:.4g}, {w['tau_max'] * 1e3:.4g}] ms "
              f"(n_j = λ_j τ)")
    if "wait_thresholds" in out:
        print(f"WAIT thresholds (batch cap B): {out['wait_thresholds']}")
    nm = out["nested_memory"]
    print(f"Nested WAIT thresholds n_s: {out['nested_thresholds']}")
    print(f"  peak M(n) = {nm['peak']:.6g} tokens, buffer = {nm['buffer']:.6g}, total (14) = {nm['total']:.6g} "
          f"for δ = {args.delta} over {args.horizon:g} s; drift (12) strict: {all(nm['drift_ok'])}")
    return 0

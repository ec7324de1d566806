"""``llmsched theory optimal-schedule``: the minimum-latency offline schedule of a few requests (Kim et al. §3); llmsched/theory/optimal_schedule.py solves it."""
from __future__ import annotations

import json

from ..batchtime.linear import INFERMAX_COEFFICIENTS
from ..theory.optimal_schedule import solve
from .argtypes import count, positive
from .package_commands import keywords

FUNCTION = solve


def add_arguments(p) -> None:
    src = p.add_argument_group("requests (all arrive at t = 0)")
    src.add_argument("--requests", help="I:O pairs, comma-separated, e.g. '2:4,2:4,2:4'")
    src.add_argument("--input", type=count, dest="prompt", metavar="INPUT",
                     help="prompt length I of every request (with --output, --count)")
    src.add_argument("--output", type=count, default=4, help="output length O, first token included (default 4)")
    src.add_argument("--count", type=count, default=4, help="number of requests B (default 4, as §5.1)")
    p.add_argument("--kv-slots", type=count, help="KV slots M in tokens (default max(2·max I, max I+O-1), as §5.1)")
    p.add_argument("--batch-tokens", type=count, default=4096, help="tokens per batch C (default 4096)")
    p.add_argument("--prefill-tokens", type=count, help="prefill tokens per batch P (default C)")
    p.add_argument("--cost", default="llama-2-7b/a100", choices=sorted(INFERMAX_COEFFICIENTS),
                   help="InferMax's cost-model coefficients (default llama-2-7b/a100)")
    p.add_argument("--time-limit", type=positive, default=30.0,
                   help="CP-SAT deterministic time limit (about seconds of one core; the same work on any machine, "
                        "so two runs agree; default 30)")
    p.add_argument("--workers", type=count, default=1,
                   help="CP-SAT workers (default 1; more run an interleaved search, still deterministic)")
    p.add_argument("--horizon", type=count, help="most batches a schedule may use (default: enough for every schedule "
                                               "better than the best heuristic, so 'optimal' is over all schedules)")
    p.add_argument("--no-chunking", dest="chunking", action="store_false",
                   help="only schedules that process a request's whole pending tokens at once (faster)")
    p.add_argument("--brute-force", action="store_true", help="also search exhaustively (tiny instances only)")
    p.add_argument("--json", action="store_true", help="print JSON")


def run(args) -> int:
    report = solve(**keywords(args, "json"))
    instance = report.instance
    csp = report.csp
    if args.json:
        out = {"instance": {"inputs": instance.inputs, "outputs": instance.outputs, "M": instance.kv_slots,
                            "C": instance.batch_tokens, "P": instance.P},
               "status": csp.status, "latency_s": csp.latency, "bound_s": csp.bound, "gap": csp.gap,
               "horizon": csp.horizon, "solve_s": csp.solve_seconds, "message": csp.message,
               "deterministic_time": csp.stats.get("deterministic_time"),
               "proof_covers_all_schedules": csp.stats.get("horizon_covers_J_ub"),
               "schedule": csp.schedule.describe(instance) if csp.schedule else None,
               "evictions": csp.schedule.num_evictions if csp.schedule else None,
               "heuristics": {h.name: {"latency_s": h.latency, "evictions": h.evictions} for h in report.heuristics}}
        if report.whole_pass:
            out["whole_pass_optimum_s"] = report.whole_pass[0]
        if report.notes:
            out["notes"] = report.notes
        if report.brute_force:
            out["brute_force_optimum_s"] = report.brute_force[0]
        print(json.dumps(out, indent=2))
        return 0 if csp.schedule else 1
    print(f"requests (I, O): {list(zip(instance.inputs, instance.outputs))}; M = {instance.kv_slots}, "
          f"C = {instance.batch_tokens}, P = {instance.P}; cost model: InferMax {args.cost}")
    for h in sorted(report.heuristics, key=lambda h: h.latency):
        print(f"  {h.name:<24} {h.latency * 1e3:10.3f} ms  ({h.evictions} evictions)")
    if report.whole_pass:
        print(f"  {'exact, whole passes':<24} {report.whole_pass[0] * 1e3:10.3f} ms  "
              f"({report.whole_pass[1].num_evictions} evictions; exhaustive search)")
    for note in report.notes:
        print(f"  ({note})")
    if report.brute_force:
        print(f"  {'exact, brute force':<24} {report.brute_force[0] * 1e3:10.3f} ms  "
              f"({report.brute_force[1].num_evictions} evictions; exhaustive search)")
    if csp.schedule is None:
        print(f"CP-SAT: {csp.status}: {csp.message}")
        return 1
    scope = "over all schedules" if csp.stats.get("horizon_covers_J_ub") else f"within {csp.horizon} batches"
    proof = (f"proven optimal {scope}" if csp.status == "optimal"
             else f"not proven: lower bound {csp.bound * 1e3:.3f} ms ({scope}), gap {csp.gap:.2%}")
    print(f"CP-SAT ({csp.horizon}-batch horizon, deterministic time {csp.stats.get('deterministic_time', 0):.1f} of "
          f"{args.time_limit:g}, {csp.solve_seconds:.1f} s wall): total latency {csp.latency * 1e3:.3f} ms, "
          f"{csp.schedule.num_evictions} evictions, {proof}")
    for line in csp.schedule.describe(instance):
        print("  " + line)
    return 0

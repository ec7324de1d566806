"""Randomized check of ``llmsched theory optimal-schedule``'s claim (Kim et al., "The Effect of Scheduling and
Preemption on the Efficiency of LLM Inference Serving", §3): a schedule the CP-SAT model proves optimal is never
beaten by any schedule, so by no registered scheduler run offline on the same instance with the same cost model,
and never by the exhaustive search.

Each case draws a few requests (all at t = 0), a KV size M and a token budget C, and runs every registered
scheduler offline on the replica (llmsched/theory/infermax/offline.py: block size 1, M slots, C tokens a step)
with InferMax's linear cost; the CP-SAT optimum (and, on tiny instances, the exhaustive search) must be at or
below every one of them.

    PYTHONPATH=$PWD nice -n 10 python scripts/optimal_truths.py --cases 30 --seed 0
"""
from __future__ import annotations

import argparse
import random
import sys
import warnings

from llmsched.batchtime.linear import INFERMAX_COEFFICIENTS, LinearBatchTime
from llmsched.schedulers.registry import scheduler_info, scheduler_names
from llmsched.theory.infermax.offline import offline_replica, run_offline
from llmsched.theory.infermax.optimal import optimal_schedule
from llmsched.theory.infermax.schedule import Instance

SCHEDULERS = [n for n in scheduler_names() if not n.startswith("test-")]


def draw(rng: random.Random) -> Instance:
    n = rng.randint(2, 4)
    tiny = rng.random() < 0.4
    inputs = tuple(rng.randint(1, 6 if tiny else 64) for _ in range(n))
    outputs = tuple(rng.randint(1, 5 if tiny else 8) for _ in range(n))
    least = max(i + o - 1 for i, o in zip(inputs, outputs))
    M = rng.randint(least, max(least, 2 * max(inputs)) + sum(inputs) // 2)
    C = rng.choice([max(inputs), 8, 16, 32, 64, 4096])
    C = max(C, 1)
    return Instance(inputs, outputs, M, C)


def scheduler_latencies(instance: Instance, cost: LinearBatchTime) -> dict:
    out = {}
    for name in SCHEDULERS:
        try:
            rep = offline_replica(name, cost, instance.kv_slots, instance.batch_tokens,
                                  oracle=scheduler_info(name)["needs_oracle"])
            res = run_offline(rep, instance.requests())
        except Exception as e:  # a scheduler that cannot run offline here: noted, not compared
            out[name] = f"{type(e).__name__}: {str(e)[:80]}"
            continue
        if res.rejected == 0:
            out[name] = res.latency
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=20.0)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rng = random.Random(args.seed)
    cost = LinearBatchTime.from_infermax(**INFERMAX_COEFFICIENTS["llama-2-7b/a100"])
    bad, worst = 0, None
    for case in range(args.cases):
        inst = draw(rng)
        tiny = max(inst.inputs) <= 6 and max(inst.outputs) <= 5 and inst.n <= 3
        rep = optimal_schedule(inst, cost, time_limit=args.time_limit, workers=1, brute_force=tiny)
        lat = scheduler_latencies(inst, cost)
        numbers = {k: v for k, v in lat.items() if isinstance(v, float)}
        best_name = min(numbers, key=numbers.get)
        opt = rep.csp.latency if rep.csp.status == "optimal" else None
        exact = rep.brute_force[0] if rep.brute_force else None
        line = (f"[{case}] I={inst.inputs} O={inst.outputs} M={inst.kv_slots} C={inst.batch_tokens}: csp "
                f"{rep.csp.status} {rep.csp.latency} bound {rep.csp.bound}; exact {exact}; best scheduler "
                f"{best_name} {numbers[best_name]:.6g}")
        verdicts = []
        for reference, label in ((opt, "csp optimal"), (exact, "exhaustive")):
            if reference is None:
                continue
            margin = numbers[best_name] / reference - 1
            worst = margin if worst is None else min(worst, margin)
            if margin < -1e-9:
                verdicts.append(f"VIOLATION: {best_name} beats the {label} by {-margin:.3%}")
        if opt is not None and exact is not None and abs(opt / exact - 1) > 1e-6:
            verdicts.append(f"VIOLATION: csp optimal {opt} != exhaustive {exact}")
        if rep.csp.bound is not None and exact is not None and rep.csp.bound > exact * (1 + 1e-6):
            verdicts.append(f"VIOLATION: csp lower bound {rep.csp.bound} above the exhaustive optimum {exact}")
        crashed = [f"{k} ({v})" for k, v in lat.items() if isinstance(v, str)]
        print(line, "; ".join(verdicts) or "ok", ("; crashed: " + ", ".join(crashed)) if crashed else "",
              flush=True)
        bad += bool(verdicts)
    print(f"worst margin (best scheduler / optimum - 1): {worst}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

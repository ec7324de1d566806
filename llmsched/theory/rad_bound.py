"""``llmsched theory rad-bound``: Bari et al.'s Theorem 1 figure r/T̄ᴿ and Theorem 2's condition on n.

r/T̄ᴿ bounds every policy only in the paper's cost model (eq. 7, no fixed cost per batch); under the simulator's
roofline it is the throughput of RAD's own batching regime, which hybrid batchers exceed
(llmsched/theory/rad_slai/theorems.py). The output says so and prints the sound bound of
llmsched/theory/throughput_bound.py beside it.
"""
from __future__ import annotations

import json
import math

import numpy as np

from ..argtypes import count, positive
from ..batchtime.registry import make_batch_time_model
from ..experiment import RunConfig
from ..hardware.gpus import gpu as gpu_preset
from ..hardware.models import model as model_preset
from ..workload.length_presets import length_preset
from ..workload.lengths import Capped
from .rad_slai.bound_check import TiledPrompts
from .rad_slai.theorems import rad_bound, saturated_throughput, theorem2_holds, theorem2_min_n
from .throughput_bound import engine_limits, throughput_bound

NAME = "rad-bound"
HELP = ("Bari et al. (seed 000) Theorem 1: mean optimal service time T̄ᴿ and r/T̄ᴿ, RAD's regime (a bound "
        "only in the paper's cost model), beside the sound throughput bound; Theorem 2's n")


def add_arguments(p) -> None:
    p.add_argument("--workload", default="sharegpt", help="length preset (default sharegpt)")
    p.add_argument("--model", default="mistral-7b", help="model preset (default mistral-7b)")
    p.add_argument("--gpu", default="rtx-6000-ada", help="GPU preset (default rtx-6000-ada); its tile gives "
                                                        "t*_col and t*_lcm")
    p.add_argument("--batch-time", default="roofline-staircase",
                   help="batch-time model kind, as the simulator's --batch-time (default roofline-staircase)")
    p.add_argument("--replicas", type=int, default=1, help="r, identical replicas (default 1)")
    p.add_argument("--max-total-tokens", type=count, default=None, help="cap prompt+output (as the simulator)")
    p.add_argument("--tile-prompts", action="store_true",
                   help="round prompts up to a multiple of t*_lcm (the paper's Assumption 3)")
    p.add_argument("--convention", choices=("engine", "theory"), default="engine",
                   help="engine: L^D−1 decodes (the simulator); theory: L^D decodes (the paper's count)")
    p.add_argument("--samples", type=int, default=20000, help="Monte-Carlo samples of the lengths (default 20000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n", type=count, default=None, help="RAD's cycle parameter: check Theorem 2 at --rate")
    p.add_argument("--rate", type=positive, default=None, help="arrival rate (req/s) for the Theorem 2 check")
    p.add_argument("--json", action="store_true", help="print JSON")


def compute(args) -> dict:
    if args.samples < 2:
        raise ValueError(f"--samples must be >= 2, got {args.samples}")
    if args.replicas < 1:
        raise ValueError(f"--replicas must be >= 1, got {args.replicas}")
    g = gpu_preset(args.gpu)
    m = model_preset(args.model)
    bt = make_batch_time_model(args.batch_time, m, g)
    t_col = getattr(bt, "t_col", g.t_col)
    t_lcm = math.lcm(g.t_row, t_col, g.t_red)
    lengths = length_preset(args.workload)
    if args.max_total_tokens:
        lengths = Capped(lengths, args.max_total_tokens)
    if args.tile_prompts:
        lengths = TiledPrompts(lengths, t_lcm)
    prompts, outputs = lengths.sample(args.samples, np.random.default_rng(args.seed))
    bound = rad_bound(bt, prompts, outputs, t_col, t_lcm, args.replicas, args.convention)
    out = {"workload": args.workload, "model": m.name, "gpu": g.name, "batch_time": args.batch_time,
           **bound.as_dict(),
           "capacity_meaning": "RAD's regime: the most RAD's t*_col-request, t*_lcm-token batches serve; an upper "
                               "bound for every policy only in the paper's cost model (seed 000 eq. 7)"}
    limits = engine_limits(RunConfig(model=m.name, gpu=g.name, batch_time=args.batch_time))
    sound = throughput_bound(bt, prompts, outputs, limits, args.replicas)
    out["sound_bound_rps"] = sound.requests_per_s
    out["sound_bound"] = sound.as_dict()
    if args.n is not None or args.rate is not None:
        if args.n is None or args.rate is None:
            raise ValueError("the Theorem 2 check needs both --n and --rate")
        eps = 1 - args.rate * bound.t_bar / bound.replicas
        out["theorem2"] = {"n": args.n, "rate": args.rate, "eps": eps,
                           "min_n": theorem2_min_n(t_col, bound.t_max, bound.t_bar, eps) if 0 < eps < 1 else None,
                           "holds": theorem2_holds(args.n, args.rate, bound),
                           "saturated_rps_per_replica_at_least": saturated_throughput(args.n, bound.t_bar,
                                                                                      bound.t_max, t_col)}
    return out


def run(args) -> int:
    out = compute(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
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

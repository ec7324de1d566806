"""``llmsched reproduce deferred-prefill``: Mohanty et al.'s Table 1 experiment in the simulator;
llmsched/reproduce/deferred_prefill.py runs it."""
from __future__ import annotations

from ..reproduce.deferred_prefill import TIMINGS, WORKLOADS, reproduce
from ..reproduce.deferred_prefill_runs.measured_step_time import PROFILE
from .package_commands import run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--parts", default="table,sensitivity", help="table (Table 1), sensitivity (default both)")
    p.add_argument("--models", default="granite,llama", help="granite, llama (default both)")
    p.add_argument("--timings", default=",".join(TIMINGS), help="measured, roofline, paper (default all)")
    p.add_argument("--workloads", default="synthetic,sharegpt",
                   help=f"{', '.join(WORKLOADS)} (default synthetic,sharegpt)")
    p.add_argument("--profile", default=PROFILE, help="Vidur A100 Llama-3-8B mlp.csv for the measured timing "
                                                      "(default: found under ../shared/data/profiles)")
    p.add_argument("--K", default=None, help="thresholds, comma-separated (default a spread; K* is always added)")
    p.add_argument("--requests", type=int, default=None, help="requests per run (default 12·C; --fast 3·C + 1200)")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel processes (default 1)")
    run_field_option(p, "seed")
    p.add_argument("--fast", action="store_true", help="Granite, synthetic, K = 1, 26 and K*: seconds, for CI")
    p.add_argument("--out", default=None, help="write results.json and results.csv here")

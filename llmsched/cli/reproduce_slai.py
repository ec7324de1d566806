"""``llmsched reproduce slai``: Bari et al.'s Fig. 7/8 and capacities; llmsched/reproduce/slai.py runs them."""
from __future__ import annotations

from ..reproduce.slai import reproduce
from .package_commands import experiment_options, run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true",
                   help="CI size: rates 0.8 and 1.6 (extended to 2.0), 180 s, 5%% paying only (seconds)")
    experiment_options(p, "out")
    p.add_argument("--rates", default=None, help="comma-separated rates (default 0.2,0.4,...,1.6)")
    p.add_argument("--max-rate", type=float, default=None,
                   help="extend a scheduler that meets every target at the top rate, 0.2 req/s at a time, up to "
                        "this rate (default 2.4; --fast 2.0)")
    run_field_option(p, "duration", "seconds of arrivals and horizon (default 2100)")
    p.add_argument("--shares", default=None, help="paying shares to run (default 0.05,0.5,0.95)")
    p.add_argument("--per-seq-overhead", type=float, default=0.0,
                   help="extra seconds per sequence per step in the batch-time model (a sensitivity check for the "
                        "paper engine's Python cost; default 0)")
    experiment_options(p, "jobs")
    run_field_option(p, "seed")

"""``llmsched reproduce splitwise``: Splitwise's iso-power and iso-cost design points on its Azure traces;
llmsched/reproduce/splitwise.py runs them."""
from __future__ import annotations

from ..reproduce.splitwise import reproduce
from .package_commands import experiment_options, run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="CI size: 1/20 of the clusters, 300 requests, 30%% resolution")
    experiment_options(p, "out")
    p.add_argument("--scale", type=float, default=None,
                   help="divide the clusters' machine counts (and so the traffic they carry) by this (default "
                        "%(default)s)")
    run_field_option(p, "num_requests", "requests of each trace per probe (default %(default)s)")
    experiment_options(p, "resolution", "jobs")
    run_field_option(p, "batch_time", "the runs' batch-time model (default %(default)s; `engine` is the one "
                                      "calibrated on these measurements' TP 2 cells, docs/batch-time.md)")
    run_field_option(p, "pd_first_token", "which machine gives the client its first token (default %(default)s, "
                                          "Splitwise's prompt machine; `decode`, vLLM's proxy, is the ablation of "
                                          "docs/disaggregation.md's column B)")
    run_field_option(p, "seed")

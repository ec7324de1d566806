"""``llmsched reproduce splitwise``: Splitwise's iso-power and iso-cost design points on its Azure traces;
llmsched/reproduce/splitwise.py runs them."""
from __future__ import annotations

from ..reproduce.splitwise import reproduce
from .package_commands import run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="CI size: 1/20 of the clusters, 300 requests, 30%% resolution")
    p.add_argument("--out", default=None, help="output folder (default %(default)s)")
    p.add_argument("--scale", type=float, default=None,
                   help="divide the clusters' machine counts (and so the traffic they carry) by this (default "
                        "%(default)s)")
    run_field_option(p, "num_requests", "requests of each trace per probe (default %(default)s)")
    p.add_argument("--resolution", type=float, default=None, help="capacity resolution (default %(default)s)")
    p.add_argument("--jobs", type=int, default=None, help="parallel runs (default %(default)s)")
    run_field_option(p, "batch_time", "the runs' batch-time model (default %(default)s; `engine` is the one "
                                      "calibrated on these measurements' TP 2 cells, docs/batch-time.md)")
    run_field_option(p, "seed")

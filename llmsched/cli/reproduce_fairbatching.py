"""``llmsched reproduce fairbatching``: Lyu et al.'s capacity, SLO sweep and ablations in the simulator;
llmsched/reproduce/fairbatching.py runs them."""
from __future__ import annotations

import os

from ..reproduce.fairbatching import MODELS, PARTS, TRACES, report, reproduce
from .package_commands import keywords, print_report

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="tiny CI version: one model, one trace, 2 rates (seconds)")
    p.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)} (default: all)")
    p.add_argument("--models", default=None, help=f"comma list of {', '.join(MODELS)}")
    p.add_argument("--traces", default=None, help=f"comma list of {', '.join(TRACES)}")
    p.add_argument("--requests", type=int, default=None, help="requests per single-node run (default 400)")
    p.add_argument("--cluster-requests", type=int, default=None, help="requests per cluster run (default 2000)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel simulations")
    p.add_argument("--out", default=None, help="write results.json here (a directory)")


def run(args) -> int:
    return print_report(reproduce(**keywords(args, "out")), report, args.out)

"""``llmsched reproduce fairness``: the targets for tenants and priorities; llmsched/reproduce/fairness.py
measures them."""
from __future__ import annotations

from ..reproduce.fairness import reproduce
from .package_commands import run_field_option, run_field_options

FUNCTION = reproduce


def add_arguments(p) -> None:
    run_field_option(p, "duration", "seconds of arrivals per run (default 300; --fast 60)")
    p.add_argument("--fast", action="store_true", help="short runs for CI")
    run_field_option(p, "seed", "random seed")
    run_field_options(p, "model", "gpu")
    p.add_argument("--out", default=None, help="write results.json and service.png (each tenant's service over "
                                               "time) into this folder")

"""``llmsched reproduce distserve``: DistServe (OSDI 2024) vs colocated vLLM, per-GPU rate at 90% SLO attainment on
the artifact's settings; llmsched/reproduce/distserve.py runs it."""
from __future__ import annotations

from ..reproduce.distserve import reproduce
from .package_commands import run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="CI size: the OPT-13B chatbot alone, half the requests, one "
                                                       "seed")
    p.add_argument("--out", default=None, help="output folder (default %(default)s)")
    p.add_argument("--seeds", type=int, default=None, help="seeds a rate's attainment is averaged over (default "
                                                           "%(default)s)")
    p.add_argument("--jobs", type=int, default=None, help="parallel runs (default %(default)s)")
    run_field_option(p, "seed")

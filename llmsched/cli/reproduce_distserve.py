"""``llmsched reproduce distserve``: DistServe (OSDI 2024) vs colocated vLLM, per-GPU rate at 90% SLO attainment on
the artifact's settings; llmsched/reproduce/distserve.py runs it."""
from __future__ import annotations

from ..reproduce.distserve import reproduce
from .package_commands import experiment_options, run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="CI size: the OPT-13B chatbot alone, half the requests, one "
                                                       "seed")
    experiment_options(p, "out")
    p.add_argument("--seeds", type=int, default=None, help="seeds a rate's attainment is averaged over (default "
                                                           "%(default)s)")
    experiment_options(p, "jobs")
    run_field_option(p, "seed")

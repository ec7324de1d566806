"""``llmsched reproduce pd-crossover``: colocated vs 1P1D vs 2P1D on prompt-heavy, balanced and decode-heavy traffic;
llmsched/reproduce/pd_crossover.py runs it."""
from __future__ import annotations

from ..reproduce.pd_crossover import reproduce
from .package_commands import experiment_options, run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="CI size: 40 s probes, 15%% resolution")
    experiment_options(p, "out")
    run_field_option(p, "duration", "seconds of arrivals of each probe (default %(default)s)")
    experiment_options(p, "resolution", "jobs")
    run_field_option(p, "seed")

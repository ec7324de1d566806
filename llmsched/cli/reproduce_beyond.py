"""``llmsched reproduce beyond``: every competitor tuned for the same SLOs and traffic, then measured on held-out
seeds; llmsched/reproduce/beyond.py runs it."""
from __future__ import annotations

from ..capacity.cache import default_dir
from ..reproduce.beyond import FAST_COMPETITORS, HELD_OUT_SEED, SETTINGS, reproduce
from .package_commands import experiment_options, run_field_option

FUNCTION = reproduce


def add_arguments(p) -> None:
    p.add_argument("--settings", default="named",
                   help="named (the issue's six), unnamed (others), all, or comma-separated setting names: "
                        + ", ".join(s.name for s in SETTINGS))
    p.add_argument("--schedulers", default=None, help="competitors (default: the issue's eight; --fast: "
                                                       f"{', '.join(FAST_COMPETITORS)})")
    p.add_argument("--budget", type=int, default=24, help="capacity searches per tuning (default 24)")
    run_field_option(p, "duration", "seconds of arrivals per probe (default %(default)g)")
    p.add_argument("--other-duration", type=float, default=None,
                   help="seconds of arrivals per probe on the other workload (default: --duration); the other "
                        "workload of a ShareGPT setting is LMSYS-Chat's short requests at ~30x the rate, so a "
                        "probe of the same length is ~30x the requests")
    experiment_options(p, "resolution")
    p.add_argument("--held-out", type=int, default=1, help=f"held-out seeds ({HELD_OUT_SEED}, ...; default 1)")
    p.add_argument("--search-seed", type=int, default=0, help="TPE's seed")
    p.add_argument("--no-untuned-checks", dest="untuned_checks", action="store_false",
                   help="measure only the tuned settings on the held-out seeds and the other workload (half the "
                        "probes; the untuned capacity on the tuning seed is still reported)")
    p.add_argument("--ablation", action="store_true",
                   help="also measure goodput (at its tuned setting) with each lever removed on the held-out seeds")
    p.add_argument("--fast", action="store_true",
                   help="CI size: sharegpt-a100 only, sarathi/slai/goodput, 60 s probes, budget 2, resolution 20%%")
    p.add_argument("--jobs", type=int, default=None, help="parallel probes (default: CPU count)")
    p.add_argument("--cache", default=None, help=f"probe cache folder (default {default_dir()})")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the probe cache")
    p.add_argument("--reuse", default=None, metavar="BEYOND.json",
                   help="take each (setting, scheduler)'s tuned setting from this earlier run's beyond.json instead of "
                        "tuning it again (the held-out and other-workload capacities are measured anew)")
    experiment_options(p, "out")

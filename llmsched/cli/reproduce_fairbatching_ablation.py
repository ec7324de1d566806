"""``llmsched reproduce fairbatching-ablation``: Lyu et al.'s capacity gap factor by factor;
llmsched/reproduce/fairbatching_ablation.py runs it."""
from __future__ import annotations

from ..reproduce.fairbatching_ablation import (CASES, CLUSTER_SYSTEMS, LEVELS, REFERENCE, TPOT, TTFT, ablate, report,
                                               settings)
from ..workload.lengths.length_presets import LENGTH_PRESETS
from .package_commands import keywords, print_report, run_field_option

FUNCTION = settings


def add_arguments(p) -> None:
    p.add_argument("--fast", action="store_true", help="CI version: reference and overhead levels, Llama-3.1-8B/A800, "
                   "60 requests, budgets 128/512, 25%% resolution")
    p.add_argument("--case", default=None, help=f"one of {', '.join(CASES)} (default llama-3.1-8b/a800: on the "
                   "roofline H20, 7%% of azure-conv prompts cannot reach their first token in 500 ms even alone, so "
                   "qwen3-14b/h20's capacity at 90%% attainment is that of a near-idle GPU; docs/fairbatching.md)")
    p.add_argument("--factors", default=None, help="comma list of factors to run besides the reference ('none': "
                   "the reference alone): " + ", ".join(dict.fromkeys(lv.factor for lv in LEVELS if lv != REFERENCE)))
    p.add_argument("--requests", type=int, default=None, help="requests per probe (default 300; --fast 60)")
    p.add_argument("--resolution", type=float, default=None, help="capacity bisection resolution (default 0.04)")
    p.add_argument("--parts", default=None, help="comma list of single, latency, cluster (default all; --fast: "
                   "single,latency); latency and cluster run at the reference, overhead and batch-time levels")
    run_field_option(p, "workload", "length preset (default %(default)s, replayed from the Azure trace; others get "
                                    "gamma arrivals, CV 2): " + ", ".join(LENGTH_PRESETS))
    p.add_argument("--arrivals", default="trace", help="the reference's arrivals: trace (default) or gamma:CV")
    p.add_argument("--slo", default=None, help=f"TTFT,TPOT in seconds (default {TTFT:g},{TPOT:g}; the paper gives "
                   "its long-prompt AzureTrace 2,0.05)")
    run_field_option(p, "replicas", "replicas of the cluster part (default %(default)s)")
    p.add_argument("--cluster-systems", default=None, help="comma list of the cluster part's systems (default the "
                   "paper's four): " + ", ".join(CLUSTER_SYSTEMS) + "; 'all' for every one")
    p.add_argument("--sweep", action="store_true", help="cluster part: also run every system on one grid of rates "
                   "(0.8-1.89 x the highest shared capacity, 10%% apart; --fast: 3 points) and report the paper's "
                   "peak EffRPS and the shared criterion from the same runs")
    p.add_argument("--loads", default=None, help="latency part: comma list of loads, x the best baseline's "
                   "capacity (default 1.2)")
    p.add_argument("--latency-budgets", default=None, help="latency part: Sarathi token budgets to compare at each "
                   "load instead of the tuned one (e.g. 128,256,512)")
    p.add_argument("--jobs", type=int, default=1, help="parallel probes (default 1: the machine is shared)")
    p.add_argument("--out", default=None, help="write results.json here (a directory)")


def run(args) -> int:
    return print_report(ablate(settings(**keywords(args, "out"))), report, args.out)

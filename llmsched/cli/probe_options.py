"""The options `capacity`, `plan` and `tune` share: the SLOs a probe must meet, where probes run and whether they are
cached."""
from __future__ import annotations

from typing import Callable

from ..bounds import MIN_RATE
from ..capacity.cache import default_dir
from .argtypes import number
from ..capacity.slo import valid_metrics


def add_slo_options(p) -> None:
    """``--slo`` (repeatable: each adds) and ``--attainment``, as capacity, plan and tune take them."""
    p.add_argument("--slo", action="append",
                   help=f"comma-separated METRIC<=LIMIT, e.g. 'ttft_p50<=2s,tbt_p99<=200ms' (repeatable: each adds); "
                        f"metrics: {', '.join(valid_metrics())} (vLLM's itl, e2el, median also), TIER.METRIC for one "
                        f"tier. Default: none (stability only)")
    p.add_argument("--attainment", type=float, default=None,
                   help="also require this fraction of requests to meet their tier's targets (--tiers)")


def add_search_options(p, resolution: float) -> None:
    """``--resolution``, ``--seeds`` and ``--max-rate``: how capacity and tune run each capacity search."""
    p.add_argument("--resolution", type=float, default=resolution,
                   help=f"relative width of each capacity search's final interval (default {resolution:g})")
    p.add_argument("--seeds", type=int, default=1, help="seeds per probe (--seed, --seed+1, ...); a probe meets "
                                                        "only if every seed does (default 1)")
    p.add_argument("--max-rate", type=number(float, low=MIN_RATE), default=None,
                   help="never probe above this rate, requests/s (default 1024x start)")


def add_search_parser(sub, name: str, help: str, description: str, add_scheduler: Callable, resolution: float):
    """The parser of a command that runs capacity searches (capacity, tune): its scheduler option(s) first, each
    command's own (``add_scheduler(parser)``), then the SLOs and how each search runs. Returns the parser."""
    p = sub.add_parser(name, help=help, description=description)
    add_scheduler(p)
    add_slo_options(p)
    add_search_options(p, resolution)
    return p


def probe_seeds(args, first: int) -> tuple[int, ...]:
    """Every probe's seeds: ``first`` and the ``--seeds`` - 1 after it."""
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    return tuple(range(first, first + args.seeds))


def add_probe_options(p) -> None:
    p.add_argument("--jobs", type=int, default=None, help="parallel probes (default: CPU count)")
    p.add_argument("--executor", default="local", choices=("local", "ray"), help="local process pool or Ray tasks")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (HOST:PORT, ray://HOST:10001, auto); "
                                                       "default: start a local Ray")
    p.add_argument("--cache", default=None, help=f"probe cache folder (default {default_dir()})")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the probe cache")


def check_cache_options(args) -> None:
    if args.no_cache and args.cache:
        raise ValueError("--cache and --no-cache contradict each other; give one")


def probe_cache(args):
    """The probe cache the options ask for (None with --no-cache)."""
    from ..capacity.cache import ProbeCache
    return None if args.no_cache else ProbeCache(args.cache)

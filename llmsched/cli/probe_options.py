"""Where probes run and whether they are cached: the options `capacity`, `plan` and `tune` share."""
from __future__ import annotations

from ..capacity.cache import default_dir


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

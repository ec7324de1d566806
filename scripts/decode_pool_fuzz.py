"""Can a scheduler run a disaggregated fleet's decode pool? The conservation fuzz (tests/test_fuzz_conservation.py)
on its disaggregated seeds only, with every decode pool running the schedulers named, each treated as if it declared
``Scheduler.serves_transferred_kv``: the check to run before setting that flag on a policy.

    python scripts/decode_pool_fuzz.py priority --first 0 --count 4000
    python scripts/decode_pool_fuzz.py vtc,wfq --count 2000

Prints how many disaggregated seeds ran, were refused before the run, or failed, and the first failures (replay one
with ``LLMSCHED_FUZZ_SEED=<seed>`` after setting the flag).
"""
from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import test_fuzz_conservation as fuzz  # noqa: E402

from llmsched.schedulers.registry import create_scheduler  # noqa: E402


def disaggregated(seed: int) -> bool:
    """Whether the fuzz runs ``seed``'s config as a disaggregated fleet."""
    return fuzz.disaggregation_drawn(np.random.default_rng([41, seed]))


def serve_decode_pools_with(names: list[str]) -> None:
    for name in names:
        type(create_scheduler(name)).serves_transferred_kv = True
    fuzz.decode_schedulers = lambda: names


def outcome(seed: int):
    return seed, fuzz.outcome(seed)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("schedulers", help="comma-separated scheduler names for every decode pool")
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int, default=2000, help="seeds drawn (about 3 in 10 are disaggregated)")
    p.add_argument("--show", type=int, default=5, help="failures printed")
    args = p.parse_args(argv)
    serve_decode_pools_with(args.schedulers.split(","))
    seeds = [s for s in range(args.first, args.first + args.count) if disaggregated(s)]
    with multiprocessing.get_context("fork").Pool(2) as pool:  # fork: the workers keep the flag set above
        results = pool.map(outcome, seeds, chunksize=4)
    counts = collections.Counter(kind for _, (kind, _) in results)
    print(f"{len(seeds)} disaggregated seeds from {args.first}: {counts['ok']} ran, {counts['refused']} refused "
          f"before the run, {counts['failed']} failed")
    for seed, (kind, message) in [r for r in results if r[1][0] == "failed"][:args.show]:
        print(f"seed {seed}: {message[:2000]}\n")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())

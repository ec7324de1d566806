"""``llmsched reproduce fairness``: the targets for tenants and priorities; llmsched/reproduce/fairness.py
measures them."""
from __future__ import annotations

from ..reproduce.fairness import reproduce
from .package_commands import keywords

NAME = "fairness"
HELP = "tenants: vtc/wfq light-tenant TTFT and throughput, Jain's index, priority TTFT p99 and thrown-away work"


def add_arguments(p) -> None:
    p.add_argument("--duration", type=float, default=None, help="seconds of arrivals per run (default 300; --fast 60)")
    p.add_argument("--fast", action="store_true", help="short runs for CI")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--model", default="llama-3-8b", help="model preset (default llama-3-8b)")
    p.add_argument("--gpu", default="a100", help="GPU preset (default a100)")
    p.add_argument("--out", default=None, help="write results.json and service.png (each tenant's service over "
                                               "time) into this folder")


def run(args) -> int:
    reproduce(**keywords(args))
    return 0
